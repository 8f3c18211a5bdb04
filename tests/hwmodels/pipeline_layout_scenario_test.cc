// A scenario's parallel.pipeline_model_parallel_layout (Megatron's --pipeline-model-parallel-
// layout): the split and the chunks per device it names, and the layouts refused (each naming
// the key in one line).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hwmodels/estimate.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/scenario.h"
#include "hwmodels/transformer.h"
#include "test_util.h"

namespace pw::hw {
namespace {

using testing::expect_scenario_error;
using testing::scenario;

// Megatron 1.7B: 24 layers, learned positions; on one DGX H100 (8 GPUs), p = 4, d = 2.
const char* kModel = "{preset: megatron-1.7b}";
std::string parallel(const std::string& extra) {
  return "{pipeline_model_parallel_size: 4, micro_batch_size: 1, global_batch_size: 16, " + extra +
         "}";
}

// "Et*3|(t*7|)*2,t*7L" is 3/7/7/7, the split decoder_first_pipeline_num_layers: 3 gives (24 - 3 =
// 21 over the other three stages); one chunk per device, 1F1B. The ends may hold no transformer
// layer: "E|(t*8|)*2,t*8L" is 0/8/8/8.
TEST(PipelineLayoutScenario, AFirstStageOfItsOwnSizeIsTheDecoderFirstSplit) {
  const Scenario a =
      scenario(kModel, parallel("pipeline_model_parallel_layout: \"Et*3|(t*7|)*2,t*7L\""));
  const Scenario b = scenario(kModel, parallel("decoder_first_pipeline_num_layers: 3"));
  EXPECT_EQ(a.stage_layers(), (std::vector<int>{3, 7, 7, 7}));
  EXPECT_EQ(a.stage_layers(), b.stage_layers());
  EXPECT_TRUE(a.uneven_split());
  EXPECT_EQ(a.parallel.virtual_stages, 1);
  EXPECT_EQ(a.parallel.schedule, "1f1b");
  EXPECT_EQ(scenario(kModel, parallel("pipeline_model_parallel_layout: \"E|(t*8|)*2,t*8L\""))
                .stage_layers(),
            (std::vector<int>{0, 8, 8, 8}));
}

// Eight stages over p = 4 are two chunks per device, Megatron's interleaved schedule: 2, six of
// 3, 4 (24 layers). Eight equal stages of 3 are the even interleaved split (no uneven split).
TEST(PipelineLayoutScenario, StagesBeyondTheDevicesAreInterleavedChunks) {
  const Scenario a =
      scenario(kModel, parallel("pipeline_model_parallel_layout: \"Et*2|(t*3|)*6,t*4L\""));
  EXPECT_EQ(a.parallel.virtual_stages, 2);
  EXPECT_EQ(a.parallel.schedule, "interleaved");
  EXPECT_EQ(a.stage_layers(), (std::vector<int>{2, 3, 3, 3, 3, 3, 3, 4}));
  const Scenario even =
      scenario(kModel, parallel("pipeline_model_parallel_layout: \"Et*3|(t*3|)*6,t*3L\""));
  EXPECT_EQ(even.parallel.virtual_stages, 2);
  EXPECT_FALSE(even.uneven_split());
  EXPECT_EQ(even.stage_layers(), (std::vector<int>{6, 6, 6, 6}));
}

// `estimate` counts each end GPU's chunks of the layout: with 2, six of 3, 4 over p = 4, GPU 0
// holds stages 0 and 4 (2 + 3 layers, the embedding V h and positions s h), GPU 3 stages 3 and 7
// (3 + 4 layers, the final LayerNorm 2h and the tied output copy V h). Megatron 1.7B: h = 2304,
// s = 2048, V = 51200, a layer 12h^2 + 13h = 63,730,944 parameters.
TEST(PipelineLayoutScenario, EstimateCountsEachEndGpusChunks) {
  const Scenario a =
      scenario(kModel, parallel("pipeline_model_parallel_layout: \"Et*2|(t*3|)*6,t*4L\""));
  const double h = 2304, layer = 12 * h * h + 13 * h;
  ASSERT_DOUBLE_EQ(layer, 63730944.0);
  const Estimate e = make_estimate(a, {}, {});
  EXPECT_DOUBLE_EQ(e.first.params, 5 * layer + 51200 * h + 2048 * h);
  EXPECT_DOUBLE_EQ(e.last.params, 7 * layer + 2 * h + 51200 * h);
}

// ... and prices the chunks the layout has: the first of 2 layers with the embedding, the last
// of 4 (layers 20-23) with the head, the largest middle one (3 layers, the first such: 2-4).
TEST(PipelineLayoutScenario, EstimatePricesTheLayoutsOwnChunks) {
  const Scenario a =
      scenario(kModel, parallel("pipeline_model_parallel_layout: \"Et*2|(t*3|)*6,t*4L\""));
  const Estimate e = make_estimate(a, {}, {});
  const GpuModel gpu(a.profile.gpu);
  const WorkloadOptions o = workload_options(a.parallel, a.flash_attention);
  EXPECT_EQ(e.first_costs.f, stage_costs(a.model, gpu, o, 0, 2, true, false).f);
  EXPECT_EQ(e.last_costs.f, stage_costs(a.model, gpu, o, 20, 24, false, true).f);
  EXPECT_EQ(e.middle_costs.f, stage_costs(a.model, gpu, o, 2, 5, false, false).f);
  EXPECT_LT(e.first_costs.f, stage_costs(a.model, gpu, o, 0, 3, true, false).f);
}

// Llama 3 8B (32 layers, RoPE) with one multi-token prediction layer: the m goes with L on the
// last stage, as Megatron places it without a layout, or on a stage of its own right before.
TEST(PipelineLayoutScenario, MultiTokenPredictionLayersGoWithTheLoss) {
  const Scenario a = scenario("{preset: llama3-8b, mtp_num_layers: 1}",
                              parallel("pipeline_model_parallel_layout: \"Et*7|(t*8|)*2,t*9mL\""));
  EXPECT_EQ(a.stage_layers(), (std::vector<int>{7, 8, 8, 9}));
  // The last stage may hold the depth and the loss alone (0 transformer layers).
  const Scenario b = scenario("{preset: llama3-8b, mtp_num_layers: 1}",
                              parallel("pipeline_model_parallel_layout: \"Et*8|t*8|t*16|mL\""));
  EXPECT_EQ(b.stage_layers(), (std::vector<int>{8, 8, 16, 0}));
  // A middle stage may hold nothing (Megatron's transformer block of no layers passes its
  // input on).
  const Scenario c = scenario("{preset: llama3-8b, mtp_num_layers: 1}",
                              parallel("pipeline_model_parallel_layout: \"Et*16||t*16|mL\""));
  EXPECT_EQ(c.stage_layers(), (std::vector<int>{16, 0, 16, 0}));
  EXPECT_FALSE(a.parallel.mtp_standalone || b.parallel.mtp_standalone || c.parallel.mtp_standalone);
  const std::string key = "parallel.pipeline_model_parallel_layout";
  // A stage of their own right before the loss's (Megatron's mtp_standalone, "m|L"; after
  // transformer layers too, "t*16m|L"), which is then the last chunk of its rank.
  for (const char* own : {"\"Et*16|t*16|m|L\"", "\"Et*8|t*8|t*16m|L\""}) {
    const Scenario d = scenario("{preset: llama3-8b, mtp_num_layers: 1}",
                                parallel(std::string("pipeline_model_parallel_layout: ") + own));
    EXPECT_TRUE(d.parallel.mtp_standalone) << own;
    EXPECT_EQ(d.stage_layers().back(), 0) << own;
  }
  // Anywhere else, or a transformer layer after the depths (Megatron's rule), is refused.
  expect_scenario_error("{preset: llama3-8b, mtp_num_layers: 1}",
                        parallel("pipeline_model_parallel_layout: \"Et*8|t*8|t*8m|t*8L\""), key);
  expect_scenario_error("{preset: llama3-8b, mtp_num_layers: 1}",
                        parallel("pipeline_model_parallel_layout: \"Et*16|t*16m||L\""), key);
  // Over one device the stage before the loss's is not its rank's last chunk.
  expect_scenario_error("{preset: llama3-8b, mtp_num_layers: 1}",
                        "{pipeline_model_parallel_size: 1, micro_batch_size: 1, "
                        "global_batch_size: 16, pipeline_model_parallel_layout: "
                        "\"Et*32|m|L\"}",
                        key);
  // One m too many, or none for the model's one.
  expect_scenario_error("{preset: llama3-8b, mtp_num_layers: 1}",
                        parallel("pipeline_model_parallel_layout: \"Et*8|t*8|t*8|t*8mmL\""), key);
  expect_scenario_error("{preset: llama3-8b, mtp_num_layers: 1}",
                        parallel("pipeline_model_parallel_layout: \"Et*8|t*8|t*8|t*8L\""), key);
}

TEST(PipelineLayoutScenario, RefusesLayoutsTheModelOrMegatronCannotRun) {
  const std::string key = "parallel.pipeline_model_parallel_layout";
  for (const char* bad : {
           "\"Et*3|(t*7|)*2,t*6L\"",    // 23 layers of 24
           "\"Et*3|(t*7|)*2,t*6|tL\"",  // 5 stages over p = 4
           "\"t*3|E(t*7|)*2,t*7L\"",    // E not first
           "\"Et*3|(t*7|)*2,Lt*7\"",    // L not last
           "\"Et*3|(t*7|)*2,t*7||L\"",  // 6 stages over p = 4
           "\"Et*3|(t*7|)*2,t*7Lx\"",   // not a layer letter
           "\"\"",                      // empty
           "\"|||\"",                   // stages without a letter
       })
    expect_scenario_error(kModel, parallel(std::string("pipeline_model_parallel_layout: ") + bad),
                          key);
  // Megatron takes one of the layout, the first/last stage sizes and the layers per chunk.
  expect_scenario_error(kModel,
                        parallel("pipeline_model_parallel_layout: \"Et*3|(t*7|)*2,t*7L\", "
                                 "decoder_first_pipeline_num_layers: 3"),
                        key);
  expect_scenario_error(kModel,
                        parallel("pipeline_model_parallel_layout: \"Et*3|(t*7|)*2,t*7L\", "
                                 "num_layers_per_virtual_pipeline_stage: 3"),
                        key);
}

}  // namespace
}  // namespace pw::hw
