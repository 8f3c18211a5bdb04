#pragma once
// Test helper: a scenario file -> simulator input (mirrors tools/simulate_scenario.cc, which the
// sim tests cannot link).
#include <fmt/format.h>

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

/// A small GPT-style scenario (8 layers, h = 1024) on dgx-a100-80gb nodes; `extra` is appended to
/// the parallel section.
inline hw::Scenario small_scenario(int t, int p, int nodes, int B, const std::string& extra = "",
                                   int seq = 1024) {
  const std::string text = fmt::format(R"(
model: {{num_layers: 8, hidden_size: 1024, num_attention_heads: 16, seq_length: {},
        vocab_size: 51200}}
cluster: {{profile: dgx-a100-80gb, nodes: {}}}
parallel:
  tensor_model_parallel_size: {}
  pipeline_model_parallel_size: {}
  micro_batch_size: 1
  global_batch_size: {}
{}
)",
                                       seq, nodes, t, p, B, extra);
  return hw::parse_scenario(text, "small.yaml", ".");
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
