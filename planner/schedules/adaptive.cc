#include "planner/schedules/adaptive.h"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_set>

#include "core/error.h"
#include "planner/schedules/block_reorder.h"
#include "planner/schedules/building_block.h"
#include "planner/schedules/order_timing.h"
#include "planner/schedules/v_grid.h"
#include "planner/schedules/v_schedules.h"
#include "planner/schedules/zb_auto.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

constexpr int kPeriod = 6;

// Slot occupancy of one device (period 6): bit r set when slot r is taken.
bool take(unsigned& used, int offset) {
  const unsigned bit = 1u << (offset % kPeriod);
  if (used & bit) return false;
  used |= bit;
  return true;
}

struct Params {
  int split, down_a, up_a, down_b, up_b, turn;
};

// Fills the chained offsets; returns false when the chained passes collide on some device.
bool build_offsets(int p, const Params& q, VOffsets& o, std::vector<unsigned>& used) {
  auto down = [&](int i) { return i < q.split ? q.down_a : q.down_b; };
  auto up = [&](int i) { return i < q.split ? q.up_a : q.up_b; };
  o.F.resize(p);
  o.f.resize(p);
  o.B.resize(p);
  o.b.resize(p);
  used.assign(p, 0u);
  o.F[0] = 0;
  for (int i = 0; i + 1 < p; ++i) o.F[i + 1] = o.F[i] + down(i);
  for (int i = 0; i < p; ++i) take(used[i], o.F[i]);
  // Turn at the last device: smallest gap that does not collide anywhere on the way back.
  // The trial occupancy is a per-thread scratch (the search calls this some 20,000 times).
  thread_local std::vector<unsigned> trial;
  auto chain_up = [&](std::vector<int>& x, int start_gap_from, int base) {
    for (int gap = start_gap_from; gap <= start_gap_from + kPeriod; ++gap) {
      trial.assign(used.begin(), used.end());
      x[p - 1] = base + gap;
      bool ok = take(trial[p - 1], x[p - 1]);
      for (int i = p - 2; ok && i >= 0; --i) {
        x[i] = x[i + 1] + up(i);
        ok = take(trial[i], x[i]);
      }
      if (ok) {
        used.swap(trial);
        return true;
      }
    }
    return false;
  };
  if (!chain_up(o.f, 1, o.F[p - 1])) return false;
  o.B[0] = o.f[0] + q.turn;
  if (!take(used[0], o.B[0])) return false;
  for (int i = 0; i + 1 < p; ++i) {
    o.B[i + 1] = o.B[i] + down(i);
    if (!take(used[i + 1], o.B[i + 1])) return false;
  }
  return chain_up(o.b, 1, o.B[p - 1]);
}

// The authors' own parametrisation of the block (Qi et al. 2024, Appendix A; their
// v_auto_schedule): device 0's slots of F, f, B, b in the period (F at 0; f, B, b distinct in
// 1..5), then device by device F and B move by +k and f and b by -1 slot of the period, with
// k = k0 on the first `len0` hops and k1 after. Each chain then takes, device after device, the
// first slot of its pass after the previous pass of the chain (F down from device 0, f up from
// the last device, B down, b up), as their repetition does. False when two passes of a device
// share a slot. Our (down, up, turn) space fixes the turns at the last device to the smallest
// collision-free gap; this one does not, so the two together hold every block either holds.
bool build_pattern_offsets(int p, const int (&pattern0)[4], int k0, int k1, int len0, VOffsets& o,
                           std::vector<unsigned>& used) {
  std::vector<std::array<int, 4>> pos(p);
  used.assign(p, 0u);
  for (int v = 0; v < 4; ++v) pos[0][v] = pattern0[v];
  for (int i = 0; i + 1 < p; ++i) {
    const int k = i < len0 ? k0 : k1;
    const int step[4] = {k, -1, k, -1};
    for (int v = 0; v < 4; ++v)
      pos[i + 1][v] = ((pos[i][v] + step[v]) % kPeriod + kPeriod) % kPeriod;
  }
  for (int i = 0; i < p; ++i)
    for (int v = 0; v < 4; ++v)
      if (!take(used[i], pos[i][v])) return false;
  o.F.resize(p);
  o.f.resize(p);
  o.B.resize(p);
  o.b.resize(p);
  // The first slot at or after `t` holding pass v on device i.
  auto next = [&](int i, int v, int t) {
    return t + ((pos[i][v] - t) % kPeriod + kPeriod) % kPeriod;
  };
  int t = 0;
  for (int i = 0; i < p; ++i) t = (o.F[i] = next(i, 0, t)) + 1;
  for (int i = p - 1; i >= 0; --i) t = (o.f[i] = next(i, 1, t)) + 1;
  for (int i = 0; i < p; ++i) t = (o.B[i] = next(i, 2, t)) + 1;
  for (int i = p - 1; i >= 0; --i) t = (o.b[i] = next(i, 3, t)) + 1;
  return true;
}

