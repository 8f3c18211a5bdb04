// The host's Adam throughput (optimizer offload's CPU side): measured on this machine and written
// into a copy of a base profile so that hw::cpu_adam_rate gives it back per GPU.
#include "calibration/host_adam.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/optimizer.h"
#include "hwmodels/profile.h"

namespace pw::calibration {
namespace {

TEST(HostAdam, MeasuresARateOverTheGivenThreads) {
  const HostAdamResult r = measure_host_adam(1 << 16, 2, 2);
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.params, std::size_t{1} << 16);
  EXPECT_GT(r.best_seconds, 0);
  EXPECT_DOUBLE_EQ(r.params_per_s, static_cast<double>(r.params) / r.best_seconds);
}

// 8e9 parameters/s on the host of an 8-GPU node: 8e9 x 28 bytes = 224 GB/s written as the host
// memory bandwidth with efficiency 1, so each GPU's share is 8e9 / 8 = 1e9 parameters/s; the rest
// of the base profile is kept.
TEST(HostAdam, TheProfileGivesTheMeasuredRateToEachGpuOfTheNode) {
  HostAdamResult r;
  r.params_per_s = 8e9;
  r.threads = 112;
  r.params = 1 << 26;
  r.best_seconds = r.params / r.params_per_s;
  const std::string base_file = hw::shipped_profile_dir() + "/dgx-h100.yaml";
  const hw::HardwareProfile base = hw::load_profile(base_file);
  const hw::HardwareProfile p = hw::parse_profile(
      host_adam_profile_yaml(r, read_file(base_file), base_file, "h100-host"), "h100-host.yaml");
  EXPECT_EQ(p.name, "h100-host");
  EXPECT_DOUBLE_EQ(p.node.host_memory_bandwidth.value, 224e9);
  EXPECT_DOUBLE_EQ(p.node.host_memory_efficiency, 1.0);
  EXPECT_NEAR(hw::cpu_adam_rate(p), 1e9, 1.0);
  EXPECT_EQ(p.node.gpus_per_node, base.node.gpus_per_node);
  EXPECT_EQ(p.node.nics_per_node, base.node.nics_per_node);
  EXPECT_EQ(p.gpu.peak_flops, base.gpu.peak_flops);
  EXPECT_THROW(host_adam_profile_yaml(r, "name: x\n", "bad.yaml", "n"), ConfigError);
}

}  // namespace
}  // namespace pw::calibration
