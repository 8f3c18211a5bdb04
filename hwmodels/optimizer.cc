#include "hwmodels/optimizer.h"

#include <algorithm>

#include "core/error.h"
#include "hwmodels/profile.h"

namespace pw::hw {

double cpu_adam_rate(const HardwareProfile& profile) {
  const NodeSpec& n = profile.node;
  return n.host_memory_bandwidth.value * n.host_memory_efficiency / n.gpus_per_node /
         kAdamBytesPerParam;
}

double require_cpu_adam_rate(const HardwareProfile& profile, const std::string& what) {
  const double rate = cpu_adam_rate(profile);
  if (rate <= 0)
    throw ConfigError(profile.file, "node.host_memory_bandwidth_gb_per_s",
                      what + " runs Adam on the host CPU: the profile '" + profile.name +
                          "' needs the host's memory bandwidth (and node.host_memory_efficiency)");
  return rate;
}

TimePs adam_step_time(const GpuModel& gpu, double params) {
  return gpu.memory_bound_time(Bytes{params * kAdamBytesPerParam});
}

OffloadSplit offload_split(const HardwareProfile& profile, double shard, double cpu_params_per_sec,
                           double gpu_share) {
  const double hbm = profile.gpu.streaming_rate();
  const double pcie = profile.node.pcie.effective().value;
  auto split = [&](double x) {
    OffloadSplit s;
    s.gpu_share = x;
    s.gpu_path = x * shard * (kAdamBytesPerParam / hbm + kOffloadStateBytesPerParam / pcie);
    s.cpu_path = (1 - x) * shard * (1.0 / cpu_params_per_sec + 4.0 / pcie);
    return s;
  };
  if (gpu_share >= 0) return split(gpu_share);
  OffloadSplit best = split(0);
  for (int k = 1; k <= 20; ++k) {
    const OffloadSplit s = split(k / 20.0);
    if (s.seconds() < best.seconds()) best = s;
  }
  return best;
}

}  // namespace pw::hw
