#pragma once
/// The host CPU's Adam throughput, the rate an offloaded optimizer update runs at on the host
/// (hw::cpu_adam_rate), measured on this machine: `pipewright calibrate --host-adam --base
/// PROFILE --out FILE` writes it into a copy of the base profile.
#include <cstddef>
#include <string>

namespace pw::calibration {

struct HostAdamResult {
  double params_per_s = 0;  ///< the whole host: every thread updating its share
  int threads = 0;
  std::size_t params = 0;   ///< parameters updated per step
  double best_seconds = 0;  ///< the fastest of the timed steps
};

/// Times mixed-precision Adam steps over `params` parameters (fp32 master weight, moments and
/// step, bf16 gradient in and bf16 weight out: hw::kAdamBytesPerParam bytes of memory traffic a
/// parameter), split over `threads` threads (0: every hardware thread), best of `reps` after one
/// untimed step.
HostAdamResult measure_host_adam(std::size_t params, int reps, int threads = 0);

/// `base_text` (a hardware profile, read from `base_file`) with the measured rate as its node's
/// host_memory_bandwidth_gb_per_s (the bytes a second Adam moved) and host_memory_efficiency 1,
/// so that hw::cpu_adam_rate gives the measured rate shared by the node's GPUs; named `name`.
std::string host_adam_profile_yaml(const HostAdamResult& r, const std::string& base_text,
                                   const std::string& base_file, const std::string& name);

/// One line per figure, for the terminal.
std::string host_adam_report(const HostAdamResult& r, int gpus_per_node);

}  // namespace pw::calibration
