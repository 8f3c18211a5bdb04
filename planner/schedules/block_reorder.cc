#include "planner/schedules/block_reorder.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

#include "core/dependency.h"
#include "core/error.h"
#include "planner/schedules/order_timing.h"

namespace pw {
namespace {

using detail::Flat;
using detail::graph_orders;
using detail::kNever;
using detail::Orders;
using detail::time_orders;
using detail::Timeline;
using detail::write_orders;

constexpr double kEps = 1e-9;

bool is_filler(ActionKind k) { return k == ActionKind::kW; }

// What a wave of gap filling works with, kept across waves so that a wave allocates nothing.
struct WaveScratch {
  struct Gap {
    TimePs s, e;
    int d;
    std::int32_t before;  // the pass that follows the gap
  };
  std::vector<Gap> gaps;
  std::vector<TimePs> shortest;  // per device: its shortest pass (the orders hold the same ids)
  const std::vector<TimePs>* ready = nullptr;  // each pass's data-ready time (the wave's timeline)
  std::vector<std::vector<double>> after;      // memory after each position, per device
  // Per device, per block of kBlock positions: the earliest data-ready time of the block's passes
  // and the largest memory after the position before each (what a scan over the block reads), so
  // a scan skips a block in which no pass is ready yet.
  static constexpr std::size_t kBlock = 16;
  std::vector<std::vector<TimePs>> block_ready;
  std::vector<std::vector<double>> block_after;
  std::vector<std::uint8_t> dirty;  // per device: its memory and blocks are not computed yet
  void update_blocks(int d, const std::vector<std::int32_t>& dev, const std::vector<double>& aft,
                     std::size_t first, std::size_t end) {
    for (std::size_t b = first; b < end; ++b) {
      TimePs r = kNever;
      double a = 0;
      for (std::size_t k = b * kBlock; k < std::min(dev.size(), (b + 1) * kBlock); ++k) {
        r = std::min(r, (*ready)[dev[k]]);
        if (k > 0) a = k == b * kBlock ? aft[k - 1] : std::max(a, aft[k - 1]);
      }
      block_ready[d][b] = r;
      block_after[d][b] = a;
    }
  }
  std::vector<std::int32_t> pos;  // each pass's place in its device's order
};

// One wave of gap filling: every gap of the current timeline, earliest first, takes at most one
// later pass of its device that is ready at the gap's start (in this timeline), fits in the gap
// and keeps the device within its cap. All moves of a wave are judged on the same timeline: with
// each moved pass at its gap's start that timeline stays feasible for the new orders, so
// re-timing them can only start passes earlier. Returns the moves made.
int fill_wave(const Flat& f, Orders& ord, const std::vector<double>& caps, const Timeline& tl,
              std::vector<std::uint8_t>& moved, int window, WaveScratch& w) {
  const int D = static_cast<int>(ord.size());
  if (w.shortest.empty()) {
    // A gap shorter than every pass of its device takes none (most gaps are a hop long).
    w.shortest.assign(D, kNever);
    for (int d = 0; d < D; ++d)
      for (const std::int32_t id : ord[d]) w.shortest[d] = std::min(w.shortest[d], f.dur[id]);
    w.after.resize(D);
    w.block_ready.resize(D);
    w.block_after.resize(D);
    w.pos.resize(f.size());
  }
  w.gaps.clear();
  for (int d = 0; d < D; ++d)
    for (std::size_t i = 1; i < ord[d].size(); ++i) {
      const TimePs s = tl.end[ord[d][i - 1]], e = tl.start[ord[d][i]];
      if (e > s && e - s >= w.shortest[d]) w.gaps.push_back({s, e, d, ord[d][i]});
    }
  std::sort(w.gaps.begin(), w.gaps.end(), [](const WaveScratch::Gap& a, const WaveScratch::Gap& b) {
    return std::tie(a.s, a.d, a.before) < std::tie(b.s, b.d, b.before);
  });
  std::fill(moved.begin(), moved.end(), 0);
  // Each pass's data-ready time in this timeline (the test every candidate meets first).
  w.ready = &tl.ready;
  w.dirty.assign(D, 1);
  int moves = 0;
  for (const WaveScratch::Gap& gp : w.gaps) {
    auto& dev = ord[gp.d];
    auto& aft = w.after[gp.d];
    if (w.dirty[gp.d]) {
      aft.resize(dev.size());
      double run = 0;
      for (std::size_t k = 0; k < dev.size(); ++k) {
        aft[k] = run += f.mem[dev[k]];
        w.pos[dev[k]] = static_cast<std::int32_t>(k);
      }
      const std::size_t blocks = (dev.size() + WaveScratch::kBlock - 1) / WaveScratch::kBlock;
      w.block_ready[gp.d].resize(blocks);
      w.block_after[gp.d].resize(blocks);
      w.update_blocks(gp.d, dev, aft, 0, blocks);
      w.dirty[gp.d] = 0;
    }
    const std::size_t i = w.pos[gp.before];
    const double before = i > 0 ? aft[i - 1] : 0.0;
    double range_max = before;  // max of memory after positions i..k-1 (and before i)
    const std::size_t last = std::min(dev.size(), i + 1 + static_cast<std::size_t>(window));
    const auto& br = w.block_ready[gp.d];
    const auto& ba = w.block_after[gp.d];
    for (std::size_t k = i + 1; k < last; ++k) {
      if (k % WaveScratch::kBlock == 0 && k + WaveScratch::kBlock <= last &&
          br[k / WaveScratch::kBlock] > gp.s) {
        range_max = std::max(range_max, ba[k / WaveScratch::kBlock]);
        k += WaveScratch::kBlock - 1;  // no pass of the block is ready at the gap's start
        continue;
      }
      range_max = std::max(range_max, aft[k - 1]);
      const std::int32_t id = dev[k];
      if ((*w.ready)[id] > gp.s || moved[id] || tl.start[id] < gp.e || f.dur[id] > gp.e - gp.s)
        continue;
      const double delta = f.mem[id];
      if (delta > 0 && range_max + delta > caps[gp.d] + kEps) continue;
      std::rotate(dev.begin() + i, dev.begin() + k, dev.begin() + k + 1);
      moved[id] = 1;
      // Only positions i..k changed: their memory, places and blocks.
      double run = i > 0 ? aft[i - 1] : 0.0;
      for (std::size_t q = i; q <= k; ++q) {
        aft[q] = run += f.mem[dev[q]];
        w.pos[dev[q]] = static_cast<std::int32_t>(q);
      }
      w.update_blocks(gp.d, dev, aft, i / WaveScratch::kBlock, k / WaveScratch::kBlock + 1);
      ++moves;
      break;
    }
  }
  return moves;
}

// Score of a timeline for the local search: makespan, then cost, then the sum of device ends.
struct Score {
  TimePs makespan, cost, ends;
  friend bool operator<(const Score& a, const Score& b) {
    return std::tie(a.makespan, a.cost, a.ends) < std::tie(b.makespan, b.cost, b.ends);
  }
};

Score score_of(const Orders& ord, const Timeline& tl) {
  Score s{tl.makespan, tl.cost, 0};
  for (const auto& dev : ord)
    if (!dev.empty()) s.ends += tl.end[dev.back()];
  return s;
}

bool within_cap(const Flat& f, const std::vector<std::int32_t>& dev, double cap) {
  double run = 0;
  for (const std::int32_t id : dev)
    if ((run += f.mem[id]) > cap + kEps) return false;
  return true;
}

// Hill climbing over single moves (one pass moved up to `window` places within its device's
// first and last `edge` positions); accepts strict improvements of the score.
int local_search(const Flat& f, Orders& ord, const std::vector<double>& caps, int window, int edge,
                 int budget) {
  Timeline tl;
  if (!time_orders(f, ord, tl)) return 0;
  Score best = score_of(ord, tl);
  int moves = 0, evals = 0;
  bool improved = true;
  while (improved && evals < budget) {
    improved = false;
    for (int d = 0; d < static_cast<int>(ord.size()) && evals < budget; ++d) {
      auto& dev = ord[d];
      const int n = static_cast<int>(dev.size());
      for (int i = 0; i < n && evals < budget; ++i) {
        if (i >= edge && i < n - edge) continue;
        for (int k = std::max(0, i - window); k <= std::min(n - 1, i + window); ++k) {
          if (k == i) continue;
          auto move = [&](int from, int to) {
            if (from > to)
              std::rotate(dev.begin() + to, dev.begin() + from, dev.begin() + from + 1);
            else
              std::rotate(dev.begin() + from, dev.begin() + from + 1, dev.begin() + to + 1);
          };
          move(i, k);
          ++evals;
          if (within_cap(f, dev, caps[d]) && time_orders(f, ord, tl)) {
            const Score s = score_of(ord, tl);
            if (s < best) {
              best = s;
              ++moves;
              improved = true;
              break;
            }
          }
          move(k, i);
        }
      }
    }
  }
  return moves;
}

TimePs eval_makespan(const Schedule& s, const CostTable& costs, TimePs* cost) {
  const Flat f(s, costs);
  Timeline tl;
  const bool ok = time_orders(f, graph_orders(f), tl);
  PW_ASSERT(ok, "reorder candidate deadlocks");
  *cost = tl.cost;
  return tl.makespan;
}

}  // namespace

std::vector<double> order_peaks(const Schedule& schedule, const CostTable& costs) {
  std::vector<double> peak(schedule.actions.size(), 0.0);
  for (std::size_t d = 0; d < schedule.actions.size(); ++d) {
    double run = 0;
    for (const Action& a : schedule.actions[d]) {
      run += costs.mem(std::max<int>(a.stage, 0), a.kind);
      peak[d] = std::max(peak[d], run);
    }
  }
  return peak;
}

namespace {

// What fill_order did: the moves made and the makespan and cost of the order it left (the
// schedule's own when nothing moved).
struct FillOutcome {
  bool timed = false;  // false: the schedule's order deadlocks (nothing else is set)
  int moves = 0;
  TimePs makespan = 0, cost = 0;
};

// Times the schedule's order and, when its makespan is within `fill_within`, fills its gaps
// (fill_gaps' contract), reporting the final order's timing so that callers need not time it
// again.
FillOutcome fill_order(Schedule& schedule, const CostTable& costs, const std::vector<double>& caps,
                       int max_waves, TimePs fill_within) {
  FillOutcome out;
  const Flat f(schedule, costs);
  Orders ord = graph_orders(f);
  Timeline tl;
  if (!time_orders(f, ord, tl)) return out;
  out.timed = true;
  out.makespan = tl.makespan;
  out.cost = tl.cost;
  if (tl.makespan > fill_within) return out;
  std::vector<std::uint8_t> moved(f.size(), 0);
  // Candidates within two microbatches' passes of all devices after the gap: a pass further
  // down the list belongs to a microbatch that is not ready yet.
  const int window =
      std::max(16, 2 * static_cast<int>(f.size()) / std::max(1, schedule.num_microbatches));
  int moves = 0;
  WaveScratch scratch;
  Orders before;
  for (int wave = 0; wave < max_waves; ++wave) {
    // One wave moves several passes against one timeline; with very uneven costs (a forward
    // 1e9 times a backward) a move can push back a pass another move relied on and close a
    // cycle. Such a wave is undone and filling stops: the order before it was valid.
    before = ord;
    const int made = fill_wave(f, ord, caps, tl, moved, window, scratch);
    if (made == 0) break;
    if (!time_orders(f, ord, tl)) {
      ord = before;
      const bool ok = time_orders(f, ord, tl);
      PW_ASSERT(ok, "the order before a gap-filling wave deadlocks");
      break;
    }
    moves += made;
  }
  if (moves > 0) write_orders(f, ord, schedule);
  out.moves = moves;
  out.makespan = tl.makespan;
  out.cost = tl.cost;
  return out;
}

}  // namespace

int fill_gaps(Schedule& schedule, const CostTable& costs, const std::vector<double>& caps,
              int max_waves) {
  return fill_order(schedule, costs, caps, max_waves, kNever).moves;
}

namespace {

// The memory-capped list scheduler behind block_list_schedule (see its contract).
class ListScheduler {
 public:
  ListScheduler(const Schedule& order, const CostTable& costs, const std::vector<double>& caps,
                int reserve, bool eager_w)
      : f_(order, costs), caps_(caps), reserve_(reserve), eager_w_(eager_w) {
    const int D = f_.devices();
    seqs_.resize(D);
    held_.resize(D);
    fwd_unit_.resize(D);
    seq_of_.assign(f_.size(), -1);
    for (int d = 0; d < D; ++d) build_sequences(d, costs);
    mem_.assign(D, 0.0);
    clock_.assign(D, 0);
    end_.assign(f_.size(), kNever);
    ord_.resize(D);
    dirty_.assign(D, 1);
    wake_.assign(D, 0);
    for (int d = 0; d < D; ++d)
      for (Seq& q : seqs_[d]) push_head(q);
  }

