#pragma once
/// Turning generator names into evaluated ScheduleReports for the renderer, and the cost
/// convention `pipewright compare` uses without a scenario.
#include <functional>
#include <string>
#include <vector>

#include "core/cost_table.h"
#include "planner/schedules/generator.h"
#include "report/report.h"
#include "sim/iteration.h"

namespace pw {

/// Uniform costs given per 1F1B stage (a stage of num_layers / p layers): every compute pass of
/// a stage is scaled by Placement::activation_weight (a V-shape chunk costs half a 1F1B stage),
/// so schedules with different placements do the same total work and compare fairly. Hops are
/// not scaled (the activation crossing a boundary has the same size). Memory as
/// make_uniform_cost_table.
CostTable layer_scaled_cost_table(const Placement& placement, const UniformCosts& costs);

/// Cost model used to evaluate each generated schedule (called once per schedule).
using CostModelFn = std::function<CostTable(const Placement&)>;

/// Evaluates `schedule` with the memory timeline on; a ConfigError from the evaluator becomes
/// the entry's `error`.
ScheduleReport evaluate_for_report(const Schedule& schedule, const CostTable& costs,
                                   const std::string& description = "");

/// Builds one report entry per name, in the order given. Unknown names throw ConfigError (the
/// registry's message lists the valid ones) before anything is generated; a generator that
/// rejects `params` (ConfigError) gives an entry carrying its reason instead of aborting. Each
/// schedule is generated twice: once to learn its placement, then with
/// GeneratorParams::stage_costs = cost_model(placement) so cost-aware generators see the real
/// costs (the first one is kept if the second fails or changes the placement).
std::vector<ScheduleReport> build_schedule_reports(const GeneratorRegistry& registry,
                                                   const std::vector<std::string>& names,
                                                   const GeneratorParams& params,
                                                   const CostModelFn& cost_model);

/// Lines `run` up against `plan` (same device/position numbering). Per kind group the summed
/// durations are compared; the iteration compares plan.predicted_iteration (or the predicted
/// span) with run.iteration_time (or the measured span). Throws ConfigError (prefixed with
/// `source`) when the run names actions the plan does not have or the plan has no predictions.
RunComparison compare_run(const Plan& plan, const MeasuredRun& run, const std::string& source = "");

/// One iteration as the discrete-event simulator ran it (`simulate SCENARIO --report`): the
/// schedule's actions at their simulated intervals on each pipeline rank's representative GPU
/// (`timings`, as simulate_iteration fills them), per-device busy time and span, and the
/// iteration's figures (time, tokens/s, MFU, exposed communication, peak bytes per GPU, fit);
/// per-device memory in GB: model state, activations and buffers, over time when the
/// simulation recorded its memory timeline (IterationOptions::trace), and its peak (use
/// ReportInput::memory_unit "GB").
ScheduleReport simulated_iteration_report(const std::string& name, const std::string& description,
                                          const Schedule& schedule,
                                          const std::vector<ActionTiming>& timings,
                                          const IterationResult& result);

}  // namespace pw
