// One scenario reader (hwmodels/scenario.h) serves the planner as every other command, on any
// hwmodels profile, shipped or calibrated.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "hwmodels/profile.h"
#include "hwmodels/scenario.h"
#include "planner/search/search_space.h"

namespace pw {
namespace {

hw::Scenario plan_scenario(const std::string& text) {
  return hw::parse_scenario(text, "t.yaml", "", {}, hw::ParallelSection::kOptional);
}

TEST(PlanScenario, CalibratedProfileFileIsTheProblemsProfile) {
  const std::string path = std::string(PW_SOURCE_DIR) + "/calibration/profiles/cpu-epyc-2core.yaml";
  const hw::HardwareProfile prof = hw::load_profile(path);
  const hw::Scenario s =
      plan_scenario("model: {preset: megatron-1.7b}\ncluster: {profile: " + path + ", nodes: 1}\n");
  EXPECT_FALSE(s.has_parallel);
  EXPECT_EQ(s.parallel.global_batch_size, 1536);  // the documented default without a section
  EXPECT_EQ(s.cluster_profile, path);
  EXPECT_DOUBLE_EQ(s.profile.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)],
                   prof.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)]);
  EXPECT_DOUBLE_EQ(s.profile.gpu.gemm_max_efficiency, prof.gpu.gemm_max_efficiency);
  EXPECT_EQ(s.num_gpus(), prof.node.gpus_per_node);
}

TEST(PlanScenario, ShippedProfileWithReservedMemory) {
  const hw::Scenario s = plan_scenario(
      "model: {preset: megatron-1.7b}\ncluster: {profile: commodity-pcie-100gbe, nodes: 4}\n");
  const hw::HardwareProfile prof = hw::resolve_profile("commodity-pcie-100gbe", "", "", "");
  EXPECT_EQ(s.num_gpus(), 4 * prof.node.gpus_per_node);
  // 80 GB less the 2 GB the profile reserves for the CUDA context, NCCL and workspaces.
  EXPECT_DOUBLE_EQ(s.profile.gpu.usable_memory().value, 78e9);
}

TEST(PlanScenario, UnknownProfileNamesTheKey) {
  try {
    plan_scenario("model: {preset: megatron-1.7b}\ncluster: {profile: dgx-a10, nodes: 1}\n");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cluster.profile"), std::string::npos) << e.what();
  }
}

// A section with a key that names a configuration but no microbatch says which key made it one
// (a user who meant `fp8: hybrid` for the search); the batch and shared settings alone leave the
// configuration to the search.
TEST(PlanScenario, AConfigurationWithoutItsMicrobatchNamesTheKeyThatMadeIt) {
  const std::string head =
      "model: {preset: megatron-1.7b}\ncluster: {profile: dgx-a100-80gb, nodes: 1}\n";
  try {
    plan_scenario(head +
                  "parallel: {global_batch_size: 64, overlap_grad_reduce: true, fp8: hybrid}\n");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("parallel.micro_batch_size: missing"), std::string::npos) << w;
    EXPECT_NE(w.find("'fp8' makes this section a configuration"), std::string::npos) << w;
  }
  EXPECT_FALSE(
      plan_scenario(head + "parallel: {global_batch_size: 64, overlap_grad_reduce: true}\n")
          .has_parallel);
}

// The keys that used to pass one reader and fail the other (model.use_flash_attn,
// parallel.data_parallel_size, model.name) are read by the one reader in both modes.
TEST(PlanScenario, KeysOnceSplitBetweenTwoReadersAreReadEverywhere) {
  const std::string text =
      "model: {preset: megatron-1.7b, name: my-model, use_flash_attn: true}\n"
      "cluster: {profile: dgx-a100-80gb, nodes: 4}\n"
      "parallel: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2,\n"
      "           data_parallel_size: 8, micro_batch_size: 1, global_batch_size: 64}\n"
      "published: {iteration_time_s: 1.5, source: test}\n";
  for (hw::ParallelSection mode :
       {hw::ParallelSection::kRequired, hw::ParallelSection::kOptional}) {
    const hw::Scenario s = hw::parse_scenario(text, "t.yaml", "", {}, mode);
    EXPECT_TRUE(s.has_parallel);
    EXPECT_EQ(s.model.name, "my-model");
    EXPECT_TRUE(s.flash_attention);
    EXPECT_EQ(s.parallel.data_parallel, 8);
    ASSERT_TRUE(s.published.has_value());
    EXPECT_DOUBLE_EQ(s.published->iteration_time_s, 1.5);
  }
  // Without a parallel section only the searching commands accept the file.
  const std::string bare =
      "model: {preset: megatron-1.7b}\ncluster: {profile: dgx-a100-80gb, nodes: 1}\n";
  EXPECT_THROW(hw::parse_scenario(bare, "t.yaml", ""), ConfigError);
  EXPECT_NO_THROW(plan_scenario(bare));
}

// Every bundled scenario is read by the one reader as every command reads it, and a key given
// twice is refused rather than read once.
TEST(PlanScenario, EveryBundledScenarioLoadsAndDuplicateKeysAreRefused) {
  int files = 0, plan_only = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(PW_SOURCE_DIR) + "/scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    hw::Scenario s;
    EXPECT_NO_THROW(s = hw::load_scenario(e.path().string(), {}, hw::ParallelSection::kOptional))
        << e.path();
    // A scenario for the planner's grid search names no configuration (the 98.5B
    // controllable-memory family): the configuration-taking commands refuse it by key.
    if (s.has_parallel) {
      EXPECT_NO_THROW(hw::load_scenario(e.path().string())) << e.path();
    } else {
      ++plan_only;
      EXPECT_THROW(hw::load_scenario(e.path().string()), ConfigError) << e.path();
    }
  }
  EXPECT_GE(files, 23);  // 10 weak-scaling + 8 Korthikanti + GPT-3 + 4 zero-bubble + ...
  EXPECT_EQ(plan_only, 2);
  try {
    plan_scenario(
        "model: {preset: megatron-1.7b}\ncluster: {profile: dgx-a100-80gb, nodes: 4}\n"
        "parallel: {global_batch_size: 512, global_batch_size: 256}\n");
    ADD_FAILURE() << "duplicate key accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("global_batch_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pw