  // False when the run deadlocks (memory too small to progress).
  bool run() {
    std::size_t remaining = f_.size();
    TimePs now = 0;
    while (remaining > 0) {
      bool zero_length = false;
      for (int d = 0; d < f_.devices(); ++d) {
        if (clock_[d] > now) continue;
        // A device that found nothing to run finds nothing until one of its heads' ready times
        // becomes known (dirty_) or a known one comes due (wake_): its memory only changes when
        // it runs a pass. Skipping those picks changes no decision.
        if (!dirty_[d] && now < wake_[d]) continue;
        Seq* q = pick(d, now);
        if (!q) {
          dirty_[d] = 0;
          wake_[d] = next_ready(d, now);
          continue;
        }
        dirty_[d] = 1;
        const std::int32_t id = q->ids[q->head++];
        end_[id] = now + f_.dur[id];
        clock_[d] = end_[id];
        events_.push(end_[id]);
        // The times this dispatch makes known: the next head's, and those of the heads among
        // its successors whose last dependency it was.
        push_head(*q);
        for (int k = f_.succ_begin[id]; k < f_.succ_begin[id + 1]; ++k) {
          const std::int32_t s = f_.succ[k];
          Seq& sq = seqs_[f_.g.device_of[s]][seq_of_[s]];
          if (sq.head < sq.ids.size() && sq.ids[sq.head] == s) {
            push_head(sq);
            dirty_[f_.g.device_of[s]] = 1;
          }
        }
        zero_length |= f_.dur[id] == 0;
        mem_[d] += f_.mem[id];
        held_[d][q->rank] += f_.mem[id];
        ord_[d].push_back(id);
        --remaining;
      }
      if (remaining == 0 || zero_length) continue;
      now = next_event(now);
      if (now == kNever) return false;
    }
    return true;
  }

