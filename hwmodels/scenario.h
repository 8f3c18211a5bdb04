#pragma once
/// Scenario files (see DESIGN.md "Scenario files"): model, cluster, parallel configuration and
/// optional published figures, parsed into validated structs. Every key is checked; unknown keys
/// are errors naming the key and the nearest valid one; bad values name file, key path and what
/// was expected; the data-parallel size is derived as GPUs / (t * p) and checked.
#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "hwmodels/profile.h"
#include "hwmodels/topology.h"

namespace pw::hw {

/// Published throughput to compare against (`pipewright validate`).
struct PublishedFigures {
  double tflops_per_gpu = 0;        ///< 0 = not given
  double iteration_time_s = 0;      ///< 0 = not given (derived from tokens_per_s_per_gpu if given)
  double tokens_per_s_per_gpu = 0;  ///< as published; 0 = not given
  std::string source;
};

/// Throughput error of a prediction against published figures, in percent, + = predicted faster:
/// against the published TFLOP/s per GPU when given, else against the throughput implied by the
/// published iteration time (published / predicted time - 1). The one comparison `validate` and
/// `simulate` print.
double published_error_pct(const PublishedFigures& pub, double predicted_tflops_per_gpu,
                           double predicted_iteration_s);

/// Whether a command needs the scenario's `parallel:` section. Commands that search (plan) take
/// it as optional: absent, or holding only global_batch_size, it names no configuration.
enum class ParallelSection { kRequired, kOptional };

/// A loaded, validated scenario.
/// The largest cluster a scenario may describe (nodes x GPUs per node): 2^20 GPUs, ten times the
/// largest training clusters built; beyond it a scenario is refused, not wrapped or attempted.
inline constexpr long long kMaxClusterGpus = 1 << 20;

struct Scenario {
  std::string file;  ///< path it was loaded from (used in later error messages)
  ModelShape model;
  /// model.attention_backend / use_flash_attn (kFusedAttentionByDefault when neither is given)
  bool flash_attention = kFusedAttentionByDefault;
  HardwareProfile profile;
  std::string cluster_profile;  ///< cluster.profile as written (a shipped name or a path)
  TopologySpec topology;        ///< profile node/fabric with the cluster's overrides and node count
  ParallelConfig parallel;      ///< data_parallel and virtual_stages derived
  /// false: the file names no configuration (ParallelSection::kOptional); `parallel` then holds
  /// only global_batch_size (the section's, or 1536, GPT-3's batch, when it gives none).
  bool has_parallel = true;
  /// Megatron's uneven pipeline split (parallel.decoder_first_pipeline_num_layers and
  /// decoder_last_pipeline_num_layers): transformer layers on the first / last pipeline stage,
  /// the rest spread evenly over the stages between; 0 = not given.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  /// Megatron's parallel.pipeline_model_parallel_layout as written (core/pipeline_layout.h;
  /// empty: not given), and the transformer layers of each of its p*v stages in layer order
  /// when they are not all equal (empty otherwise: an even split, v chunks per device).
  std::string pipeline_layout;
  std::vector<int> layout_layers;
  /// Megatron's parallel.microbatch_group_size_per_vp_stage: microbatches the interleaved
  /// schedule runs through each chunk before the next (p <= g <= m, m mod g zero or at least
  /// p); 0 = not given (Megatron's default, p).
  int microbatch_group_size = 0;
  std::optional<PublishedFigures> published;
  /// `group`: the comparison this scenario belongs to (e.g. "weak scaling"); `validate` reports
  /// each group's rows, mean and worst error together. Empty = not given.
  std::string group;

  /// Transformer layers of each pipeline stage in model order (summing to num_layers): p
  /// entries of num_layers / p each, the uneven split above, or the layout's p*v stages.
  std::vector<int> stage_layers() const;
  bool uneven_split() const {
    return first_stage_layers > 0 || last_stage_layers > 0 || !layout_layers.empty();
  }

  int num_gpus() const { return topology.nodes * topology.node.gpus_per_node; }
  /// Microbatches per iteration per pipeline: B / (b * d).
  long long num_microbatches() const {
    return parallel.global_batch_size /
           (static_cast<long long>(parallel.micro_batch_size) * parallel.data_parallel);
  }
};

/// Command-line overrides of the parallel section (unset = keep the file's value).
struct ParallelOverrides {
  std::optional<int> tp, pp, dp, micro_batch_size, zero_stage;
  std::optional<int> cp, ep, etp;  ///< context, expert and expert-tensor parallel sizes
  std::optional<std::string> recompute;
  std::optional<bool> sequence_parallel;
  std::optional<std::string> zero3_gather;  ///< layer | stage (with ZeRO-3)
  std::optional<std::string> fp8;           ///< off | e4m3 | hybrid
  bool any() const {
    return tp || pp || dp || micro_batch_size || zero_stage || cp || ep || etp || recompute ||
           sequence_parallel || zero3_gather || fp8;
  }
};

/// The keys a scenario's "model", "cluster" or "parallel" section takes (empty for another
/// name): what the loader accepts, and what tools that write or mutate scenarios offer.
std::vector<std::string> scenario_keys(const std::string& section);

/// Parses scenario YAML `text`; `file` names it in errors and `base_dir` resolves relative
/// profile paths. `overrides` replace file values before the configuration is validated (errors
/// about the parallel sizes then name the flags, e.g. "--tp").
Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::string& base_dir, const ParallelOverrides& overrides = {},
                        ParallelSection section = ParallelSection::kRequired);
/// Reads and parses a scenario file. Every command reads scenarios through this one function.
/// Refuses (ConfigError naming the file and key) a scenario with slow GPUs or degraded NICs, for
/// commands whose models assume every GPU and NIC at the profile's rate (`command` is named).
void require_uniform_cluster(const Scenario& s, const std::string& command);

Scenario load_scenario(const std::string& path, const ParallelOverrides& overrides = {},
                       ParallelSection section = ParallelSection::kRequired);

/// Applies overrides and re-validates; errors name the scenario file and the flag ("--tp").
/// When t or p changes and --dp is not given, d is re-derived from the GPU count.
void apply_overrides(Scenario* s, const ParallelOverrides& o);

/// Checks the parallel configuration against the model and the cluster and derives d and v.
/// `dp_given` = the data-parallel size the user asked for (0 = derive); `layers_per_virtual` = 0
/// for no interleaving. Errors name s->file and the YAML key path, or the command-line flag
/// when `from_cli`.
void validate_parallel(Scenario* s, int dp_given, int layers_per_virtual, bool from_cli);

}  // namespace pw::hw
