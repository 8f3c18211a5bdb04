#pragma once
/// Writes a fitted calibration as a hardware profile YAML in hwmodels' format (what
/// hw::load_profile reads; see docs/hwmodels.md), with the provenance in `source` fields.
///
/// CPU backend: the whole profile comes from measurement. One executor rank is one "GPU" with one
/// compute unit (no wave quantisation: a single 1x1 tile); the fp64 Eigen GEMM fit gives the peak
/// (the fitted asymptote, max_efficiency 1) written under every dtype, since the executor's CPU
/// backend computes in float64 whatever dtype the workload model asks for; the copy kernel gives
/// the streaming (HBM) bandwidth and the executor's layer passes the element-wise throughput
/// (gpu.elementwise_gb_per_s), far apart on a CPU; MPI ping-pong gives
/// the intra-node link (latency = one-way alpha / 2: a GPU-switch-GPU route has two hops) and the
/// all-reduce alpha the collective step latency.
///
/// CUDA backend: a base profile (shipped or given) supplies the node and fabric; calibration
/// replaces the GPU section (peaks from the device, fitted GEMM and HBM efficiency, kernel
/// latency, measured GEMM table; element-wise throughput only when the raw data has executor layer
/// passes or layer_mix) and, where measured, the intra-node link efficiency and
/// latency, the PCIe efficiency and the collective step latency.
#include <string>
#include <vector>

#include "calibration/fit.h"

namespace pw::calibration {

struct ProfileOptions {
  std::string name;        ///< profile name written into the file
  std::string raw_source;  ///< where the raw data came from (file name), for `source` fields
  /// Base profile YAML text and its file name (required for the CUDA backend, unused for CPU).
  std::string base_text;
  std::string base_file;
  /// Bytes the workload model counts for the streaming work the profile's HBM figure times (the
  /// optimizer step, copies), over the bytes the measured copy kernel moved for the same work;
  /// the written hbm_bandwidth_gb_per_s is the measured streaming bandwidth times it. CPU: Adam's
  /// state is fp32 in the model (28 bytes per parameter) and float64 in the executor (56), so
  /// 0.5. Unused when the fit already counts model bytes (FitResult::memory_in_model_bytes: the
  /// executor's Adam step measured, newer raw files).
  double memory_bytes_ratio = 1.0;
  /// The same for the element-wise throughput (gpu.elementwise_gb_per_s), when fitted. CPU: 1,
  /// the fit to the executor's layer passes already counts model bytes.
  double elementwise_bytes_ratio = 1.0;
  /// The same for messages (CPU: the model sends 2-byte activations, the CPU executor sends
  /// 8-byte doubles: 0.25); link and collective bandwidths are scaled by it.
  double link_bytes_ratio = 1.0;
  /// CPU: executor ranks (one core each) per host that the profile describes as its "GPUs" per
  /// node; 0 = the number of cores of this machine (at least 2).
  int ranks_per_node = 0;
};

/// Renders the profile YAML. Deterministic for the same inputs. Throws ConfigError when the
/// base profile is missing or malformed, or the fit lacks what the backend needs (CPU: an
/// mpi_p2p series).
std::string profile_yaml(const FitResult& fit, const ProfileOptions& options);

/// The rows of the measured GEMM table for `fit` (hwmodels gemm_measured: m, n, k, tflops),
/// with the throughput adjusted so that hw::GpuModel::gemm_time reproduces each measured time
/// exactly (the table is applied on top of the fitted formula and its kernel latency).
struct TableRow {
  long long m, n, k;
  double tflops;
};
std::vector<TableRow> measured_table(const GemmFit& fit, const std::vector<GemmSample>& samples);

}  // namespace pw::calibration
