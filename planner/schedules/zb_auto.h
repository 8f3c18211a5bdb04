#pragma once
/// The automatic zero-bubble scheduler (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024):
/// a greedy list scheduler over real pass costs under a per-device activation-memory limit.
/// Each device, whenever it is free, runs (1) the ready input-gradient backward B of its deepest
/// stage, else (2) the ready forward F of its deepest stage if memory allows (a forward of an
/// earlier stage keeps room for one forward of each later stage on the device, so the V shape
/// cannot starve itself), else (3) the oldest pending weight pass W (W fills gaps and frees
/// memory), else it waits for the next pass to become ready. Several variants (how strictly W
/// may fill a gap, how many forwards the warm-up may run ahead) are tried and the best kept.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cost_table.h"
#include "planner/schedules/generator.h"

namespace pw {

/// When a device with nothing ready may run a pending W.
enum class WPolicy : std::uint8_t {
  kFillAny,        ///< whenever it would otherwise idle
  kFillKnownGaps,  ///< when W ends before the next known-ready pass, memory needs it, or the
                   ///< next pass's readiness is not known yet
  kLookahead,      ///< when W ends before the next ready pass (waiting to learn when that is),
                   ///< memory needs it, or no F/B is left on the device
  kLazy,           ///< only when memory needs it or no F/B is left on the device
};
inline constexpr int kNumWPolicies = 4;

/// Knobs of one greedy run.
struct GreedyVariant {
  WPolicy w_policy = WPolicy::kFillAny;
  /// Do not start a forward that would delay a backward whose ready time is already known.
  bool strict_f = false;
  /// Extra cap on forwards in flight per device (F issued, B not done), 0 = memory limit only.
  int max_in_flight = 0;
  /// 1F1B-like staggered warm-up: device d keeps at most p - d + staggered_extra forwards in
  /// flight (-1: off).
  int staggered_extra = -1;
  /// With staggered_extra >= 0: the cap is slope * (p - d) - (slope - 1) + staggered_extra, so
  /// slope 2 gives ZB-2p's warm-up of 2(p - d) - 1 forwards on device d.
  int stagger_slope = 1;
  /// Emit full backwards (BW) instead of B + W (schedules without the zero-bubble split).
  bool fused_backward = false;

  bool operator==(const GreedyVariant&) const = default;
};

/// The fixed-cost evaluator's figures for a greedy run's order (sim/evaluator.h EvalResult: cost,
/// makespan, the largest device peak), computed alongside the run.
/// Also which other W policies would have decided some W differently on the run's path: a
/// policy whose bit is clear makes every decision alike, so its run (the variant otherwise the
/// same) gives the same order, finished or not. Set whether or not the run finishes.
struct GreedyTiming {
  TimePs cost = 0;
  TimePs makespan = 0;
  double peak_memory = 0;
  unsigned w_disagree = 0;  ///< bit w set: WPolicy w would have answered otherwise somewhere

  /// Whether the same variant with W policy `w` would have to be run to know its order.
  bool differs_for(WPolicy w) const { return w_disagree >> static_cast<int>(w) & 1u; }
};

/// One greedy run. With several pipelines (Placement::num_pipelines), microbatch j runs in
/// pipeline j * P / m. `limit` is per device in the cost table's memory units (<= 0: none). Returns
/// an empty schedule (no actions) when the run cannot finish (memory too small to progress).
/// With `timing`, a finished run also reports what evaluate(schedule, costs) would, and any run
/// which other W policies it would have to be repeated with (GreedyTiming::w_disagree).
Schedule zb_greedy(const Placement& placement, int m, const CostTable& costs, double limit,
                   const GreedyVariant& variant, const std::string& name,
                   GreedyTiming* timing = nullptr);
/// The same with one limit per device (`limits[d]`, <= 0: none).
Schedule zb_greedy(const Placement& placement, int m, const CostTable& costs,
                   const std::vector<double>& limits, const GreedyVariant& variant,
                   const std::string& name, GreedyTiming* timing = nullptr);

/// Runs the greedy runs 0..twin.size()-1 (`run(i)` runs run i and fills timing[i]) as zb_auto's
/// variants and the V curve's greedy points are run: first, in parallel, every run that is its
/// own kFillAny twin (twin[i] == i, the same variant with WPolicy::kFillAny); then, in parallel,
/// each other run whose twin's timing says its W policy `policy[i]` would have decided some W
/// otherwise (GreedyTiming::differs_for). The runs left out would repeat their twin's order, so
/// with every twin ahead of its runs in the callers' order, leaving them out changes no pick.
void run_greedy_twins(const std::vector<std::size_t>& twin, const std::vector<WPolicy>& policy,
                      const std::vector<GreedyTiming>& timing,
                      const std::function<void(std::size_t)>& run);

/// Tries the variants and returns the schedule with the smallest zero-bubble cost (ties: the
/// first variant). Throws ConfigError("", "--memory-limit", ...) naming the smallest feasible
/// limit (found by doubling then bisection) when no variant finishes under `limit`.
Schedule zb_auto(const Placement& placement, int m, const CostTable& costs, double limit,
                 const std::string& name);
/// The same with one limit per device; the error names device 0's smallest feasible limit (the
/// others scaled alike).
Schedule zb_auto(const Placement& placement, int m, const CostTable& costs,
                 const std::vector<double>& limits, const std::string& name);

/// The zero-bubble papers' default budgets without an explicit limit: `k` x p microbatches of
/// each device's own stages (ZB-1p: k = 1, ZB-2p: 2, ZB-V / V-ZB: 1 over both chunks), i.e.
/// k * p * (sum of F's activation over the device's stages of pipeline 0). With uneven stages
/// (an embedding or head stage) each device gets its own budget, not device 0's.
std::vector<double> own_stage_budgets(const Placement& placement, const CostTable& costs, int k);

/// Cost table for a linear placement from GeneratorParams (stage_costs if set, must have p
/// stages; else uniform costs).
CostTable linear_cost_table(const GeneratorParams& gp);

}  // namespace pw
