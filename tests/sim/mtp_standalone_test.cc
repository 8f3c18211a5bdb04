// Megatron's mtp_standalone in the discrete-event simulator: a layout that puts the
// multi-token prediction depths on a stage of their own before the loss's ("...|t*16m|L") runs
// the depths there and the main model's and every depth's logits on the loss stage, and the hop
// between them carries 1 + D hidden states each way (the activations forward, their gradients
// backward), where the same split with the depths on the loss stage ("...|t*16|mL") carries one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hwmodels/scenario.h"
#include "planner/search/scenario_input.h"
#include "sim/iteration.h"

namespace pw {
namespace {

// Llama 3 8B (untied) with one depth on one DGX H100: t = 2 with SP, p = 4, 8 microbatches.
hw::Scenario mtp_scenario(const std::string& layout) {
  return hw::parse_scenario(
      fmt::format("model: {{preset: llama3-8b, mtp_num_layers: 1, seq_length: 2048}}\n"
                  "cluster: {{profile: dgx-h100, nodes: 1}}\n"
                  "parallel: {{tensor_model_parallel_size: 2, pipeline_model_parallel_size: 4, "
                  "micro_batch_size: 1, global_batch_size: 8, sequence_parallel: true, "
                  "pipeline_model_parallel_layout: \"{}\"}}\n",
                  layout),
      "s.yaml", ".");
}

IterationResult run(const hw::Scenario& s) {
  IterationOptions opt;
  opt.flash_attention = s.flash_attention;
  opt.trace = true;
  return simulate_iteration(scenario_iteration_input(s), opt);
}

// Per (simulated GPU, first six letters of the name): the durations of its pipeline transfers
// (all equal here: every microbatch's message is the same size).
std::map<std::pair<int, std::string>, TimePs> transfer_times(const IterationResult& r) {
  std::map<std::pair<int, std::string>, TimePs> out;
  for (const TraceSlice& s : r.trace.slices)
    if (s.category == "pp") out[{s.pid, s.name.substr(0, 6)}] = s.duration;
  return out;
}

std::pair<int, std::string> key(int gpu, const char* name) { return {gpu, name}; }

TEST(MtpStandalone, TheDepthsStageSendsTheirHiddenStatesToTheLossStage) {
  const hw::Scenario own = mtp_scenario("Et*8|t*8|t*16m|L");
  const hw::Scenario with = mtp_scenario("Et*8|t*8|t*16|mL");
  ASSERT_TRUE(own.parallel.mtp_standalone);
  ASSERT_FALSE(with.parallel.mtp_standalone);
  const IterationResult a = run(own), b = run(with);
  auto ta = transfer_times(a), tb = transfer_times(b);
  // One hidden state: every hop of the colocated split, and 1 -> 2 of the standalone one.
  const TimePs one = tb.at(key(2, "SEND_F"));
  ASSERT_GT(one, 0);
  EXPECT_EQ(tb.at(key(3, "SEND_B")), one);
  EXPECT_EQ(ta.at(key(1, "SEND_F")), one);
  EXPECT_EQ(ta.at(key(2, "SEND_B")), one);
  // Two (the main model's and the depth's) between the depths' stage and the loss's, both
  // ways: latency + 2 x bytes / bandwidth, so more than one message and less than two.
  const TimePs two = ta.at(key(2, "SEND_F"));
  EXPECT_EQ(ta.at(key(3, "SEND_B")), two);
  EXPECT_GT(two, one);
  EXPECT_LT(two, 2 * one);
  // Weights: untied, the two stages hold what the colocated last two hold (the depth's
  // embedding copy moves with it); the loss stage alone holds the final norm and the output
  // layer: 2 bytes x (h + V h / t) = 2 x (4096 + 128256 x 4096 / 2).
  ASSERT_EQ(a.memory.size(), 4u);
  EXPECT_DOUBLE_EQ(a.memory[2].weights + a.memory[3].weights,
                   b.memory[2].weights + b.memory[3].weights);
  EXPECT_DOUBLE_EQ(a.memory[3].weights, 2.0 * (4096 + 128256.0 * 4096 / 2));
  EXPECT_EQ(a.memory[0].weights, b.memory[0].weights);
  EXPECT_EQ(a.memory[1].weights, b.memory[1].weights);
}

}  // namespace
}  // namespace pw
