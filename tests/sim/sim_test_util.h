#pragma once
// Test helper: a scenario file -> simulator input (mirrors tools/simulate_scenario.cc, which the
// sim tests cannot link).
#include <algorithm>
#include <string>

#include "hwmodels/scenario.h"
#include "hwmodels/transformer.h"
#include "planner/schedules/generator.h"
#include "sim/iteration.h"

namespace pw::testing {

inline std::string scenario_path(const std::string& rel) {
  return std::string(PW_SOURCE_DIR) + "/scenarios/" + rel;
}

inline IterationInput input_for(const hw::Scenario& s) {
  GeneratorParams gp;
  gp.p = s.parallel.pipeline_parallel;
  gp.m = static_cast<int>(s.num_microbatches());
  gp.v = s.parallel.virtual_stages > 1 ? s.parallel.virtual_stages : 0;
  gp.num_layers = s.model.num_layers;
  IterationInput in;
  in.model = s.model;
  in.parallel = s.parallel;
  in.profile = s.profile;
  in.topology = s.topology;
  in.schedule = generate_schedule(default_registry(), s.parallel.schedule, gp);
  return in;
}

inline IterationInput input_for(const std::string& rel) {
  return input_for(hw::load_scenario(scenario_path(rel)));
}

}  // namespace pw::testing