// First free slot at or after `from` on a device whose taken slots are `used` (period 6).
int first_free(unsigned& used, int from) {
  for (int t = from;; ++t)
    if (take(used, t)) return t;
}

// Writes the six passes of every device into `blk` (placement and period already set); W and w
// go into the first free slot after B and b. The period has exactly six slots, so they always fit.
void fill_block(int p, const VOffsets& o, std::vector<unsigned> used, BuildingBlock& blk) {
  for (int i = 0; i < p; ++i) {
    const int c0 = i, c1 = 2 * p - 1 - i;
    BlockPass* x = blk.passes[i].data();
    x[0] = {ActionKind::kF, c0, o.F[i], 1};
    x[1] = {ActionKind::kF, c1, o.f[i], 1};
    x[2] = {ActionKind::kB, c1, o.B[i], 1};
    x[3] = {ActionKind::kB, c0, o.b[i], 1};
    x[4] = {ActionKind::kW, c1, first_free(used[i], o.B[i] + 1), 1};
    x[5] = {ActionKind::kW, c0, first_free(used[i], o.b[i] + 1), 1};
  }
}

// The block's period-6 slots per device in v_grid's order (F, f, B, b, W, w), W and w where
// fill_block puts them.
VGridPattern pattern_of(int p, const VOffsets& o) {
  VGridPattern pat(p);
  for (int i = 0; i < p; ++i) {
    unsigned used = 0;
    for (int x : {o.F[i], o.f[i], o.B[i], o.b[i]}) take(used, x);
    const int w = first_free(used, o.B[i] + 1), ww = first_free(used, o.b[i] + 1);
    pat[i] = {o.F[i] % kPeriod, o.f[i] % kPeriod, o.B[i] % kPeriod,
              o.b[i] % kPeriod, w % kPeriod,      ww % kPeriod};
  }
  return pat;
}

// The authors' reordering (v_grid_schedules) of blocks `which` of `cands` as curve points, in
// that order; nullopt where their method refuses the block or its order does not validate. A
// schedule several blocks share is evaluated once; its point names the first of them.
template <class Cands>
std::vector<std::optional<TradeoffPoint>> grid_points(int p, int m, const Cands& cands,
                                                      const std::vector<std::size_t>& which,
                                                      const CostTable& costs) {
  std::vector<VGridPattern> patterns;
  patterns.reserve(which.size());
  for (std::size_t i : which) patterns.push_back(pattern_of(p, cands[i].o));
  const VGridSchedules grid = v_grid_schedules(p, m, patterns, 2 * p);
  // Every grid schedule holds the same passes (m of each of a device's six; v_grid checks it),
  // only in other orders, so one dependency graph serves them all: that of the first the
  // evaluator's checks accept, built once. Each order is timed on it as the evaluator times it
  // (detail::time_orders, same timeline, same peaks); an order that deadlocks is refused.
  std::optional<detail::Flat> flat;
  std::optional<detail::ActionIds> ids;
  for (const std::optional<Schedule>& s : grid.schedules) {
    if (!s) continue;
    try {
      flat.emplace(*s, costs);
    } catch (const ConfigError&) {
      continue;  // refused (an order that deadlocks): the next one's graph
    }
    ids.emplace(*flat, 2 * p, m);
    break;
  }
  std::vector<std::optional<TradeoffPoint>> answer(grid.schedules.size());
  tbb::parallel_for(std::size_t{0}, answer.size(), [&](std::size_t u) {
    const std::optional<Schedule>& s = grid.schedules[u];
    if (!s || !flat) return;
    const std::optional<detail::Orders> ord = ids->orders_of(*s);
    PW_ASSERT(ord.has_value(), "v_grid schedules hold different passes");
    detail::Timeline tl;
    if (!detail::time_orders(*flat, *ord, tl)) return;
    TradeoffPoint pt;
    pt.grid = true;
    pt.makespan = tl.makespan;
    pt.cost = tl.cost;
    for (const double x : order_peaks(*s, costs)) pt.peak_memory = std::max(pt.peak_memory, x);
    answer[u] = pt;
  });
  std::vector<std::optional<TradeoffPoint>> points(which.size());
  std::vector<char> named(answer.size(), 0);
  for (std::size_t k = 0; k < which.size(); ++k) {
    const std::size_t u = grid.of[k];
    if (!answer[u] || named[u]) continue;  // a later block of a shared schedule adds nothing
    named[u] = 1;
    points[k] = answer[u];
    points[k]->offsets = cands[which[k]].o;
  }
  return points;
}

