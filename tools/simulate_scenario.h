#pragma once
/// `pipewright simulate SCENARIO.yaml` and `--plan plan.yaml`: the full-iteration discrete-event
/// simulation of a scenario (implemented with the discrete-event simulator in
/// tools/simulate_scenario.cc). cmd_simulate.cc dispatches here when a scenario or plan is
/// given.
#include <CLI/CLI.hpp>

#include "hwmodels/scenario.h"
#include "planner/search/scenario_input.h"
#include "sim/iteration.h"

namespace pw::tools {

/// Options of the scenario mode, registered on the `simulate` subcommand.
struct ScenarioSimOptions {
  std::string scenario;     ///< positional SCENARIO.yaml
  std::string plan;         ///< --plan
  std::string trace;        ///< --trace FILE (Perfetto JSON)
  std::string trace_ranks;  ///< --trace-ranks all | GPU,GPU,... ("" = at most 8, evenly spaced)
  std::string format = "table";
  std::string report;                 ///< --report FILE (HTML)
  bool overlap_grad_reduce = false;   ///< --overlap-grad-reduce (sets the configuration's)
  bool overlap_param_gather = false;  ///< --overlap-param-gather (sets the configuration's)
  bool overlap_p2p_comm = false;      ///< --overlap-p2p-comm (sets the configuration's)
  int grad_reduce_bytes = 0;          ///< --grad-reduce-bytes 4 | 2 (0: the configuration's)
  bool all_ranks = false;             ///< --all-ranks: simulate every GPU, not representatives
  double comm_slowdown = 0.05;        ///< --comm-compute-slowdown
};

/// Adds scenario-mode flags (other than --format, which the caller owns) to `sub`.
void add_scenario_sim_flags(CLI::App* sub, ScenarioSimOptions* opts);
/// Runs the scenario mode (or, with --plan, the plan mode); returns the exit status.
int run_scenario_simulation(const ScenarioSimOptions& opts);

/// The simulator options the flags ask for (shared by the scenario and plan modes); the trace
/// (with its memory timeline) is recorded for --trace and for --report.
IterationOptions iteration_options(const ScenarioSimOptions& opts, bool flash_attention);
/// The simulation's trace restricted to the GPUs --trace-ranks names (all of them with "all";
/// by default at most 8 of the simulated GPUs, evenly spaced, the first and last included, with
/// a note on stderr).
Trace selected_trace(const ScenarioSimOptions& opts, const IterationResult& r);
/// Writes the configuration settings the flags override (--overlap-grad-reduce,
/// --grad-reduce-bytes) into `c`.
void apply_config_flags(const ScenarioSimOptions& opts, ParallelConfig* c);
/// `--report FILE`: the simulated iteration (`in`, its result `r` and the per-action `timings` of
/// the representative GPUs) drawn by the report renderer; `s` names the scenario and cluster.
void write_iteration_report(const std::string& path, const hw::Scenario& s,
                            const IterationInput& in, const std::vector<ActionTiming>& timings,
                            const IterationResult& r);
/// The scenario mode's summary: a table (first row `source`: s.file), or JSON when `json`.
std::string scenario_summary(const hw::Scenario& s, const IterationResult& r, bool json,
                             const char* source = "scenario");

/// `simulate --plan plan.yaml` (tools/simulate_plan.cc): loads and validates the plan (checksum,
/// legality, timings), then re-simulates the plan's own schedule. A plan whose model shape is
/// complete and whose `cluster` names a hardware profile (shipped name or YAML path, relative
/// to the plan's folder) is rebuilt: costs from the workload model, one iteration on the
/// discrete-event simulator, the scenario mode's summary. Any other plan (custom, or emitted
/// by `simulate --emit` on fixed costs) runs its schedule on the discrete-event engine with
/// each action's predicted duration as its cost and each stage boundary's hop latency inferred
/// from the predicted gaps (exact for evaluator-made predictions). Both print "plan predicted
/// X, re-simulated Y, difference Z%". Bad plans throw ConfigError naming the file and field.
int run_plan_simulation(const ScenarioSimOptions& opts);

}  // namespace pw::tools
