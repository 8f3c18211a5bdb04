#pragma once
/// Hardware profiles: one YAML file per cluster type (GPU, node, fabric), shipped under
/// hwmodels/profiles/ or written by calibration. See docs/hwmodels.md for the format.
#include <optional>
#include <string>
#include <vector>

#include "hwmodels/collectives.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/link.h"

namespace pw::hw {

/// One NCCL protocol as the collective model sees it (Simple, LL128, LL): latency added to every
/// algorithm step and the share of the step's bandwidth it reaches. The model takes, for every
/// collective and size, the fastest (algorithm, protocol) pair, as NCCL's tuner does.
struct CollectiveProtocol {
  std::string name;
  TimePs step_latency = 0;
  double bandwidth_efficiency = 1.0;
};
inline constexpr int kMaxCollectiveProtocols = 3;

/// One `collectives.size_corrections` entry: a collective's measured / modelled time by size,
/// for groups on one node or across nodes (written by `calibrate --from-nccl-tests`).
struct CollectiveSizeCorrection {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  bool multi_node = false;
  SizeCorrection table;
  std::string source;        ///< the log it was fitted to
  int ranks = 0, nodes = 0;  ///< that log's group (0: not recorded)
};

/// A loaded, validated hardware profile.
struct HardwareProfile {
  std::string name;
  std::string description;
  std::string file;  ///< where it was loaded from ("" if built in code)
  GpuSpec gpu;
  NodeSpec node;
  FabricSpec fabric;
  /// Fixed software cost of one step of a collective algorithm (NCCL kernel/proxy overhead), ps.
  TimePs collective_step_latency = 2'000'000;
  /// `collectives.protocols` (at most kMaxCollectiveProtocols; written by `calibrate
  /// --from-nccl-tests`). Empty: one protocol with no added latency at full bandwidth.
  std::vector<CollectiveProtocol> collective_protocols;
  /// `collectives.size_corrections`: at most one per (kind, scope); empty = the model alone.
  std::vector<CollectiveSizeCorrection> collective_size_corrections;
  /// `gpu.compute_dtype`: the one element type this device computes in, whatever the workload
  /// asks for (the executor's CPU backend runs everything in fp64). The file gives only that
  /// dtype's peak and measured GEMMs; on load they answer for every dtype (gpu.peak_flops and
  /// gpu.measured are filled for all of them). Empty for GPUs, whose dtypes differ.
  std::optional<DType> compute_dtype;
  /// `calibration_probe.forward_ms` (CPU profiles since 2026-11-30): the executor's probe
  /// (executor/probe.h) on the core calibration ran on, ms; 0 = not recorded.
  double calibration_probe_ms = 0;
};

/// Parses profile YAML text; errors name `file` and the key path.
HardwareProfile parse_profile(const std::string& text, const std::string& file);
/// Reads and parses a profile file.
HardwareProfile load_profile(const std::string& path);
/// Directory of the shipped profiles: env PIPEWRIGHT_PROFILE_DIR, else the source tree's
/// hwmodels/profiles while it exists, else share/pipewright/profiles beside the running binary's
/// prefix, else the configured install's.
std::string shipped_profile_dir();
/// Directory of the bundled scenarios, found the same way: env PIPEWRIGHT_SCENARIO_DIR, else the
/// source tree's scenarios/ while it exists, else share/pipewright/scenarios beside the binary's
/// prefix, else the configured install's.
std::string shipped_scenario_dir();
/// Names of the shipped profiles (file stems), sorted.
std::vector<std::string> shipped_profile_names();
/// Loads `name_or_path`: a shipped profile name (e.g. "dgx-a100-80gb"), or a path to a YAML file
/// (absolute, or relative to `base_dir`). Unknown names throw ConfigError(err_file, err_key, ...)
/// suggesting the nearest shipped name.
HardwareProfile resolve_profile(const std::string& name_or_path, const std::string& base_dir,
                                const std::string& err_file, const std::string& err_key);

}  // namespace pw::hw