std::uint64_t offsets_hash(const VOffsets& o) {
  std::uint64_t h = 1469598103934665603ull;
  for (const std::vector<int>* v : {&o.F, &o.f, &o.B, &o.b})
    for (int x : *v) h = (h ^ static_cast<std::uint64_t>(x + 1)) * 1099511628211ull;
  return h;
}

bool dominated(const std::vector<TradeoffPoint>& pts, double mem, TimePs t) {
  for (const TradeoffPoint& x : pts)
    if (x.peak_memory <= mem + 1e-9 && x.cost <= t) return true;
  return false;
}

void insert_point(std::vector<TradeoffPoint>& pts, TradeoffPoint pt) {
  if (dominated(pts, pt.peak_memory, pt.cost)) return;
  std::erase_if(pts, [&](const TradeoffPoint& x) {
    return x.peak_memory >= pt.peak_memory - 1e-9 && x.cost >= pt.cost;
  });
  pts.push_back(std::move(pt));
}

// The zero-bubble greedy scheduler on the V placement at every memory level (one chunk
// activation apart) from the block front's smallest peak up to 1F1B's budget.
void add_greedy_points(int p, int m, const CostTable& costs, std::vector<TradeoffPoint>& front) {
  if (front.empty()) return;
  const Placement pl = v_placement(p);
  const double chunk = std::max(costs.mem(0, ActionKind::kF), 1e-12);
  const double top = p * (costs.mem(0, ActionKind::kF) + costs.mem(2 * p - 1, ActionKind::kF));
  double lowest = front.front().peak_memory;
  for (const TradeoffPoint& pt : front) lowest = std::min(lowest, pt.peak_memory);
  std::vector<TradeoffPoint> runs;
  for (double limit = lowest; limit <= top + 1e-9; limit += chunk) {
    for (WPolicy w : {WPolicy::kFillAny, WPolicy::kFillKnownGaps, WPolicy::kLookahead}) {
      TradeoffPoint pt;
      pt.greedy = true;
      pt.greedy_limit = limit;
      pt.greedy_variant.w_policy = w;
      runs.push_back(pt);
    }
  }
  // The runs are independent: in parallel, then offered to the front in the order above. A
  // level's kFillAny run goes first; the level's other policies run only where it met a W they
  // would have decided otherwise (GreedyTiming::w_disagree): else their point is its point,
  // offered after it, which the front already holds or has beaten.
  std::vector<char> finished(runs.size(), 0);
  std::vector<GreedyTiming> timing(runs.size());
  auto run = [&](std::size_t i) {
    TradeoffPoint& pt = runs[i];
    GreedyTiming& r = timing[i];
    if (zb_greedy(pl, m, costs, pt.greedy_limit, pt.greedy_variant, "v-adaptive", &r)
            .actions.empty())
      return;
    finished[i] = 1;
    pt.peak_memory = r.peak_memory;
    pt.makespan = r.makespan;
    pt.cost = r.cost;
  };
  constexpr std::size_t kPolicies = 3;  // per level, kFillAny first
  std::vector<std::size_t> twin(runs.size());
  std::vector<WPolicy> policy(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    twin[i] = i - i % kPolicies;
    policy[i] = runs[i].greedy_variant.w_policy;
  }
  run_greedy_twins(twin, policy, timing, run);
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (finished[i]) insert_point(front, std::move(runs[i]));
}

}  // namespace

