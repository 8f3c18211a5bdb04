// The planner plans on any hwmodels profile, shipped or calibrated, not only its presets.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "hwmodels/profile.h"
#include "planner/search_scenario.h"

namespace pw {
namespace {

TEST(PlanProfile, CalibratedProfileFileIsConvertedFieldForField) {
  const std::string path = std::string(PW_SOURCE_DIR) + "/calibration/profiles/cpu-epyc-2core.yaml";
  const hw::HardwareProfile prof = hw::load_profile(path);
  const PlanScenario s = parse_plan_scenario(
      "model: {preset: megatron-1.7b}\ncluster: {profile: " + path + ", nodes: 1}\n", "t.yaml");
  EXPECT_DOUBLE_EQ(s.gpu.peak_flops, prof.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)]);
  EXPECT_DOUBLE_EQ(s.gpu.memory_bytes, prof.gpu.hbm_capacity.value);
  EXPECT_DOUBLE_EQ(s.gpu.gemm_efficiency, prof.gpu.gemm_max_efficiency);
  EXPECT_DOUBLE_EQ(s.gpu.intra_allreduce_bw, prof.node.intra.effective().value);
  EXPECT_EQ(s.num_gpus(), prof.node.gpus_per_node);
}

TEST(PlanProfile, ShippedHwmodelsProfileWithoutAPlannerPresetIsAccepted) {
  const PlanScenario s = parse_plan_scenario(
      "model: {preset: megatron-1.7b}\ncluster: {profile: commodity-pcie-100gbe, nodes: 4}\n",
      "t.yaml");
  const hw::HardwareProfile prof = hw::resolve_profile("commodity-pcie-100gbe", "", "", "");
  EXPECT_EQ(s.num_gpus(), 4 * prof.node.gpus_per_node);
  EXPECT_DOUBLE_EQ(s.gpu.memory_bytes, prof.gpu.hbm_capacity.value);
}

TEST(PlanProfile, UnknownProfileNamesTheKey) {
  try {
    parse_plan_scenario("model: {preset: megatron-1.7b}\ncluster: {profile: dgx-a10, nodes: 1}\n",
                        "t.yaml");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cluster.profile"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pw
