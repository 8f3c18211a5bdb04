// Scenario mode of `pipewright simulate` (placeholder until the discrete-event simulator lands).
#include "tools/simulate_scenario.h"

#include <cstdio>

namespace pw::tools {

void add_scenario_sim_flags(CLI::App* sub, ScenarioSimOptions* opts) {
  sub->add_option("scenario", opts->scenario, "Scenario YAML (model, cluster, parallel config)");
  sub->add_option("--plan", opts->plan, "Re-simulate an emitted plan");
  sub->add_option("--trace", opts->trace, "Write a Perfetto/Chrome trace JSON");
  sub->add_option("--report", opts->report, "Write a self-contained HTML report");
}

int run_scenario_simulation(const ScenarioSimOptions&) {
  std::fprintf(stderr, "pipewright simulate: scenario mode not yet available\n");
  return 1;
}

}  // namespace pw::tools