  void write(Schedule& s) const { write_orders(f_, ord_, s); }

 private:
  // The ids of one (stage, kind) of a device, in list order; `rank` orders the device's stages.
  struct Seq {
    std::vector<std::int32_t> ids;
    std::size_t head = 0;
    bool filler = false;
    int rank = 0;
    // The head's data-ready time once every dependency has been dispatched (it cannot change
    // after that: dispatched passes have fixed ends); `ready_head` names the head it is for.
    TimePs ready = kNever;
    std::size_t ready_head = static_cast<std::size_t>(-1);
  };

  // Data-ready time of q's head (kNever while a dependency has not been dispatched).
  TimePs head_ready(Seq& q) const {
    if (q.ready_head == q.head) return q.ready;
    const TimePs r = f_.data_ready(q.ids[q.head], end_);
    if (r != kNever) q.ready = r, q.ready_head = q.head;
    return r;
  }

  void build_sequences(int d, const CostTable& costs) {
    std::vector<int> stages;
    for (std::int32_t id = f_.g.device_begin[d]; id < f_.g.device_begin[d + 1]; ++id)
      stages.push_back(f_.g.action[id].stage);
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    for (const int st : stages)
      fwd_unit_[d].push_back(std::max(0.0, costs.mem(st, ActionKind::kF)));
    held_[d].assign(stages.size(), 0.0);
    auto& seqs = seqs_[d];
    for (std::int32_t id = f_.g.device_begin[d]; id < f_.g.device_begin[d + 1]; ++id) {
      const Action& a = f_.g.action[id];
      auto it = std::find_if(seqs.begin(), seqs.end(), [&](const Seq& q) {
        const Action& b = f_.g.action[q.ids.front()];
        return b.stage == a.stage && b.kind == a.kind;
      });
      if (it == seqs.end()) {
        const auto rank = std::lower_bound(stages.begin(), stages.end(), a.stage) - stages.begin();
        seqs.push_back(Seq{{}, 0, is_filler(a.kind), static_cast<int>(rank)});
        it = seqs.end() - 1;
      }
      it->ids.push_back(id);
      seq_of_[id] = static_cast<std::int32_t>(it - seqs.begin());
    }
  }

