#include "hwmodels/optimizer.h"

#include <algorithm>

#include "hwmodels/profile.h"

namespace pw::hw {

TimePs adam_step_time(const GpuModel& gpu, double params) {
  return gpu.memory_bound_time(Bytes{params * kAdamBytesPerParam});
}

OffloadSplit offload_split(const HardwareProfile& profile, double shard, double cpu_params_per_sec,
                           double gpu_share) {
  const double hbm = profile.gpu.hbm_bandwidth.value * profile.gpu.hbm_efficiency;
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
