// The planner plans on any hwmodels profile, shipped or calibrated, not only its presets.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "hwmodels/profile.h"
#include "planner/search_scenario.h"
#include "planner/search_space.h"

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

// The GPU presets now take their datasheet figures from the shipped hwmodels profiles; these are
// the values the presets held as literals before (DGX A100 80GB: 312 TFLOP/s BF16, 80 GB at
// 2.039 TB/s, NVLink 300 GB/s, 8 x 200 Gb/s HDR = 25 GB/s per GPU, PCIe 4 x16 32 GB/s; DGX
// H100: 989 TFLOP/s, 3.35 TB/s, 450 GB/s NVLink, 400 Gb/s NDR = 50 GB/s, PCIe 5 64 GB/s;
// H200: 141 GB at 4.8 TB/s), so every planner result is unchanged.
TEST(PlanProfile, GpuPresetsFromHwmodelsProfilesKeepThePreviousFigures) {
  struct Old {
    const char* name;
    double peak, mem, hbm, intra, intra_ar, inter, pcie;
  };
  const Old olds[] = {{"dgx-a100-80gb", 312e12, 80e9, 2.039e12, 300e9, 230e9, 25e9, 32e9},
                      {"dgx-h100", 989e12, 80e9, 3.35e12, 450e9, 370e9, 50e9, 64e9},
                      {"dgx-h200", 989e12, 141e9, 4.8e12, 450e9, 370e9, 50e9, 64e9}};
  for (const Old& o : olds) {
    GpuNodeSpec g;
    ASSERT_TRUE(gpu_node_preset(o.name, &g)) << o.name;
    EXPECT_EQ(g.name, o.name);
    EXPECT_DOUBLE_EQ(g.peak_flops, o.peak) << o.name;
    EXPECT_DOUBLE_EQ(g.memory_bytes, o.mem) << o.name;
    EXPECT_DOUBLE_EQ(g.hbm_bw, o.hbm) << o.name;
    EXPECT_DOUBLE_EQ(g.intra_bw, o.intra) << o.name;
    EXPECT_DOUBLE_EQ(g.intra_allreduce_bw, o.intra_ar) << o.name;
    EXPECT_DOUBLE_EQ(g.inter_bw, o.inter) << o.name;
    EXPECT_DOUBLE_EQ(g.pcie_bw, o.pcie) << o.name;
    EXPECT_DOUBLE_EQ(g.gemm_efficiency, 0.73);
    EXPECT_DOUBLE_EQ(g.hbm_efficiency, 0.8);
    EXPECT_DOUBLE_EQ(g.inter_efficiency, 0.9);
    EXPECT_DOUBLE_EQ(g.intra_latency, 3e-6);
    EXPECT_DOUBLE_EQ(g.inter_latency, 8e-6);
    EXPECT_DOUBLE_EQ(g.kernel_latency, 4e-6);
    EXPECT_DOUBLE_EQ(g.reserved_bytes, 2e9);
    EXPECT_DOUBLE_EQ(g.cpu_adam_params_per_s, 1.5e9);
    EXPECT_EQ(g.gpus_per_node, 8);
  }
}

// Every bundled scenario is a valid `pipewright plan` input (the planner reads the same scenario
// format as the simulator, including Megatron's uneven-split keys), and a key given twice is
// refused rather than read once.
TEST(PlanScenarioFile, EveryBundledScenarioLoadsAndDuplicateKeysAreRefused) {
  int files = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(PW_SOURCE_DIR) + "/scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    EXPECT_NO_THROW(load_plan_scenario(e.path().string())) << e.path();
  }
  EXPECT_GE(files, 23);  // 10 weak-scaling + 8 Korthikanti + GPT-3 + 4 zero-bubble
  try {
    parse_plan_scenario(
        "model: {preset: megatron-1.7b}\ncluster: {profile: dgx-a100-80gb, nodes: 4}\n"
        "parallel: {global_batch_size: 512, global_batch_size: 256}\n",
        "s.yaml");
    ADD_FAILURE() << "duplicate key accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.global_batch_size: given twice"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pw