  // Memory allows the pass: within the cap, and a forward keeps `reserve` forwards' worth of
  // room for the device's next stage.
  bool fits(int d, const Seq& q, std::int32_t id) const {
    const double delta = f_.mem[id];
    if (delta <= 0) return true;
    if (mem_[d] + delta > caps_[d] + kEps) return false;
    if (q.rank + 1 >= static_cast<int>(held_[d].size()) || reserve_ <= 0) return true;
    double upto = 0;
    for (int r = 0; r <= q.rank; ++r) upto += held_[d][r];
    return upto + delta + reserve_ * fwd_unit_[d][q.rank + 1] <= caps_[d] + kEps;
  }

  // The sequence whose head device d runs at `now`, or nullptr.
  Seq* pick(int d, TimePs now) {
    Seq* best = nullptr;
    // First ready head in list order that memory holds back (eager_w: a W that frees memory
    // then goes first).
    std::int32_t held_back = std::numeric_limits<std::int32_t>::max();
    for (int pass = 0; pass < 2 && !best; ++pass)
      for (Seq& q : seqs_[d]) {
        if (q.head >= q.ids.size() || q.filler != (pass == 1)) continue;
        const std::int32_t id = q.ids[q.head];
        if (head_ready(q) > now) continue;
        if (!fits(d, q, id)) {
          held_back = std::min(held_back, id);
          continue;
        }
        if (!best || id < best->ids[best->head]) best = &q;
      }
    if (!eager_w_ || !best || held_back > best->ids[best->head]) return best;
    for (Seq& q : seqs_[d]) {
      if (!q.filler || q.head >= q.ids.size()) continue;
      const std::int32_t id = q.ids[q.head];
      if (f_.mem[id] < 0 && head_ready(q) <= now) return &q;
    }
    return best;
  }