CostTable v_cost_table(const GeneratorParams& gp) {
  if (gp.stage_costs) {
    if (gp.stage_costs->num_stages != 2 * gp.p)
      throw ConfigError("", "stage_costs",
                        fmt::format("expected {} stages for a V placement of {} devices, got {}",
                                    2 * gp.p, gp.p, gp.stage_costs->num_stages));
    return *gp.stage_costs;
  }
  return make_uniform_cost_table(v_placement(gp.p, gp.num_layers), gp.costs);
}

TradeoffCurve adaptive_tradeoff(int p, int m, const CostTable& costs, const AdaptiveOptions& opt) {
  TradeoffCurve curve;
  if (p < 2 || m < 1) return curve;
  PW_ASSERT(costs.num_stages == 2 * p, "adaptive_tradeoff needs a cost table of 2p stages");
  // Every distinct block of the offset space (in the loops' order), squeezed in parallel below.
  struct Cand {
    Params q;
    VOffsets o;
    std::vector<unsigned> used;
    BlockSqueeze r;
  };
  // The blocks are built in parallel, one task per outer loop value (our space's split, the
  // authors' device-0 pattern), each keeping its blocks in its loops' order with their hashes;
  // then taken in the tasks' order, each distinct block once: the same list whatever the thread
  // count.
  struct Built {
    std::vector<Cand> cands;
    std::vector<std::uint64_t> hash;
    int tried = 0;
  };
  struct Task {
    int split = 0;         // our space (1..p), or 0
    int pattern0[4] = {};  // the authors' space
  };
  std::vector<Task> tasks;
  for (int split = 1; split <= p; ++split) tasks.push_back(Task{split, {}});
  if (opt.pattern_space)
    for (int ff = 1; ff < kPeriod; ++ff)
      for (int bf = 1; bf < kPeriod; ++bf)
        for (int bb = 1; bb < kPeriod; ++bb)
          if (ff != bf && ff != bb && bf != bb) tasks.push_back(Task{0, {0, ff, bf, bb}});
  std::vector<Built> built(tasks.size());
  tbb::parallel_for(std::size_t{0}, tasks.size(), [&](std::size_t t) {
    Built& out = built[t];
    VOffsets o;
    std::vector<unsigned> used;
    auto keep = [&](const Params& q) {
      out.hash.push_back(offsets_hash(o));
      out.cands.push_back(Cand{q, o, used, {}});
    };
    const int split = tasks[t].split;
    if (split > 0) {
      for (int da = 1; da <= opt.max_offset; ++da)
        for (int ua = 1; ua <= opt.max_offset; ++ua)
          for (int db = 1; db <= opt.max_offset; ++db)
            for (int ub = 1; ub <= opt.max_offset; ++ub) {
              // One group (split == p) ignores group B; two identical groups are one group.
              if (split == p && (db != 1 || ub != 1)) continue;
              if (split < p && da == db && ua == ub) continue;
              for (int turn = 1; turn <= opt.turn_range; ++turn) {
                ++out.tried;
                const Params q{split, da, ua, split == p ? da : db, split == p ? ua : ub, turn};
                if (build_offsets(p, q, o, used)) keep(q);
              }
            }
      return;
    }
    // The authors' space (build_pattern_offsets), after ours: only the blocks ours lacks.
    for (int k0 = 1; k0 < kPeriod; ++k0)
      for (int k1 = 1; k1 <= k0; ++k1)
        for (int len0 = 1; len0 < p; ++len0) {
          ++out.tried;
          if (build_pattern_offsets(p, tasks[t].pattern0, k0, k1, len0, o, used))
            keep(Params{len0, k0, 1, k1, 1, 0});
        }
  });
  std::vector<Cand> cands;
  std::unordered_set<std::uint64_t> seen;
  for (Built& b : built) {
    curve.candidates += b.tried;
    // Different group parameters can give the same block; squeeze it once.
    for (std::size_t k = 0; k < b.cands.size(); ++k)
      if (seen.insert(b.hash[k]).second) cands.push_back(std::move(b.cands[k]));
  }
  // Blocks whose devices differ only by a shift of all of a device's passes alike squeeze alike
  // (squeeze_block_applies): each such class (1,062 of 1,767 blocks at p=16) is squeezed once,
  // for its first block, and the others take its figures.
  std::vector<std::vector<int>> shape(cands.size());  // per device, offsets less its first's
  std::vector<char> applies(cands.size(), 0);
  auto for_blocks = [&](auto&& body) {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, cands.size(), 16), [&](const auto& rg) {
      BlockWorkspace ws;
      BuildingBlock blk;
      blk.name = "v-adaptive";
      blk.placement = v_placement(p);
      blk.period = kPeriod;
      blk.passes.assign(p, std::vector<BlockPass>(6));
      for (std::size_t i = rg.begin(); i != rg.end(); ++i) {
        fill_block(p, cands[i].o, cands[i].used, blk);
        body(i, blk, ws);
      }
    });
  };
  for_blocks([&](std::size_t i, const BuildingBlock& blk, BlockWorkspace& ws) {
    if (!(applies[i] = squeeze_block_applies(blk, ws))) return;
    std::vector<int>& key = shape[i];
    key.reserve(static_cast<std::size_t>(6 * p));
    for (const std::vector<BlockPass>& dev : blk.passes)
      for (const BlockPass& x : dev) key.push_back(x.offset - dev.front().offset);
  });
  std::vector<std::size_t> same_as(cands.size());
  {
    std::map<std::vector<int>, std::size_t> first;
    for (std::size_t i = 0; i < cands.size(); ++i)
      same_as[i] = applies[i] ? first.try_emplace(std::move(shape[i]), i).first->second : i;
  }
  for_blocks([&](std::size_t i, const BuildingBlock& blk, BlockWorkspace& ws) {
    if (!applies[i])
      cands[i].r.makespan = -1;
    else if (same_as[i] == i)
      cands[i].r = squeeze_block(blk, m, costs, ws);
  });
  for (std::size_t i = 0; i < cands.size(); ++i)
    if (same_as[i] != i) cands[i].r = cands[same_as[i]].r;
  // The cheapest blocks also go through the authors' own reordering (their warm-up and
  // cool-down patterns and greedy bubble filling, planner/schedules/v_grid.h): on some blocks it
  // finds orders the squeeze and the reorderings below do not (p=4, m=8, 5 chunk activations
  // held until W: 56 against 58). Which blocks: the `grid_per_level` cheapest by plain squeeze
  // at each peak level (0: every block). A heuristic, measured rather than proved: on the unit-
  // cost sweeps of docs/schedules.md 12 per level give the curve of all blocks; over 360 curves
  // with other cost tables 16 per level is up to 4.2% above it at some level (docs/schedules.md).
  std::vector<std::size_t> to_grid;
  if (opt.grid_method) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (cands[i].r.makespan >= 0) order.push_back(i);
    // Levels of half a 1F1B stage (one chunk activation): the unit the method's own memory
    // rule counts in, whatever share of an activation a W holds in the cost table.
    auto level = [&](std::size_t i) { return std::ceil(cands[i].r.peak_memory * 2 - 1e-9); };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const double la = level(a), lb = level(b);
      return la != lb ? la < lb : cands[a].r.cost < cands[b].r.cost;
    });
    int taken = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (k > 0 && level(order[k]) != level(order[k - 1])) taken = 0;
      if (opt.grid_per_level > 0 && taken >= opt.grid_per_level) continue;
      ++taken;
      to_grid.push_back(order[k]);
    }
    std::sort(to_grid.begin(), to_grid.end());
  }
  std::vector<std::optional<TradeoffPoint>> grid = grid_points(p, m, cands, to_grid, costs);
  // The front takes them in the loops' order: the same curve whatever the thread count.
  std::vector<TradeoffPoint> front;
  for (Cand& c : cands) {
    const BlockSqueeze& r = c.r;
    if (r.makespan < 0) continue;
    ++curve.valid;
    if (dominated(front, r.peak_memory, r.cost)) continue;
    TradeoffPoint pt;
    pt.peak_memory = r.peak_memory;
    pt.makespan = r.makespan;
    pt.cost = r.cost;
    pt.split = c.q.split;
    pt.down_a = c.q.down_a;
    pt.up_a = c.q.up_a;
    pt.down_b = c.q.down_b;
    pt.up_b = c.q.up_b;
    pt.turn = c.q.turn;
    pt.offsets = std::move(c.o);
    insert_point(front, std::move(pt));
  }
  if (opt.fill_w) {
    std::vector<BlockSqueeze> filled(front.size());
    tbb::parallel_for(std::size_t{0}, front.size(), [&](std::size_t i) {
      Schedule s = block_to_schedule(v_block(p, front[i].offsets, "v-adaptive"), m);
      squeeze_fill_w(s, costs, &filled[i]);
    });
    std::vector<TradeoffPoint> refined;
    for (std::size_t i = 0; i < front.size(); ++i) {
      const TradeoffPoint& pt = front[i];
      const BlockSqueeze& r = filled[i];
      const double peak = r.peak_memory;
      TradeoffPoint better = pt;
      if (r.cost < pt.cost) {
        better.makespan = r.makespan;
        better.cost = r.cost;
        better.peak_memory = std::min(pt.peak_memory, peak);
        better.filled = true;
      }
      insert_point(refined, better);
    }
    front = std::move(refined);
  }
  for (std::optional<TradeoffPoint>& g : grid)
    if (g && !dominated(front, g->peak_memory, g->cost)) insert_point(front, std::move(*g));
  if (opt.greedy_points) add_greedy_points(p, m, costs, front);
  std::sort(front.begin(), front.end(), [](const TradeoffPoint& a, const TradeoffPoint& b) {
    return a.peak_memory < b.peak_memory;
  });
  curve.points = std::move(front);
  return curve;
}

