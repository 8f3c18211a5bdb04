#include "planner/schedules/zb_auto.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "planner/schedules/adaptive.h"
#include "planner/schedules/block_reorder.h"
#include "planner/schedules/memory_family.h"
#include "planner/schedules/order_timing.h"

namespace pw {
namespace {

constexpr TimePs kNever = std::numeric_limits<TimePs>::max();

class Greedy {
 public:
  Greedy(const Placement& pl, int m, const CostTable& c, const std::vector<double>& limits,
         const GreedyVariant& v)
      : pl_(pl), m_(m), c_(c), limits_(limits), v_(v) {
    const int S = pl.num_stages(), D = pl.num_devices;
    stages_of_.resize(D);
    for (int s = 0; s < S; ++s) stages_of_[pl.stages[s].device].push_back(s);
    reserve_.assign(S, 0.0);
    for (int d = 0; d < D; ++d) {
      auto& st = stages_of_[d];
      std::stable_sort(st.begin(), st.end(),
                       [&](int a, int b) { return pl.stages[a].index > pl.stages[b].index; });
      // A forward keeps room for one forward of every deeper stage on the device.
      double deeper = 0;
      for (int s : st) {
        reserve_[s] = deeper;
        deeper += std::max(0.0, c.mem(s, ActionKind::kF));
      }
    }
    prev_.resize(S);
    next_.resize(S);
    for (int s = 0; s < S; ++s) {
      prev_[s] = pl.prev_stage(s);
      next_[s] = pl.next_stage(s);
    }
    nf_.assign(S, 0);
    nb_.assign(S, 0);
    // Microbatch j runs in pipeline j * P / m (first share in pipeline 0, and so on).
    const int P = pl.num_pipelines();
    mbs_.resize(P);
    for (int j = 0; j < m; ++j) mbs_[static_cast<std::size_t>(j) * P / m].push_back(j);
    count_.resize(S);
    pipe_.resize(S);
    mb0_.assign(S, 0);
    hop_prev_.assign(S, 0);
    hop_next_.assign(S, 0);
    for (int s = 0; s < S; ++s) {
      pipe_[s] = pl.stages[s].pipeline;
      count_[s] = static_cast<int>(mbs_[pipe_[s]].size());
      // A pipeline's microbatches are consecutive: its pos-th is the first + pos.
      if (count_[s] > 0) mb0_[s] = mbs_[pipe_[s]][0];
      const int dev = pl.stages[s].device;
      if (prev_[s] >= 0 && pl.stages[prev_[s]].device != dev) hop_prev_[s] = c.comm[prev_[s]];
      if (next_[s] >= 0 && pl.stages[next_[s]].device != dev) hop_next_[s] = c.comm[next_[s]];
    }
    S_ = S;
    f_end_.assign(static_cast<std::size_t>(S) * m, kNever);
    b_end_.assign(static_cast<std::size_t>(S) * m, kNever);
    clock_.assign(D, 0);
    mem_.assign(D, 0.0);
    in_flight_.assign(D, 0);
    blocked_.assign(D, 0);
    fb_left_.assign(D, 0);
    left_.assign(D, 0);
    for (int s = 0; s < S; ++s) {
      const int d = pl.stages[s].device;
      fb_left_[d] += 2 * count_[s];
      left_[d] += (v.fused_backward ? 2 : 3) * count_[s];
    }
    for (int d = 0; d < D; ++d)
      if (has_work(d)) by_clock_.push_back(d);  // every clock is 0: index order
    w_queue_.resize(D);
    w_head_.assign(D, 0);
    order_.resize(D);
    x_f_end_.assign(static_cast<std::size_t>(S) * m, 0);
    x_b_end_.assign(static_cast<std::size_t>(S) * m, 0);
    x_clock_.assign(D, 0);
    x_first_.assign(D, kNever);
    x_mem_.assign(D, 0.0);
    x_peak_.assign(D, 0.0);
    remaining_ = static_cast<long long>(v.fused_backward ? 2 : 3) * (S / P) * m;
  }

  bool run() {
    while (remaining_ > 0) {
      const int d = pick_device();
      if (d >= 0) {
        step(d);
      } else if (!force_w()) {
        return false;
      }
    }
    return true;
  }

  std::vector<std::vector<Action>>& order() { return order_; }

