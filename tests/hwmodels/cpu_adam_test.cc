// Optimizer offload's host side: the CPU Adam rate comes from the profile (the hosts' memory
// bandwidth and the share of it Adam streams), not from a constant; a profile without it cannot
// price offload and says which key it lacks.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/optimizer.h"
#include "hwmodels/profile.h"

namespace pw::hw {
namespace {

std::string shipped_text(const std::string& name) {
  return read_file(shipped_profile_dir() + "/" + name + ".yaml");
}

// `text` without the lines containing `key`.
std::string without(const std::string& text, const std::string& key) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.find(key) == std::string::npos) out += line + "\n";
    at = end + 1;
  }
  return out;
}

// Adam streams 28 bytes a parameter (kAdamBytesPerParam) through host memory; a node's
// bandwidth x the streamed share, split between its GPUs. The hosts' figures by hand: DGX A100,
// 2 sockets x 8 DDR4-3200 channels x 25.6 GB/s = 409.6 GB/s; DGX H100, 2 x 8 DDR5-4800 channels
// x 38.4 GB/s = 614.4 GB/s; both profiles assume a 0.6 share.
TEST(CpuAdam, RateIsTheHostsMemoryBandwidthOverTheNodesGpus) {
  const HardwareProfile a100 = parse_profile(shipped_text("dgx-a100-80gb"), "dgx-a100-80gb.yaml");
  const HardwareProfile h100 = parse_profile(shipped_text("dgx-h100"), "dgx-h100.yaml");
  EXPECT_DOUBLE_EQ(a100.node.host_memory_bandwidth.value, 2 * 8 * 25.6e9);
  EXPECT_DOUBLE_EQ(h100.node.host_memory_bandwidth.value, 2 * 8 * 38.4e9);
  EXPECT_NEAR(cpu_adam_rate(a100), 409.6e9 * 0.6 / 8 / 28, 1.0);  // 1.097e9 parameters/s
  EXPECT_NEAR(cpu_adam_rate(h100), 614.4e9 * 0.6 / 8 / 28, 1.0);  // 1.646e9
  EXPECT_DOUBLE_EQ(require_cpu_adam_rate(h100, "x"), cpu_adam_rate(h100));
  // Every shipped profile prices offload.
  for (const std::string& name : shipped_profile_names())
    EXPECT_GT(cpu_adam_rate(parse_profile(shipped_text(name), name + ".yaml")), 0) << name;
}

// The split between GPU and host follows the rate: a slower host takes a smaller share of the
// update (the GPU share never falls), and its path at a forced share is (1 - x) x shard x
// (1 / rate + 4 bytes / PCIe).
TEST(CpuAdam, TheOffloadSplitFollowsTheHostsRate) {
  const HardwareProfile h100 = parse_profile(shipped_text("dgx-h100"), "dgx-h100.yaml");
  const double shard = 1e9, rate = cpu_adam_rate(h100);
  const OffloadSplit fast = offload_split(h100, shard, rate);
  const OffloadSplit slow = offload_split(h100, shard, rate / 4);
  EXPECT_GE(slow.gpu_share, fast.gpu_share);
  const OffloadSplit half = offload_split(h100, shard, rate, 0.5);
  EXPECT_NEAR(half.cpu_path, 0.5 * shard * (1 / rate + 4 / h100.node.pcie.effective().value),
              1e-12);
}

TEST(CpuAdam, AProfileWithoutTheHostsBandwidthRefusesOffloadNamingTheKey) {
  const std::string text = without(without(shipped_text("dgx-a100-80gb"), "host_memory_bandwidth"),
                                   "host_memory_efficiency");
  const HardwareProfile p = parse_profile(text, "mine.yaml");
  EXPECT_EQ(cpu_adam_rate(p), 0);
  try {
    require_cpu_adam_rate(p, "--offload on");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "node.host_memory_bandwidth_gb_per_s");
    EXPECT_NE(e.message().find("--offload on"), std::string::npos) << e.message();
  }
  // One of the two keys alone is an error naming the other.
  try {
    parse_profile(without(shipped_text("dgx-a100-80gb"), "host_memory_efficiency"), "mine.yaml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("host_memory_efficiency"), std::string::npos) << e.what();
  }
  try {
    std::string t = shipped_text("dgx-a100-80gb");
    t.replace(t.find("host_memory_efficiency: 0.6"), 27, "host_memory_efficiency: 1.5");
    parse_profile(t, "mine.yaml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(0, 1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pw::hw