const TradeoffPoint& pick_point(const TradeoffCurve& curve, double memory_limit) {
  PW_ASSERT(!curve.points.empty(), "empty trade-off curve");
  const TradeoffPoint* best = nullptr;
  for (const TradeoffPoint& pt : curve.points)
    if (memory_limit <= 0 || pt.peak_memory <= memory_limit + 1e-9)
      if (!best || pt.cost < best->cost) best = &pt;
  if (!best)
    throw ConfigError("", "--memory-limit",
                      fmt::format("no V-shape schedule fits {} activations per device; the "
                                  "smallest feasible limit is {}",
                                  memory_limit, curve.points.front().peak_memory));
  return *best;
}

Schedule tradeoff_schedule(int p, int m, const TradeoffPoint& pt, const CostTable& costs,
                           int num_layers) {
  if (pt.grid) {
    std::optional<Schedule> s = v_grid_schedule(p, m, pattern_of(p, pt.offsets), 2 * p, num_layers);
    PW_ASSERT(s.has_value(), "grid trade-off point no longer reproduces");
    return std::move(*s);
  }
  if (pt.greedy) {
    Schedule s = zb_greedy(v_placement(p, num_layers), m, costs, pt.greedy_limit, pt.greedy_variant,
                           "v-adaptive");
    PW_ASSERT(!s.actions.empty(), "greedy trade-off point no longer reproduces");
    return s;
  }
  // Filled points were measured with the cool-down reorder + gap filling, plain ones without.
  BlockScheduleOptions opt;
  opt.reorder_cooldown = pt.filled;
  Schedule s = block_to_schedule(v_block(p, pt.offsets, "v-adaptive", num_layers), m, opt);
  if (pt.filled) squeeze_fill_w(s, costs);
  return s;
}