  // The order's timing as the fixed-cost evaluator computes it (sim/evaluator.h: every pass as
  // early as its device and its inputs allow), so callers need not evaluate the schedule again.
  GreedyTiming timing() const {
    GreedyTiming out;
    TimePs first = kNever, last = 0;
    for (std::size_t d = 0; d < x_clock_.size(); ++d) {
      const TimePs f = x_first_[d] == kNever ? 0 : x_first_[d];
      first = std::min(first, f);
      last = std::max(last, x_clock_[d]);
      out.cost = std::max(out.cost, x_clock_[d] - f);
      out.peak_memory = std::max(out.peak_memory, x_peak_[d]);
    }
    out.makespan = last > first ? last - first : 0;
    out.w_disagree = w_disagree_;
    return out;
  }

  unsigned w_disagree() const { return w_disagree_; }

 private:
  int mb(int s, int pos) const { return mb0_[s] + pos; }
  // Pass ends are kept microbatch-major: a stage and its neighbours for one microbatch are close.
  std::size_t at(int s, int j) const { return static_cast<std::size_t>(j) * S_ + s; }

  // Ready time of the next B of stage s, kNever when a prerequisite has not run yet.
  TimePs b_ready(int s) const {
    if (nb_[s] >= count_[s] || nb_[s] >= nf_[s]) return kNever;
    const int j = mb(s, nb_[s]);
    TimePs t = f_end_[at(s, j)];
    if (next_[s] >= 0) {
      const TimePs e = b_end_[at(next_[s], j)];
      if (e == kNever) return kNever;
      t = std::max(t, e + hop_next_[s]);
    }
    return t;
  }

  bool f_allowed(int s, int d) const {
    if (nf_[s] >= count_[s]) return false;
    if (v_.max_in_flight > 0 && in_flight_[d] >= v_.max_in_flight) return false;
    if (v_.staggered_extra >= 0 && in_flight_[d] >= v_.stagger_slope * (pl_.num_devices - d) -
                                                        (v_.stagger_slope - 1) + v_.staggered_extra)
      return false;
    if (limits_[d] <= 0) return true;
    return mem_[d] + c_.mem(s, ActionKind::kF) + reserve_[s] <= limits_[d] + 1e-9;
  }

  TimePs f_ready(int s) const {
    if (prev_[s] < 0) return 0;
    const int j = mb(s, nf_[s]);
    const TimePs e = f_end_[at(prev_[s], j)];
    return e == kNever ? kNever : e + hop_prev_[s];
  }

  bool has_work(int d) const { return left_[d] > 0; }

  // The device with work that is not blocked and has the earliest clock (the lowest index on a
  // tie): the first such in by_clock_, which keeps the devices with work in (clock, index)
  // order.
  int pick_device() const {
    for (int d : by_clock_)
      if (!blocked_[d]) return d;
    return -1;
  }

  // Device d's clock has changed (or it ran out of work): move it to its place in by_clock_.
  void reposition(int d) {
    by_clock_.erase(std::find(by_clock_.begin(), by_clock_.end(), d));
    if (!has_work(d)) return;
    const auto before = [&](int a, int b) {
      return clock_[a] != clock_[b] ? clock_[a] < clock_[b] : a < b;
    };
    by_clock_.insert(std::lower_bound(by_clock_.begin(), by_clock_.end(), d, before), d);
  }

  void exec(int d, ActionKind k, int s, int j) {  // NOLINT: k is rewritten for BW
    const TimePs t = clock_[d];
    const TimePs e = t + c_.time(s, k);
    clock_[d] = e;
    mem_[d] += c_.mem(s, k);
    // A blocked device waits for nothing it can see: no B or F of its stages has a known ready
    // time and its W waits. Only a pass that makes one known frees it: its own, a forward of the
    // stage before one of its stages, a backward of the stage after.
    blocked_[d] = 0;
    if (k == ActionKind::kF && next_[s] >= 0) blocked_[pl_.stages[next_[s]].device] = 0;
    if (k == ActionKind::kB && prev_[s] >= 0) blocked_[pl_.stages[prev_[s]].device] = 0;
    if (k == ActionKind::kF) {
      f_end_[at(s, j)] = e;
      ++nf_[s];
      ++in_flight_[d];
    } else if (k == ActionKind::kB) {
      b_end_[at(s, j)] = e;
      ++nb_[s];
      --in_flight_[d];
      if (v_.fused_backward) {
        clock_[d] = t + c_.time(s, ActionKind::kBW);
        b_end_[at(s, j)] = clock_[d];
        mem_[d] += c_.mem(s, ActionKind::kBW) - c_.mem(s, ActionKind::kB);
        k = ActionKind::kBW;
      } else {
        w_queue_[d].push_back(Action{ActionKind::kW, static_cast<std::int16_t>(s), j});
      }
    }
    order_[d].push_back(Action{k, static_cast<std::int16_t>(s), j});
    track(d, k, s, j);
    --remaining_;
    --left_[d];
    if (k != ActionKind::kW) --fb_left_[d];
    reposition(d);
  }

