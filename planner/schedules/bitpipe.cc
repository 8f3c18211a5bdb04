// BitPipe (Wu et al. 2024): two V-shaped interleaved pipelines running in opposite directions.
// Every device holds 4 chunks: 2 of the "down" pipeline (which enters at device 0) and 2 of the
// "up" pipeline (which enters at device p-1); paired devices j and p-1-j hold the same layers and
// all-reduce those gradients at the end (PAIR_REDUCE). Layer placement for 16 layers, 4 devices:
// dev0 [0,1][6,7][14,15][8,9], dev1 [2,3][4,5][12,13][10,11], dev2 [4,5][2,3][10,11][12,13],
// dev3 [6,7][0,1][8,9][14,15]. The first m/2 microbatches run in the down pipeline, the rest in
// the up one, with full backwards (BW) as BitPipe uses.
//
// Order: a time-expanded construction (as pipeline diagrams are drawn). Microbatches are laid one
// at a time, alternating directions (down 0, up 0, down 1, up 1, ...); each one's 2p forwards
// then 2p backwards take the earliest free interval on their device after their prerequisite
// (real pass and hop costs). The first pair interleaves without a single collision (down's chunk
// k and up's chunk k sit on mirrored devices), and later microbatches fill the gaps the V turns
// leave. A microbatch may enter only after the backward of chunk g of the K-th earlier one of
// its pipeline (K bounds the activations in flight, like 1F1B's warm-up count); K in 1..p or
// unbounded and g in {0, p-1, 2p-1} are tried, and the zero-bubble greedy list scheduler (fused
// backwards) is tried too: the shortest schedule within the memory budget (default: interleaved
// 1F1B's peak, bitpipe_default_memory) wins. Each device's order is its passes sorted by their
// planned start. A strict per-device F/B alternation after a warm-up was measured and is worse
// (p=4 m=16: 112-132 slots against 103): in BitPipe's steady state a device runs the two
// backwards of a V turn back to back.
#include "planner/schedules/bitpipe.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "planner/schedules/block_reorder.h"
#include "planner/schedules/memory_family.h"
#include "planner/schedules/order_timing.h"
#include "planner/schedules/zb_auto.h"