  // The earliest known ready time after `now` among device d's heads (kNever: none known).
  TimePs next_ready(int d, TimePs now) const {
    TimePs t = kNever;
    for (const Seq& q : seqs_[d])
      if (q.head < q.ids.size() && q.ready_head == q.head && q.ready > now)
        t = std::min(t, q.ready);
    return t;
  }

  // Queues q's head ready time once it is known (it cannot change after that).
  void push_head(Seq& q) {
    if (q.head >= q.ids.size()) return;
    const TimePs r = head_ready(q);
    if (r != kNever) events_.push(r);
  }

  // Next time something can change: a device becoming free or a head pass becoming ready.
  // events_ holds every device's free time and every head's ready time as they become known;
  // those not after `now` are past.
  TimePs next_event(TimePs now) {
    while (!events_.empty() && events_.top() <= now) events_.pop();
    return events_.empty() ? kNever : events_.top();
  }

  Flat f_;
  const std::vector<double>& caps_;
  int reserve_;
  bool eager_w_;
  std::vector<std::vector<Seq>> seqs_;
  std::vector<std::vector<double>> held_, fwd_unit_;  // per device, per stage rank
  std::vector<double> mem_;
  std::vector<TimePs> end_, clock_;
  Orders ord_;
  std::vector<std::int32_t> seq_of_;  // per pass: its sequence among its device's
  std::vector<char> dirty_;           // per device: a head's ready time became known since its
                                      // last pick found nothing
  std::vector<TimePs> wake_;          // per device: the next known ready time after that pick
  std::priority_queue<TimePs, std::vector<TimePs>, std::greater<>> events_;
};

}  // namespace

Schedule block_list_schedule(const Schedule& order, const CostTable& costs,
                             const std::vector<double>& caps, int reserve, bool eager_w) {
  ListScheduler ls(order, costs, caps, reserve, eager_w);
  if (!ls.run()) return Schedule{order.name, order.placement, order.num_microbatches, {}};
  Schedule out = order;
  ls.write(out);
  return out;
}

namespace {

// One way of reordering: the block order (with the cool-down reorder and W gap filling), the
// plain repetition, or a list schedule; each is then gap-filled.
struct Method {
  enum Kind { kBlock, kPlain, kList } kind = kBlock;
  int reserve = 0;
  bool eager_w = false;
};

std::string method_name(const Method& mt) {
  switch (mt.kind) {
    case Method::kBlock:
      return "block";
    case Method::kPlain:
      return "plain";
    case Method::kList:
      break;
  }
  return fmt::format("list r={}{}", mt.reserve, mt.eager_w ? " eager-w" : "");
}

struct Candidate {
  Method method;
  Schedule schedule;
  TimePs makespan = kNever, cost = kNever;
  std::vector<double> peak;
  bool filled = false;
};

bool better(const Candidate& a, const Candidate& b) {
  return std::tie(a.makespan, a.cost) < std::tie(b.makespan, b.cost);
}

// Builds `mt` on the repetition `plain` (of `block`) and gap-fills it unless its unfilled
// makespan exceeds `fill_within` (the best so far + 1/8). Empty schedule: deadlock or over a cap.
Candidate run_method(const BuildingBlock& block, const Schedule& plain, const CostTable& costs,
                     const std::vector<double>& caps, const Method& mt, int fill_waves,
                     TimePs fill_within) {
  Candidate c;
  c.method = mt;
  if (mt.kind == Method::kBlock) {
    c.schedule = block_to_schedule(block, plain.num_microbatches, {.reorder_cooldown = true});
    squeeze_fill_w(c.schedule, costs);
  } else if (mt.kind == Method::kPlain) {
    c.schedule = plain;
  } else {
    c.schedule = block_list_schedule(plain, costs, caps, mt.reserve, mt.eager_w);
    if (c.schedule.actions.empty()) return c;
  }
  c.peak = order_peaks(c.schedule, costs);
  for (std::size_t d = 0; d < c.peak.size(); ++d)
    if (c.peak[d] > caps[d] + kEps) return c.schedule.actions.clear(), c;
  // Timed once, filled when within reach of the best, and the filled order's timing kept.
  const FillOutcome fo = fill_order(c.schedule, costs, caps, fill_waves, fill_within);
  PW_ASSERT(fo.timed, "reorder candidate deadlocks");
  c.makespan = fo.makespan;
  c.cost = fo.cost;
  if (fo.moves > 0) {
    c.filled = true;
    c.peak = order_peaks(c.schedule, costs);
  }
  return c;
}

// Every method on `plain`, best first. List schedules try reservations 0, 1, ... and stop after
// two in a row that do not shorten the list schedule (longer ones only delay the warm-up).
std::vector<Candidate> rank_methods(const BuildingBlock& block, const Schedule& plain,
                                    const CostTable& costs, const std::vector<double>& caps,
                                    const ReorderOptions& opt, int fill_waves) {
  std::vector<Candidate> out;
  TimePs best = kNever;
  auto add = [&](const Method& mt) {
    const TimePs within = best == kNever ? kNever : best + best / 8;
    Candidate c = run_method(block, plain, costs, caps, mt, fill_waves, within);
    if (c.schedule.actions.empty()) return kNever;
    const TimePs unfilled_or_filled = c.makespan;
    best = std::min(best, c.makespan);
    out.push_back(std::move(c));
    return unfilled_or_filled;
  };
  add({Method::kBlock});
  add({Method::kPlain});
  bool w_frees = false;  // eager_w changes nothing unless a W frees memory
  for (int st = 0; st < costs.num_stages; ++st) w_frees |= costs.mem(st, ActionKind::kW) < 0;
  const int top_reserve = opt.max_reserve >= 0 ? opt.max_reserve : plain.placement.num_devices;
  TimePs best_list = kNever;
  for (int r = 0, stale = 0; r <= top_reserve && stale < 2; ++r) {
    bool improved = false;
    for (bool eager_w : {false, true}) {
      if (eager_w && !w_frees) continue;
      const TimePs mk = add({Method::kList, r, eager_w});
      improved |= mk < best_list;
      best_list = std::min(best_list, mk);
    }
    stale = improved || r < 2 ? 0 : stale + 1;
  }
  std::stable_sort(out.begin(), out.end(), better);
  return out;
}

}  // namespace

ReorderResult reorder_block(const BuildingBlock& block, int m, const CostTable& costs,
                            const ReorderOptions& opt) {
  const Schedule plain = block_to_schedule(block, m, {.reorder_cooldown = false});
  const int D = plain.placement.num_devices;
  ReorderResult res;
  res.caps = opt.caps.empty() ? order_peaks(plain, costs) : opt.caps;
  if (opt.caps.empty() && !opt.per_device_caps) {
    const double top = *std::max_element(res.caps.begin(), res.caps.end());
    std::fill(res.caps.begin(), res.caps.end(), top);
  }
  PW_ASSERT(static_cast<int>(res.caps.size()) == D, "reorder_block: one cap per device");
  const int fill_waves = opt.max_fill_waves > 0 ? opt.max_fill_waves : 4 * D + 16;
  const int probe = opt.probe_microbatches > 0 ? opt.probe_microbatches : 2 * D + 8;
  Candidate best;
  if (m <= probe) {
    std::vector<Candidate> ranked = rank_methods(block, plain, costs, res.caps, opt, fill_waves);
    if (!ranked.empty()) best = std::move(ranked.front());
  } else {
    // The methods are ranked on `probe` microbatches (warm-up and cool-down do not depend on m
    // once the steady state is reached) and the two best are run on all m.
    const Schedule small = block_to_schedule(block, probe, {.reorder_cooldown = false});
    const std::vector<Candidate> ranked =
        rank_methods(block, small, costs, res.caps, opt, fill_waves);
    // The block order (the previous behaviour, gap-filled) always runs too, so the result is
    // never longer than it.
    std::vector<Method> finalists = {Method{Method::kBlock}};
    for (std::size_t i = 0; i < ranked.size() && i < 2; ++i)
      if (ranked[i].method.kind != Method::kBlock) finalists.push_back(ranked[i].method);
    // Independent runs: in parallel, compared in the finalists' order.
    std::vector<Candidate> runs(finalists.size());
    tbb::parallel_for(std::size_t{0}, finalists.size(), [&](std::size_t i) {
      runs[i] = run_method(block, plain, costs, res.caps, finalists[i], fill_waves, kNever);
    });
    for (Candidate& c : runs)
      if (!c.schedule.actions.empty() && (best.schedule.actions.empty() || better(c, best)))
        best = std::move(c);
  }
  if (best.schedule.actions.empty())
    throw ConfigError("", "--memory-limit",
                      fmt::format("no reordering of block '{}' fits the memory caps", block.name));
  res.schedule = std::move(best.schedule);
  res.makespan = best.makespan;
  res.cost = best.cost;
  res.peak = std::move(best.peak);
  res.method = method_name(best.method) + (best.filled ? "+fill" : "");
  if (opt.search_budget > 0) {
    const Flat f(res.schedule, costs);
    Orders ord = graph_orders(f);
    const int per_device = static_cast<int>(f.size()) / std::max(1, D);
    const int edge = opt.search_edge > 0 ? opt.search_edge : per_device;
    if (local_search(f, ord, res.caps, opt.search_window, edge, opt.search_budget) > 0) {
      write_orders(f, ord, res.schedule);
      res.makespan = eval_makespan(res.schedule, costs, &res.cost);
      res.peak = order_peaks(res.schedule, costs);
      res.method += "+search";
    }
  }
  res.schedule.name = block.name;
  return res;
}

}  // namespace pw
