#pragma once
/// The planner's view of a scenario file (shared/DESIGN.md format): model, cluster, an optional
/// published configuration to compare against, and the global batch. A stop-gap reader until
/// the hardware-model scenario loader is used; only this file and main() see YAML.
#include <optional>
#include <string>

#include "core/plan.h"
#include "planner/search_space.h"

namespace pw {

struct PlanScenario {
  std::string file;  ///< "" for the built-in default
  ModelShape model;
  std::string cluster;  ///< profile name
  GpuNodeSpec gpu;
  /// The hwmodels profile of `cluster` (the DES tier simulates on it); empty when the name is a
  /// planner preset with no shipped profile of that name.
  std::optional<hw::HardwareProfile> profile;
  int nodes = 1;
  int num_gpus() const { return nodes * gpu.gpus_per_node; }
  bool has_parallel = false;  ///< a `parallel:` section was given (the published configuration)
  ParallelConfig parallel;    ///< global_batch_size always set (default 1536 or the section's)
  double published_tflops = 0;
  std::string published_source;
  /// Megatron's decoder_first/last_pipeline_num_layers (0 = even split). The planner's own uneven
  /// splits trim both end stages equally, so such a published configuration is reported as not
  /// comparable rather than scored with another split.
  int first_stage_layers = 0, last_stage_layers = 0;
};

/// GPT-3 175B on 128 DGX A100 80GB nodes with Megatron's published configuration (t8 p8,
/// interleaved, B = 1536, 138 TFLOP/s per GPU; Narayanan et al. SC21).
PlanScenario default_plan_scenario();

/// Parses scenario YAML text; throws ConfigError naming `file`, the key path and what was
/// expected (unknown keys get the nearest valid name).
PlanScenario parse_plan_scenario(const std::string& text, const std::string& file);

/// Reads and parses a scenario file (ConfigError when missing or invalid).
PlanScenario load_plan_scenario(const std::string& path);

}  // namespace pw