  bool has_fb(int d) const { return fb_left_[d] > 0; }

  // The evaluator's timing of pass (k, s, j) appended to device d's order: it starts when the
  // device is free and its inputs have arrived (the greedy's own clock may have run it earlier:
  // a strict forward passed over can start before the device's last pass ends). Memory as the
  // evaluator counts it: a growth raises the peak, a release follows the pass.
  void track(int d, ActionKind k, int s, int j) {
    TimePs t = x_clock_[d];
    if (k == ActionKind::kF) {
      if (prev_[s] >= 0) t = std::max(t, x_f_end_[at(prev_[s], j)] + hop_prev_[s]);
    } else if (k == ActionKind::kW) {
      t = std::max(t, x_b_end_[at(s, j)]);
    } else {
      t = std::max(t, x_f_end_[at(s, j)]);
      if (next_[s] >= 0) t = std::max(t, x_b_end_[at(next_[s], j)] + hop_next_[s]);
    }
    const TimePs e = t + c_.time(s, k);
    if (k == ActionKind::kF) x_f_end_[at(s, j)] = e;
    if (k == ActionKind::kB || k == ActionKind::kBW) x_b_end_[at(s, j)] = e;
    x_first_[d] = std::min(x_first_[d], t);
    x_clock_[d] = e;
    const double delta = c_.mem(s, k);
    if (delta > 0) {
      x_mem_[d] += delta;
      x_peak_[d] = std::max(x_peak_[d], x_mem_[d]);
    } else if (delta < 0) {
      x_mem_[d] += delta;
    }
  }

  void run_w(int d) {
    const Action w = w_queue_[d][w_head_[d]++];
    exec(d, ActionKind::kW, w.stage, w.microbatch);
  }

  void step(int d) {
    const TimePs t = clock_[d];
    TimePs next_b_time = kNever, next_f_time = kNever;
    int next_b = -1, next_f = -1;
    for (int s : stages_of_[d]) {
      const TimePs r = b_ready(s);
      if (r <= t) return exec(d, ActionKind::kB, s, mb(s, nb_[s]));
      if (r < next_b_time) next_b_time = r, next_b = s;
    }
    bool memory_wanted = false;
    for (int s : stages_of_[d]) {
      const TimePs r = nf_[s] < count_[s] ? f_ready(s) : kNever;
      if (!f_allowed(s, d)) {
        memory_wanted |= r <= t;
        continue;
      }
      // Strict F: do not start a forward that would delay a backward known to be ready soon.
      const bool delays_b =
          v_.strict_f && next_b_time != kNever && t + c_.time(s, ActionKind::kF) > next_b_time;
      if (r <= t && !delays_b) return exec(d, ActionKind::kF, s, mb(s, nf_[s]));
      if (r < next_f_time) next_f_time = r, next_f = s;
    }
    const TimePs next_known = std::min(next_b_time, next_f_time);
    if (w_head_[d] < w_queue_[d].size()) {
      const Action w = w_queue_[d][w_head_[d]];
      const bool fits = next_known != kNever && t + c_.time(w.stage, ActionKind::kW) <= next_known;
      // Every policy's answer (bit w: WPolicy w would run the W); the run follows its own and
      // notes which others would have answered otherwise here.
      const unsigned answers =
          1u << static_cast<int>(WPolicy::kFillAny) |
          unsigned{fits || memory_wanted || next_known == kNever}
              << static_cast<int>(WPolicy::kFillKnownGaps) |
          unsigned{fits || memory_wanted || !has_fb(d)} << static_cast<int>(WPolicy::kLookahead) |
          unsigned{memory_wanted || !has_fb(d)} << static_cast<int>(WPolicy::kLazy);
      const bool go = answers >> static_cast<int>(v_.w_policy) & 1u;
      w_disagree_ |= go ? ~answers & kAllPolicies : answers;
      if (go) return run_w(d);
    }
    if (next_known == kNever) {
      blocked_[d] = 1;
      return;
    }
    clock_[d] = next_known;
    if (next_b_time <= next_f_time) return exec(d, ActionKind::kB, next_b, mb(next_b, nb_[next_b]));
    return exec(d, ActionKind::kF, next_f, mb(next_f, nf_[next_f]));
  }

