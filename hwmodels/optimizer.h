#pragma once
/// The optimizer step of mixed-precision Adam on one GPU: its HBM traffic, and with optimizer
/// offload (Deep Optimizer States) the split of the update between the GPU and the host CPU. The
/// simulator builds its optimizer tasks from these figures and the planner's tiers price the
/// step with them: one definition of each constant.
#include <string>

#include "core/units.h"
#include "hwmodels/gpu_model.h"

namespace pw::hw {

struct HardwareProfile;

/// Adam with bf16 weights and fp32 master/momentum/variance reads master, m, v and the gradient
/// and writes master, m, v and the bf16 weight: 28 bytes of HBM traffic per parameter.
inline constexpr double kAdamBytesPerParam = 28.0;
/// Optimizer state moved per parameter when an offloaded update runs on the GPU (fp32 master,
/// m, v).
inline constexpr double kOffloadStateBytesPerParam = 12.0;
/// Host CPU Adam throughput per GPU, parameters per second: an offloaded update streams the
/// same kAdamBytesPerParam through host memory as the GPU's through HBM, at the profile's
/// node.host_memory_bandwidth_gb_per_s x node.host_memory_efficiency shared by the node's GPUs.
/// 0 when the profile gives no host memory bandwidth.
double cpu_adam_rate(const HardwareProfile& profile);
/// The same, or a ConfigError naming the profile's key when it gives none (`what`: the option
/// that needs it, for the message).
double require_cpu_adam_rate(const HardwareProfile& profile, const std::string& what);

/// Time of the update of `params` parameters on the GPU (streaming HBM kernels).
TimePs adam_step_time(const GpuModel& gpu, double params);

/// An offloaded update of `shard` parameters: the share of it run on the GPU, and the two paths
/// after the gradient reduction (seconds): GPU update + state transfer, CPU update + gradient and
/// parameter copies. The step takes at least the longer of the two.
struct OffloadSplit {
  double gpu_share = 0;
  double gpu_path = 0;
  double cpu_path = 0;
  double seconds() const { return gpu_path > cpu_path ? gpu_path : cpu_path; }
};
/// The GPU share in steps of 1/20 that minimises the longer path (`gpu_share` >= 0 forces it).
OffloadSplit offload_split(const HardwareProfile& profile, double shard, double cpu_params_per_sec,
                           double gpu_share = -1);

}  // namespace pw::hw
