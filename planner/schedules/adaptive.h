#pragma once
/// Adaptive V-shape scheduler (Qi et al., NeurIPS 2024, "Pipeline Parallelism with Controllable
/// Memory"): searches building-block offsets under a memory limit and exposes the whole
/// memory/time trade-off curve.
///
/// Search space (documented in docs/schedules.md): the devices are split into two groups at any
/// device k (devices < k and >= k; k = p is one group). Within a group the offsets are uniform:
/// the forward-direction hop offset `down` (F on device i to F on i+1, and B likewise) and the
/// return-direction offset `up` (f on i+1 to f on i, and b likewise), each in 1..max_offset
/// slots. The turn at the last device (F -> f and B -> b) takes the smallest collision-free gap;
/// the turn at device 0 (f -> B) is searched over every collision-free gap in 1..turn_range. W and
/// w go greedily into the first free slot after B and b. Each candidate is squeezed under the real
/// costs; the Pareto front (peak memory, cost) is kept and its points are re-squeezed with W
/// gap filling (squeeze_fill_w), keeping the better of the two timelines. Optionally the
/// zero-bubble greedy scheduler (planner/schedules/zb_auto.h) on the same V placement adds a point
/// at every memory level one chunk apart up to 1F1B's budget; it reaches zero bubble at 1F1B
/// memory, which the uniform-offset blocks do not. Time is the zero-bubble papers' cost: the
/// largest device span (last end - first start of that device).
#include <string>
#include <vector>

#include "core/cost_table.h"
#include "planner/schedules/generator.h"
#include "planner/schedules/v_schedules.h"
#include "planner/schedules/zb_auto.h"

namespace pw {

struct AdaptiveOptions {
  int max_offset = 3;         ///< largest per-hop offset tried (slots)
  int turn_range = 6;         ///< largest f -> B turn gap tried at device 0 (slots)
  bool fill_w = true;         ///< re-squeeze the front's points with W gap filling
  bool greedy_points = true;  ///< add the greedy V scheduler's points (see above)
  /// Also search the authors' parametrisation of the block (device 0's pattern and uniform
  /// +k / -1 moves in two groups, their v_auto_schedule), whose last-device turns ours fixes.
  bool pattern_space = true;
  /// Also run every block through the authors' own reordering (planner/schedules/v_grid.h).
  bool grid_method = true;
  /// ... but only for the this many cheapest blocks (plain squeeze) of each peak level; 0: all.
  int grid_per_level = 16;
};

/// One point of the trade-off curve.
struct TradeoffPoint {
  double peak_memory = 0;  ///< largest device peak, cost table's memory units (1.0 = 1F1B stage)
  TimePs makespan = 0;     ///< last end - first start over all devices (ps, or slots)
  TimePs cost = 0;         ///< largest device span (zero-bubble convention): the curve's time
  bool filled = false;     ///< the makespan needs squeeze_fill_w's order
  bool grid = false;       ///< the order is the authors' reordering of the block (v_grid)
  int split = 0;           ///< group boundary device k
  int down_a = 1, up_a = 1, down_b = 1, up_b = 1;  ///< offsets of group A (< k) and B (>= k)
  int turn = 1;                                    ///< f -> B gap at device 0
  VOffsets offsets;                                ///< the block's chained start slots
  bool greedy = false;           ///< produced by the greedy scheduler, not by a block
  double greedy_limit = 0;       ///< the greedy run's memory limit
  GreedyVariant greedy_variant;  ///< and its variant
};

/// Result of the search: the Pareto front sorted by increasing memory (strictly decreasing
/// cost), and how many candidates were examined / were collision-free.
struct TradeoffCurve {
  std::vector<TradeoffPoint> points;
  int candidates = 0;
  int valid = 0;
};

/// Searches the offset space for p devices (p >= 2) and m microbatches under `costs` (a table
/// for v_placement(p): 2p stages). Deterministic; empty only when p < 2.
TradeoffCurve adaptive_tradeoff(int p, int m, const CostTable& costs,
                                const AdaptiveOptions& options = {});

/// The point with the smallest cost whose peak fits `memory_limit` (<= 0: no limit). Throws
/// ConfigError("", "--memory-limit", ...) stating the smallest feasible limit when none fits.
const TradeoffPoint& pick_point(const TradeoffCurve& curve, double memory_limit);

/// The schedule of one curve point (block repetition, squeezed; W-filled when point.filled).
Schedule tradeoff_schedule(int p, int m, const TradeoffPoint& point, const CostTable& costs,
                           int num_layers = 0);

/// Generator "v-adaptive": the shortest schedule under GeneratorParams::memory_limit (in 1F1B
/// stage activations; a V chunk counts 0.5), using stage_costs when given, else costs. Under a
/// limit, the curve's pick competes with the two cheapest fitting block points reordered with
/// the limit as every device's cap (reorder_block) and with v-zb's schedule under the same
/// limit (generate_v_zb; through GeneratorParams::memo when given); the lowest cost that fits
/// wins (ties: the earlier, the curve's first). When none fits, v-zb's refusal (renamed), which
/// names the smallest feasible limit.
Schedule generate_v_adaptive(const GeneratorParams& gp);

/// Cost table the V generators use for `gp`: *gp.stage_costs if set (must have 2p stages), else
/// make_uniform_cost_table(v_placement(p), gp.costs).
CostTable v_cost_table(const GeneratorParams& gp);

}  // namespace pw