namespace pw {
namespace {

constexpr TimePs kUnbounded = std::numeric_limits<TimePs>::max();

/// Busy intervals of one device, sorted by start; `reserve` takes the earliest free gap.
class Timeline {
 public:
  TimePs reserve(TimePs earliest, TimePs len) {
    TimePs t = earliest;
    // Intervals are disjoint and sorted by start, so by end too: skip those over by `earliest`.
    std::size_t i = static_cast<std::size_t>(
        std::partition_point(busy_.begin(), busy_.end(),
                             [t](const std::pair<TimePs, TimePs>& b) { return b.second <= t; }) -
        busy_.begin());
    for (; i < busy_.size(); ++i) {
      if (t + len <= busy_[i].first) break;
      t = std::max(t, busy_[i].second);
    }
    // Touching intervals are merged (only the gaps matter), so a device laid densely keeps a
    // few intervals and the scan above stays short even from `earliest` = 0.
    const bool joins_prev = i > 0 && busy_[i - 1].second == t;
    const bool joins_next = i < busy_.size() && busy_[i].first == t + len;
    if (joins_prev && joins_next) {
      busy_[i - 1].second = busy_[i].second;
      busy_.erase(busy_.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (joins_prev) {
      busy_[i - 1].second = t + len;
    } else if (joins_next) {
      busy_[i].first = t;
    } else {
      busy_.insert(busy_.begin() + static_cast<std::ptrdiff_t>(i), {t, t + len});
    }
    return t;
  }

 private:
  std::vector<std::pair<TimePs, TimePs>> busy_;
};

struct Planned {
  TimePs start;
  int seq;  // insertion sequence: breaks ties deterministically
  Action action;
};

// The time-expanded construction; see bitpipe_time_expanded.
std::vector<std::vector<Action>> time_expanded_order(const Placement& pl, int m, const CostTable& c,
                                                     int k, int gate) {
  const int p = pl.num_devices, chunks = 2 * p, half = m / 2;
  std::vector<Timeline> line(p);
  std::vector<std::vector<Planned>> planned(p);
  std::vector<TimePs> done(m, 0);  // end of each microbatch's backward of chunk `gate`
  int seq = 0;
  auto hop = [&](int from, int to) {
    return pl.stages[from].device != pl.stages[to].device ? c.comm[from] : TimePs{0};
  };
  auto lay = [&](int s, int j, ActionKind kind, TimePs ready) {
    const int d = pl.stages[s].device;
    const TimePs t = line[d].reserve(ready, c.time(s, kind));
    planned[d].push_back({t, seq++, Action{kind, static_cast<std::int16_t>(s), j}});
    return t + c.time(s, kind);
  };
  for (int n = 0; n < m; ++n) {
    const int pipe = n % 2, i = n / 2, j = pipe * half + i, base = pipe * chunks;
    TimePs t = (k > 0 && i >= k) ? done[j - k] : 0;
    for (int x = 0; x < chunks; ++x) {
      if (x > 0) t += hop(base + x - 1, base + x);
      t = lay(base + x, j, ActionKind::kF, t);
    }
    for (int x = chunks - 1; x >= 0; --x) {
      if (x < chunks - 1) t += hop(base + x + 1, base + x);
      t = lay(base + x, j, ActionKind::kBW, t);
      if (x == gate) done[j] = t;
    }
  }
  std::vector<std::vector<Action>> out(p);
  for (int d = 0; d < p; ++d) {
    auto& v = planned[d];
    std::sort(v.begin(), v.end(), [](const Planned& a, const Planned& b) {
      return a.start != b.start ? a.start < b.start : a.seq < b.seq;
    });
    for (const Planned& x : v) out[d].push_back(x.action);
  }
  return out;
}

}  // namespace

Placement bitpipe_placement(int p, int num_layers) {
  Placement pl;
  pl.kind = PlacementKind::kExplicit;
  pl.num_devices = p;
  const int chunks = 2 * p;
  pl.num_layers = num_layers > 0 ? num_layers : chunks;
  for (int pipe = 0; pipe < 2; ++pipe) {
    for (int k = 0; k < chunks; ++k) {
      StageInfo st;
      const int down = k < p ? k : 2 * p - 1 - k;
      st.device = pipe == 0 ? down : p - 1 - down;
      st.layer_begin = even_split_begin(k, chunks, pl.num_layers);
      st.layer_end = even_split_begin(k + 1, chunks, pl.num_layers);
      st.pipeline = pipe;
      st.index = k;
      pl.stages.push_back(st);
    }
  }
  return pl;
}

double bitpipe_default_memory(int p) { return p + (p - 1) / 2.0; }

Schedule bitpipe_time_expanded(const Placement& pl, int m, const CostTable& costs, int k,
                               int gate_chunk) {
  Schedule s;
  s.name = "bitpipe";
  s.placement = pl;
  s.num_microbatches = m;
  s.actions = time_expanded_order(pl, m, costs, k, gate_chunk);
  return s;
}

Schedule generate_bitpipe(const GeneratorParams& gp) {
  if (gp.p < 2 || gp.p % 2 != 0)
    throw ConfigError("", "--pp", fmt::format("bitpipe needs an even p >= 2, got {}", gp.p));
  if (gp.m % gp.p != 0)
    throw ConfigError(
        "", "--microbatches",
        fmt::format("bitpipe needs m to be a multiple of p = {}, got {}", gp.p, gp.m));
  const Placement pl = bitpipe_placement(gp.p, gp.num_layers);
  CostTable costs;
  if (gp.stage_costs) {
    if (gp.stage_costs->num_stages != pl.num_stages())
      throw ConfigError("", "stage_costs",
                        fmt::format("bitpipe expects {} stages", pl.num_stages()));
    costs = *gp.stage_costs;
  } else {
    costs = make_uniform_cost_table(pl, gp.costs);
  }
  const double limit = gp.memory_limit > 0 ? gp.memory_limit : bitpipe_default_memory(gp.p);
  Schedule best;
  TimePs best_cost = kUnbounded;
  double smallest_peak = std::numeric_limits<double>::infinity();
  // Candidate orders: the time-expanded construction for every gate chunk and admission lag k,
  // then the greedy with and without strict forwards. Built and timed in parallel, kept in this
  // order (the first of the shortest wins whatever the thread count).
  const int gates[] = {0, gp.p - 1, 2 * gp.p - 1};
  const std::size_t expanded = std::size(gates) * static_cast<std::size_t>(gp.p + 1);
  std::vector<Schedule> cand(expanded + 2);
  std::vector<TimePs> makespan(cand.size(), kUnbounded);
  std::vector<double> pk(cand.size(), 0.0);
  tbb::parallel_for(std::size_t{0}, cand.size(), [&](std::size_t i) {
    if (i < expanded) {
      const int k = static_cast<int>(i % (gp.p + 1));
      // Unbounded admission (k = 0) reads no gate: the first gate's order stands for all three
      // (a copy could only tie it, and the first of the shortest wins).
      if (k == 0 && i > 0) return;
      cand[i] = bitpipe_time_expanded(pl, gp.m, costs, k, gates[i / (gp.p + 1)]);
    } else {
      GreedyVariant v;
      v.strict_f = i > expanded;
      v.fused_backward = true;
      cand[i] = zb_greedy(pl, gp.m, costs, limit, v, "bitpipe");
    }
  });
  // Every candidate holds the same passes (F and BW of every stage and microbatch) in another
  // order, so one dependency graph serves them all: the first candidate's, built once, each
  // order timed on it as the evaluator times it (detail::time_orders; peaks by order_peaks, the
  // evaluator's too). An order that deadlocks is no candidate.
  const std::size_t first = static_cast<std::size_t>(
      std::find_if(cand.begin(), cand.end(), [](const Schedule& c) { return !c.actions.empty(); }) -
      cand.begin());
  if (first < cand.size()) {
    const detail::Flat flat(cand[first], costs);
    const detail::ActionIds ids(flat, pl.num_stages(), gp.m);
    tbb::parallel_for(std::size_t{0}, cand.size(), [&](std::size_t i) {
      if (cand[i].actions.empty()) return;
      const std::optional<detail::Orders> ord = ids.orders_of(cand[i]);
      PW_ASSERT(ord.has_value(), "bitpipe candidates hold different passes");
      detail::Timeline tl;
      if (!detail::time_orders(flat, *ord, tl)) {
        cand[i].actions.clear();
        return;
      }
      for (const double x : order_peaks(cand[i], costs)) pk[i] = std::max(pk[i], x);
      makespan[i] = tl.makespan;
    });
  }
  for (std::size_t i = 0; i < cand.size(); ++i) {
    if (cand[i].actions.empty()) continue;
    smallest_peak = std::min(smallest_peak, pk[i]);
    if (pk[i] > limit + 1e-9 || makespan[i] >= best_cost) continue;
    best_cost = makespan[i];
    best = std::move(cand[i]);
  }
  if (best_cost == kUnbounded)
    throw ConfigError("", "--memory-limit",
                      fmt::format("bitpipe cannot run within {} activations per device; the "
                                  "smallest peak among its candidate orders is {}",
                                  limit, smallest_peak));
  // Gradients of every chunk are complete after its last backward: all-reduce with the pair.
  for (int d = 0; d < gp.p; ++d)
    for (int s = 0; s < pl.num_stages(); ++s)
      if (pl.stages[s].device == d)
        best.actions[d].push_back(
            Action{ActionKind::kPairReduce, static_cast<std::int16_t>(s), -1});
  return best;
}

}  // namespace pw