 public:
  // Every device is blocked: the earliest one with a pending W runs it (false if none has one).
  bool force_w() {
    int best = -1;
    for (int d = 0; d < pl_.num_devices; ++d)
      if (w_head_[d] < w_queue_[d].size() && (best < 0 || clock_[d] < clock_[best])) best = d;
    if (best < 0) return false;
    run_w(best);
    return true;
  }

 private:
  const Placement& pl_;
  int m_;
  const CostTable& c_;
  const std::vector<double>& limits_;  // per device
  GreedyVariant v_;
  std::vector<std::vector<int>> stages_of_;
  std::vector<double> reserve_;
  std::vector<int> prev_, next_, nf_, nb_, in_flight_, count_, pipe_;
  std::vector<int> mb0_;  // per stage: its pipeline's first microbatch
  std::vector<TimePs> hop_prev_,
      hop_next_;  // per stage: the hop in from its neighbour (0: same device)
  int S_ = 0;
  std::vector<std::vector<int>> mbs_;
  std::vector<TimePs> f_end_, b_end_, clock_;
  std::vector<double> mem_;
  std::vector<std::uint8_t> blocked_;      // per device: stepped and found nothing to run or await
  std::vector<long long> fb_left_, left_;  // F/B passes, and all passes, left per device
  std::vector<int> by_clock_;              // devices with work left, by (clock, index)
  std::vector<std::vector<Action>> w_queue_;
  std::vector<std::size_t> w_head_;
  std::vector<std::vector<Action>> order_;
  // The evaluator's view of the order (track()): pass ends, device clocks, first starts, memory.
  std::vector<TimePs> x_f_end_, x_b_end_, x_clock_, x_first_;
  std::vector<double> x_mem_, x_peak_;
  long long remaining_ = 0;
  static constexpr unsigned kAllPolicies = (1u << kNumWPolicies) - 1;
  unsigned w_disagree_ = 0;  // GreedyTiming::w_disagree
};

std::vector<GreedyVariant> variants() {
  std::vector<GreedyVariant> out;
  for (WPolicy w :
       {WPolicy::kFillAny, WPolicy::kFillKnownGaps, WPolicy::kLookahead, WPolicy::kLazy})
    for (bool strict_f : {false, true})
      for (int extra : {-1, 0, 1, 2, 3}) out.push_back({w, strict_f, 0, extra});
  // ZB-2p-shaped warm-ups: 2(p - d) - 1 (+ extra) forwards in flight on device d, so each
  // device's first backward arrives as its warm-up ends instead of queueing behind forwards.
  for (WPolicy w : {WPolicy::kFillAny, WPolicy::kFillKnownGaps, WPolicy::kLookahead})
    for (int extra : {0, 1, 2}) {
      GreedyVariant v;
      v.w_policy = w;
      v.staggered_extra = extra;
      v.stagger_slope = 2;
      out.push_back(v);
    }
  return out;
}

}  // namespace

Schedule zb_greedy(const Placement& placement, int m, const CostTable& costs, double limit,
                   const GreedyVariant& variant, const std::string& name, GreedyTiming* timing) {
  return zb_greedy(placement, m, costs, std::vector<double>(placement.num_devices, limit), variant,
                   name, timing);
}

Schedule zb_greedy(const Placement& placement, int m, const CostTable& costs,
                   const std::vector<double>& limits, const GreedyVariant& variant,
                   const std::string& name, GreedyTiming* timing) {
  PW_ASSERT(static_cast<int>(limits.size()) == placement.num_devices, "one limit per device");
  Schedule s;
  s.name = name;
  s.placement = placement;
  s.num_microbatches = m;
  Greedy g(placement, m, costs, limits, variant);
  if (!g.run()) {
    s.actions.clear();
    if (timing) *timing = GreedyTiming{}, timing->w_disagree = g.w_disagree();
    return s;
  }
  s.actions = std::move(g.order());
  if (timing) *timing = g.timing();
  return s;
}

void run_greedy_twins(const std::vector<std::size_t>& twin, const std::vector<WPolicy>& policy,
                      const std::vector<GreedyTiming>& timing,
                      const std::function<void(std::size_t)>& run) {
  PW_ASSERT(policy.size() == twin.size() && timing.size() == twin.size(),
            "run_greedy_twins: one twin, policy and timing per run");
  std::vector<std::size_t> first, second;
  for (std::size_t i = 0; i < twin.size(); ++i) {
    PW_ASSERT(twin[i] <= i, "a run's kFillAny twin comes first");
    (twin[i] == i ? first : second).push_back(i);
  }
  tbb::parallel_for(std::size_t{0}, first.size(), [&](std::size_t k) { run(first[k]); });
  std::erase_if(second, [&](std::size_t i) { return !timing[twin[i]].differs_for(policy[i]); });
  tbb::parallel_for(std::size_t{0}, second.size(), [&](std::size_t k) { run(second[k]); });
}

Schedule zb_auto(const Placement& placement, int m, const CostTable& costs, double limit,
                 const std::string& name) {
  return zb_auto(placement, m, costs, std::vector<double>(placement.num_devices, limit), name);
}

Schedule zb_auto(const Placement& placement, int m, const CostTable& costs,
                 const std::vector<double>& limits, const std::string& name) {
  // The variants run in parallel (a long generation otherwise leaves the search's other threads
  // idle); the first variant of the smallest cost wins whatever the thread count.
  // A variant with another W policy than kFillAny runs only where its kFillAny twin's run met a
  // W it would have decided otherwise; else its order is the twin's, which comes first in
  // `vs` and so wins any tie: leaving it out changes nothing.
  const std::vector<GreedyVariant> vs = variants();
  std::vector<Schedule> runs(vs.size());
  std::vector<GreedyTiming> timing(vs.size());
  std::vector<std::size_t> twin(vs.size());
  std::vector<WPolicy> policy(vs.size());
  for (std::size_t i = 0; i < vs.size(); ++i) {
    GreedyVariant base = vs[i];
    base.w_policy = WPolicy::kFillAny;
    twin[i] = static_cast<std::size_t>(
        std::find_if(vs.begin(), vs.end(), [&](const GreedyVariant& v) { return v == base; }) -
        vs.begin());
    policy[i] = vs[i].w_policy;
  }
  run_greedy_twins(twin, policy, timing, [&](std::size_t i) {
    runs[i] = zb_greedy(placement, m, costs, limits, vs[i], name, &timing[i]);
  });
  Schedule best;
  TimePs best_cost = kNever;
  for (std::size_t i = 0; i < vs.size(); ++i)
    if (!runs[i].actions.empty() && timing[i].cost < best_cost)
      best_cost = timing[i].cost, best = std::move(runs[i]);
  if (best_cost != kNever) return best;
  // Smallest device-0 limit (the others scaled alike) at which the loose variant finishes:
  // double, then bisect to 1e-3.
  const double base = std::max(limits[0], 1e-12);
  auto fits = [&](double x) {
    std::vector<double> scaled(limits);
    for (double& l : scaled) l *= x / base;
    return !zb_greedy(placement, m, costs, scaled, {}, name).actions.empty();
  };
  const double limit = limits[0];
  double lo = limit, hi = std::max(limit, 1e-3);
  while (!fits(hi)) hi *= 2;
  for (int it = 0; it < 40 && hi - lo > 1e-3; ++it) {
    const double mid = (lo + hi) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  throw ConfigError("", "--memory-limit",
                    fmt::format("{}: no schedule fits {} activations per device; the smallest "
                                "feasible limit is about {:.3f}",
                                name, limit, hi));
}

std::vector<double> own_stage_budgets(const Placement& placement, const CostTable& costs, int k) {
  std::vector<double> out(placement.num_devices, 0.0);
  const int P = placement.num_devices;
  for (int g = 0; g < placement.num_stages(); ++g) {
    const StageInfo& st = placement.stages[g];
    if (st.pipeline == 0) out[st.device] += k * P * std::max(0.0, costs.mem(g, ActionKind::kF));
  }
  return out;
}

CostTable linear_cost_table(const GeneratorParams& gp) {
  if (gp.stage_costs) {
    if (gp.stage_costs->num_stages != gp.p)
      throw ConfigError(
          "", "stage_costs",
          fmt::format("expected {} stages, got {}", gp.p, gp.stage_costs->num_stages));
    return *gp.stage_costs;
  }
  return make_uniform_cost_table(linear_placement(gp.p, gp.num_layers), gp.costs);
}

namespace {

// ZB-kp: limit k * p * M_B, M_B = what one forward of the device's stage allocates (1.0 with
// uniform costs); explicit limits per device (memory_caps), or one for every device.
// The greedy's best order, or a handcrafted one (ZB-H1; with k >= 2 ZB-H2 too) that fits every
// device's limit and costs less: the automatic schedule is then never worse than the
// handcrafted one its memory allows, as the authors' exact pass, started from their heuristic,
// guarantees. The greedy alone can be: with F 2.7, B 2.9, W 1.9 and 0.022 per transfer at p 8,
// m 24 its best variant costs 207.1 (largest device span; 213.8 first start to last end)
// against ZB-H1's 206.5.
Schedule zb_kp(const GeneratorParams& gp, int k, const char* name) {
  const CostTable costs = linear_cost_table(gp);
  const Placement pl = linear_placement(gp.p, gp.num_layers);
  const std::vector<double> limits = !gp.memory_caps.empty() ? gp.memory_caps
                                     : gp.memory_limit > 0
                                         ? std::vector<double>(gp.p, gp.memory_limit)
                                         : own_stage_budgets(pl, costs, k);
  Schedule best = zb_auto(pl, gp.m, costs, limits, name);
  auto cost_of = [&](const Schedule& s) {
    const detail::Flat flat(s, costs);
    detail::Timeline tl;
    return detail::time_orders(flat, detail::graph_orders(flat), tl) ? tl.cost : detail::kNever;
  };
  TimePs best_cost = cost_of(best);
  for (const bool h2 : {false, true}) {
    if (h2 && k < 2) break;
    Schedule hand = zero_bubble_handcrafted(name, gp, h2);
    const std::vector<double> peaks = order_peaks(hand, costs);
    bool fits = true;
    for (int d = 0; d < gp.p; ++d) fits &= limits[d] <= 0 || peaks[d] <= limits[d] + 1e-9;
    if (!fits) continue;
    const TimePs c = cost_of(hand);
    if (c < best_cost) best_cost = c, best = std::move(hand);
  }
  return best;
}

}  // namespace

Schedule generate_zb_1p(const GeneratorParams& gp) { return zb_kp(gp, 1, "zb-1p"); }
Schedule generate_zb_2p(const GeneratorParams& gp) { return zb_kp(gp, 2, "zb-2p"); }

Schedule generate_zb_v(const GeneratorParams& gp) {
  if (gp.p < 2) throw ConfigError("", "--pp", "zb-v needs at least 2 pipeline devices");
  const CostTable costs = v_cost_table(gp);
  // 1F1B memory: p microbatches of the device's two chunks (each device its own).
  const Placement pl = v_placement(gp.p, gp.num_layers);
  const std::vector<double> limits = !gp.memory_caps.empty() ? gp.memory_caps
                                     : gp.memory_limit > 0
                                         ? std::vector<double>(gp.p, gp.memory_limit)
                                         : own_stage_budgets(pl, costs, 1);
  auto compute = [&] { return zb_auto(pl, gp.m, costs, limits, "zb-v"); };
  if (!gp.memo) return compute();
  // V-ZB asks the same question of this generator (its greedy candidate): share the answer.
  std::string key = fmt::format("zb-v/{}/{}/{}", gp.p, gp.m, gp.num_layers);
  for (double l : limits) key += fmt::format("/{}", l);
  append_cost_key(costs, &key);
  return *gp.memo->get<Schedule>(key, compute);
}

}  // namespace pw
