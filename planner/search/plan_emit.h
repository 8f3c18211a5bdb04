#pragma once
/// From a chosen configuration to an executable plan (core/plan.h): the generated schedule with
/// its layer split, communication made explicit (core/lowering.h), predicted per-action times
/// from the discrete-event simulator the planner ranks with (the evaluator where it cannot run),
/// the rank-to-GPU map and provenance.
#include <string>
#include <vector>

#include "core/lowering.h"
#include "core/plan.h"
#include "planner/schedules/generator.h"
#include "planner/search/screen.h"
#include "sim/iteration.h"

namespace pw {

/// Finds `pc` (a scenario's `parallel:` section) in `space`: schedule by name (and v for
/// interleaved-style generators). Returns false with `why` when the space cannot express it.
bool config_from_parallel(const SearchSpace& space, const ParallelConfig& pc, SearchConfig* out,
                          std::string* why);

/// How build_plan predicts a plan's per-action times and iteration.
struct EmitOptions {
  /// true: the discrete-event simulator (the planner's final tier) on the plan's own lowered
  /// schedule, with the problem's hardware profile and simulator options, so that `pipewright
  /// simulate --plan` re-simulates the plan to its own prediction. false: the evaluator (as when
  /// the ranking itself came from the evaluator).
  bool des = true;
};

/// Which engine predicted a plan: "des" or "evaluator".
inline constexpr const char* kPredictionDes = "des";
inline constexpr const char* kPredictionEvaluator = "evaluator";

/// Builds the plan of `c`: throws ConfigError when the generator refuses it. The schedule is
/// completed for execution (core/lowering.h complete_for_execution: explicit communication, and on
/// every device its REDUCE_GRAD (d > 1), PAIR_REDUCE and OPT actions); with the DES their predicted
/// intervals are those of the simulator's own reduction and optimizer tasks (sim/iteration.h), with
/// the evaluator fallback they take no time (the iteration figure still includes the planner's DP
/// and optimizer estimate). Megatron rank order (tensor innermost, then data, then pipeline):
/// pipeline rank r runs on GPU r * t * d. The engine that predicted it is recorded in
/// provenance.prediction_source as "des" or "evaluator" (followed by the reason in parentheses),
/// and returned in
/// `*source` when given.
Plan build_plan(const CostModel& model, const GeneratorRegistry& registry, const SearchConfig& c,
                const std::string& cluster, const Provenance& provenance,
                const EmitOptions& options = {}, std::string* source = nullptr);

/// The DES's run of `plan` (built by build_plan) as the planner's tier ran its configuration and
/// as `simulate --plan` re-runs it: the problem's simulator options, one representative GPU per
/// pipeline rank, the memory timeline and trace when `trace`; per-action intervals in `timings`.
IterationResult simulate_emitted_plan(const CostModel& model, const Plan& plan, bool trace,
                                      std::vector<ActionTiming>* timings);

}  // namespace pw