Schedule generate_v_adaptive(const GeneratorParams& gp) {
  if (gp.p < 2) throw ConfigError("", "--pp", "v-adaptive needs at least 2 pipeline devices");
  const CostTable costs = v_cost_table(gp);
  // The curve does not depend on the memory limit: with a memo, one search per (p, m, costs).
  auto compute = [&] { return adaptive_tradeoff(gp.p, gp.m, costs); };
  std::shared_ptr<const TradeoffCurve> held;
  if (gp.memo) {
    std::string key = fmt::format("v-adaptive/{}/{}", gp.p, gp.m);
    append_cost_key(costs, &key);
    held = gp.memo->get<TradeoffCurve>(key, compute);
  } else {
    held = std::make_shared<const TradeoffCurve>(compute());
  }
  const TradeoffCurve& curve = *held;
  if (gp.memory_limit <= 0)
    return tradeoff_schedule(gp.p, gp.m, pick_point(curve, 0), costs, gp.num_layers);
  // Under a limit the candidates are the curve's pick; the two cheapest block points that fit,
  // reordered with the limit as every device's cap (planner/schedules/block_reorder.h: a block
  // whose own peak is below the limit may then run warm-up forwards early up to it; 2, not
  // more: each reordering costs about as much as the whole offset search at p=16, m=64); and
  // v-zb's schedule under the same limit (the V-ZB block reordered under it, else the greedy
  // ZB-V), which the offset space does not hold (its turn at device 0 waits 4p-3 slots). That
  // one can be the best V schedule there is (p=4, m=8, activations held until W, 6 and 7 chunk
  // activations: cost 53 and 51 against 56 and 53 from the curve's blocks) and can fit a limit
  // no curve point fits; `v-adaptive` never loses to `v-zb`. The cheapest that fits wins, ties
  // to the earlier candidate.
  std::optional<Schedule> best;
  std::optional<ConfigError> none_fits;
  try {
    best = tradeoff_schedule(gp.p, gp.m, pick_point(curve, gp.memory_limit), costs, gp.num_layers);
  } catch (const ConfigError& e) {
    none_fits = e;
  }
  std::vector<const TradeoffPoint*> blocks;
  for (const TradeoffPoint& pt : curve.points)
    if (!pt.greedy && pt.peak_memory <= gp.memory_limit + 1e-9) blocks.push_back(&pt);
  std::stable_sort(
      blocks.begin(), blocks.end(),
      [](const TradeoffPoint* a, const TradeoffPoint* b) { return a->cost < b->cost; });
  if (blocks.size() > 2) blocks.resize(2);
  ReorderOptions opt;
  opt.caps.assign(gp.p, gp.memory_limit);
  // The candidates are independent: in parallel (the last one is v-zb), then compared in order.
  const std::size_t n = blocks.size();
  std::vector<std::optional<Schedule>> found(n + 1);
  std::optional<ConfigError> vzb_refused;
  tbb::parallel_for(std::size_t{0}, n + 1, [&](std::size_t i) {
    try {
      found[i] = i < n
                     ? reorder_block(v_block(gp.p, blocks[i]->offsets, "v-adaptive", gp.num_layers),
                                     gp.m, costs, opt)
                           .schedule
                     : generate_v_zb(gp);
    } catch (const ConfigError& e) {
      // No reordering of this block fits the limit, or no V-ZB schedule does (that refusal
      // names the smallest limit the greedy scheduler fits, below any block's).
      if (i == n) vzb_refused = e;
    }
  });
  TimePs best_cost = 0, best_makespan = 0;
  if (best) {
    const EvalResult r0 = evaluate(*best, costs);
    best_cost = r0.cost;
    best_makespan = r0.makespan;
  }
  for (std::optional<Schedule>& s : found) {
    if (!s) continue;
    const EvalResult r = evaluate(*s, costs);
    if (best && std::tie(r.cost, r.makespan) >= std::tie(best_cost, best_makespan)) continue;
    best_cost = r.cost;
    best_makespan = r.makespan;
    best = std::move(s);
  }
  if (!best) {
    if (!vzb_refused) throw *none_fits;
    std::string msg = vzb_refused->message();
    if (msg.rfind("v-zb", 0) == 0) msg.replace(0, 4, "v-adaptive");
    throw ConfigError(vzb_refused->file(), vzb_refused->key(), msg);
  }
  best->name = "v-adaptive";
  return std::move(*best);
}

}  // namespace pw
