#pragma once
/// The planner's search space: one configuration as a small POD, and the option lists whose
/// product is the space. The schedules come from the generator registry with the capabilities
/// each declares (chunks per device, V or loop, pipelines, split backward, memory-aware).
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"
#include "hwmodels/profile.h"
#include "hwmodels/transformer.h"
#include "planner/schedules/generator.h"
#include "planner/search/frameworks.h"

namespace pw {

/// Model presets: hwmodels' (hwmodels/model_presets.h). Returns false if unknown.
bool model_preset(const std::string& name, ModelShape* out);
std::vector<std::string> model_preset_names();

/// Recomputation is hwmodels' enum (SearchConfig stores it as its integer value).
using Recompute = hw::Recompute;
using hw::recompute_name;

/// One configuration. 24 bytes; the global batch is micro_batch * microbatches * d; the GPUs
/// t * cp * p * d (d counts data-parallel groups, as Megatron's data_parallel_size).
struct SearchConfig {
  std::uint16_t t = 1, p = 1, d = 1;
  std::uint16_t ep = 1;  ///< expert parallel (MoE)
  /// MoE with t > 1: the experts are not split by tensor parallelism (expert-TP 1, EP over the
  /// tensor-and-data ranks); 0 = expert-TP t, Megatron's default.
  std::uint8_t etp1 = 0;
  std::uint8_t cp = 1;   ///< context parallel
  std::uint8_t fp8 = 0;  ///< FP8 GEMMs
  std::uint16_t micro_batch = 1;
  std::uint16_t microbatches = 1;
  std::uint8_t schedule = 0;   ///< index into SearchSpace::schedules
  std::uint8_t recompute = 0;  ///< Recompute
  std::uint8_t sequence_parallel = 0;
  std::uint8_t zero = 0;
  std::uint8_t zero3_stage = 0;  ///< ZeRO-3 gathers per stage sweep (0: per layer, every pass)
  /// ZeRO-1/2: Megatron's overlap_param_gather (the re-gather under the next step's forwards).
  std::uint8_t param_gather = 0;
  std::uint8_t offload = 0;
  /// Layers taken off the end stages (uneven split), an end_trim_code: off the first and last
  /// stage alike, and off the last one further (the work of its multi-token prediction depths).
  std::uint8_t end_trim = 0;
  int gpus() const { return int{t} * cp * p * d; }
  int etp() const { return etp1 ? 1 : int{t}; }  ///< expert_tensor_parallel_size
  int global_batch() const { return int{micro_batch} * microbatches * d; }
  friend bool operator==(const SearchConfig&, const SearchConfig&) = default;
};

/// SearchConfig::end_trim: `trim` layers off the first and last stage (below an even share),
/// and `last_extra` more off the last one (trim <= 15, last_extra <= 13: codes below 224).
constexpr std::uint8_t end_trim_code(int trim, int last_extra) {
  return static_cast<std::uint8_t>(trim + 16 * last_extra);
}
/// SearchConfig::end_trim of a split with the multi-token prediction depths on a stage of their
/// own (Megatron's mtp_standalone, layout "...|m|L"): the last stage holds the loss alone, the
/// layers are split over the others with `trim` off the first and `depth_trim` off the depths'
/// stage (the one before the loss's; none when depth_trim reaches its share).
/// trim <= 2, depth_trim <= 7: codes 224..247.
constexpr std::uint8_t mtp_standalone_code(int trim, int depth_trim) {
  return static_cast<std::uint8_t>(224 + 8 * trim + depth_trim);
}
/// SearchConfig::end_trim naming the problem's own split (PlanProblem::own_split: a scenario's
/// uneven layout that no trim gives), for scoring a published configuration as written; the
/// search never lays it out, and first_trim/last_trim do not apply to it.
inline constexpr std::uint8_t kOwnSplit = 255;
/// True for a code of mtp_standalone_code.
constexpr bool is_mtp_standalone_code(std::uint8_t code) { return code >= 224 && code < 248; }
/// Layers off the first stage.
constexpr int first_trim(std::uint8_t code) {
  return is_mtp_standalone_code(code) ? (code - 224) / 8 : code & 15;
}
/// Layers off the last stage that holds transformer layers (with mtp_standalone_code: the
/// depths' stage).
constexpr int last_trim(std::uint8_t code) {
  return is_mtp_standalone_code(code) ? (code - 224) % 8 : (code & 15) + (code >> 4);
}
/// "2" for a trim of both ends alike, "1/3" (first/last) otherwise; " mtp-alone" follows for a
/// mtp_standalone_code.
std::string end_trim_label(std::uint8_t code);

/// Evenly spread `layers` over `stages`, with `trim` fewer (than ceil(layers / stages)) on the
/// first and last stage (the embedding and logits stages); false when a stage would get no
/// layer.
bool split_layers(int layers, int stages, int trim, std::vector<int>* out);
/// The same with `trim_first` fewer (than an even share rounded up, ceil(layers / stages)) on
/// the first stage and `trim_last` fewer on the last; the middle stages share the rest evenly
/// (the earlier ones one more where it does not divide).
bool split_layers(int layers, int stages, int trim_first, int trim_last, std::vector<int>* out);
/// The split a SearchConfig::end_trim code (not kOwnSplit) names over `stages`: split_layers
/// with first_trim/last_trim, or for a mtp_standalone_code none on the last stage (the loss
/// alone) and the layers over the others, `last_trim` fewer on the depths' stage (the one
/// before), which holds none when that reaches its share (Megatron's "m|L" ends); with two
/// stages only the code (0, 0), all layers on the first. False when no such split exists.
bool split_for_trim_code(int layers, int stages, std::uint8_t code, std::vector<int>* out);

/// A registered schedule as the search uses it: name, chunks per device (v) and its declared
/// capabilities (planner/schedules/generator.h GeneratorCaps).
struct ScheduleOption {
  std::string name;
  int v = 1;             ///< stages per device per pipeline
  int pipelines = 1;     ///< model replicas in the pipeline (2 = BitPipe-style, 2x weights)
  bool v_shape = false;  ///< stage i and 2p-1-i on device i
  bool split_backward = false;
  bool takes_v = false;                   ///< the generator honours GeneratorParams::v
  bool memory_aware = false;              ///< the generator reads GeneratorParams::memory_limit
  bool reads_costs = false;               ///< the generator reads the pass costs
  bool explicit_recompute = false;        ///< the schedule has R actions (full recomputation only)
  bool overlap = false;                   ///< the schedule has OVERLAP_F_B actions (DualPipeV)
  bool holds_all_microbatches = false;    ///< every forward before any backward (GPipe)
  int max_devices = 0;                    ///< largest p searched (0 = any)
  double (*own_budget)(int p) = nullptr;  ///< memory-aware: the activation units it is defined with
  Placement (*placement)(int p, int num_layers) = nullptr;  ///< multi-pipeline: its placement
  bool per_device_limits = false;  ///< the generator takes a memory limit per device
};

/// One option per (generator, valid v) from the capabilities each generator declares in its
/// registry entry (GeneratorCaps); generators that take v get every v >= 2 in `v_values`.
/// `skipped` is kept for callers and stays empty. The plain linear options come first (in
/// registry order), since a configuration without a pipeline (p = 1) runs the first option.
std::vector<ScheduleOption> probe_schedules(const GeneratorRegistry& registry,
                                            const std::vector<int>& v_values,
                                            std::vector<std::string>* skipped = nullptr);

/// The option lists whose product is the search space.
struct SearchSpace {
  std::vector<int> gpu_counts;      ///< largest first
  std::vector<int> micro_batches;   ///< microbatch sizes
  std::vector<int> global_batches;  ///< sequences per iteration
  std::vector<ScheduleOption> schedules;
  std::vector<Recompute> recompute{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  std::vector<int> sequence_parallel{0, 1};
  std::vector<int> zero{0, 1, 2, 3};
  /// ZeRO-3 gather granularities (ParallelConfig::zero3_gather): 0 = by layer in every pass,
  /// 1 = by stage, once per sweep. Each ZeRO-3 configuration is searched with each.
  std::vector<int> zero3_gather{0, 1};
  std::vector<int> offload{0, 1};
  /// end_trim_code values searched: both ends trimmed alike by 0-2 layers (default_space adds
  /// 0 and 1 with the last stage trimmed further when it carries multi-token prediction, and
  /// mtp_standalone_code splits for such a model).
  std::vector<int> end_trim{0, 1, 2};
  int max_tensor_parallel = 64;  ///< t limit (heads must divide as well)
  /// Allowed t, p and d (empty = any that multiplies to a GPU count): set by constrain_space.
  std::vector<int> tensor_parallel, pipeline_parallel, data_parallel;
  /// Context-parallel sizes (each must divide the sequence into 2cp chunks; > 1 needs fused
  /// attention), expert-parallel sizes (MoE models; each divides the experts and t*cp*d), FP8.
  std::vector<int> context_parallel{1};
  bool fused_attention = false;  ///< the model uses fused attention (cp > 1 needs it)
  std::vector<int> expert_parallel{1};
  /// Expert-TP degrees allowed (expert_tensor_parallel_size: 1, or t; a degree k > 1 allows
  /// expert-TP t where t = k); empty = both 1 and t (SearchConfig::etp1).
  std::vector<int> expert_tp;
  /// True when expert-TP `etp` may run at tensor-parallel size t.
  bool expert_tp_allowed(int etp) const;
  std::vector<int> fp8{0};
  /// Only configurations this framework runs (planner/search/frameworks.h; kAny = all).
  Framework framework = Framework::kAny;
  /// Settings every configuration shares (PlanProblem's, not searched): ParallelConfig's
  /// grad_reduce_in_fp32, overlap_grad_reduce and tp_comm_overlap (tp_comm_overlap applies to
  /// the configurations with sequence parallelism and t > 1, the only ones that can overlap).
  bool grad_reduce_in_fp32 = true;
  bool overlap_grad_reduce = false;
  /// overlap_param_gather values searched for the ZeRO-1/2 configurations, a subset of {0, 1}
  /// (the scenario's setting by default; `plan --overlap-param-gather both` searches both).
  std::vector<int> param_gather{0};
  bool align_param_gather = true;  ///< Megatron's align_param_gather
  double ddp_bucket_size = 0;      ///< Megatron's --ddp-bucket-size (0: its default)
  bool overlap_p2p_comm = false;   ///< Megatron's overlap_p2p_comm (interleaved rows)
  bool tp_comm_overlap = false;
  /// Megatron's cp_comm_type for the configurations with context parallelism.
  std::string cp_comm_type = "p2p";
  /// Megatron's fp8_recipe for the configurations with FP8 (ParallelConfig::fp8_recipe).
  std::string fp8_recipe = "delayed";
  /// The split end_trim kOwnSplit names (PlanProblem::own_split, a scenario's layout) puts the
  /// multi-token prediction depths on a stage of their own (ParallelConfig::mtp_standalone).
  /// The searched splits put them there with the codes of mtp_standalone_code.
  bool own_split_mtp_standalone = false;
};

/// The core ParallelConfig of a search configuration (config_from_parallel in plan_emit.h is the
/// inverse).
ParallelConfig parallel_from_config(const SearchSpace& space, const SearchConfig& c);

/// The sharding modes of the space: each ZeRO stage, ZeRO-3 once per gather granularity,
/// ZeRO-1/2 once per searched overlap_param_gather value.
std::size_t zero_mode_count(const SearchSpace& space);
/// Writes mode k (0 <= k < zero_mode_count) into c's zero, zero3_stage and param_gather.
void set_zero_mode(const SearchSpace& space, std::size_t k, SearchConfig* c);

/// An expert layout: expert-parallel size and expert-TP mode (SearchConfig::etp1).
struct ExpertLayout {
  int ep = 1, etp1 = 0;
};
/// Expert layouts valid for a cell: ep in the space dividing the experts, expert-TP t or 1 as
/// the space allows (one layout at t = 1, marked etp1 = 0), ep x expert-TP dividing t*cp*d
/// ({1, 0} for a dense model).
std::vector<ExpertLayout> cell_expert_parallel(const SearchSpace& space, const ModelShape& model,
                                               int t, int cp, int d);

/// Every (t, p, d) with t*p*d == n, t dividing the heads and t <= max_t, p <= layers.
/// Ordered by (t, p) ascending.
struct Tpd {
  int t, p, d;
  int cp = 1;  ///< space_factorisations: t * cp * p * d == n
};
std::vector<Tpd> factorisations(int n, const ModelShape& model, int max_t);

/// factorisations(n, model, space.max_tensor_parallel) restricted to the space's allowed t, p, d,
/// each split into every allowed cp (dividing d, and the sequence into 2cp chunks): t*cp*p*d = n.
/// t must also divide the key/value heads (Megatron splits them over TP).
std::vector<Tpd> space_factorisations(const SearchSpace& space, int n, const ModelShape& model);

/// What the user allows (`pipewright plan --tp 8 --pp 8 --schedules interleaved ...`). Every
/// list, when not empty, is the set of values the search may use; empty lists leave that
/// dimension free. The search covers only the intersection with the default space.
struct SearchConstraints {
  std::vector<int> tp, pp, dp;    ///< tensor / pipeline / data-parallel degrees
  std::vector<int> micro_batch;   ///< microbatch sizes (replace the default 1, 2, 4, 8)
  std::vector<int> global_batch;  ///< sequences per iteration (replace the scenario's or grid)
  /// Generator names (every v of interleaved-style ones), or "NAME:vK" for a schedule whose
  /// option takes v: exactly K stages per device (K >= 2, one of the searched v with p*v
  /// within the layers for some allowed p >= 2).
  std::vector<std::string> schedules;
  std::vector<Recompute> recompute;
  std::vector<int> zero;                  ///< ZeRO stages 0..3
  std::vector<int> sequence_parallel;     ///< subset of {0, 1}
  std::vector<int> offload;               ///< subset of {0, 1}
  std::vector<int> cp, ep;                ///< context / expert-parallel degrees
  std::vector<int> etp;                   ///< expert-TP degrees: 1 and/or t (written as its value)
  std::vector<int> fp8;                   ///< subset of {0, 1}
  std::vector<int> param_gather;          ///< overlap_param_gather: subset of {0, 1}
  Framework framework = Framework::kAny;  ///< only what this framework runs (`--framework`)
  int gpus = 0;                           ///< exactly this many GPUs; 0 = the usual sweep
  bool empty() const;
  /// The constraints as the command line spells them, e.g. "--tp 8 --pp 8 --schedules
  /// interleaved" (fixed flag order; "" when empty).
  std::string describe() const;
};

/// Restricts `space` (a default_space) to `c` for `model` on a cluster of `cluster_gpus`.
/// Throws ConfigError whose key names the flags involved and whose message says why no
/// configuration satisfies them (with the nearest allowed values where cheap) when the
/// constraints contradict the model, the cluster or each other: a t that does not divide the
/// heads, a p above the layer count, no t*p*d equal to a GPU count searched, no microbatch size
/// times d dividing a global batch, an unknown schedule name ("did you mean"), a ":vK" on a
/// schedule that takes no v or with a K not searched (the valid K listed), schedules that
/// cannot run at any allowed p or recompute option, sequence parallelism with t = 1 only, ZeRO
/// with d = 1 only. GPU counts without a factorisation are dropped from the sweep.
void constrain_space(const SearchConstraints& c, const ModelShape& model, int cluster_gpus,
                     SearchSpace* space);

/// The number of configurations of `space` before validity checks (the product of its lists,
/// summing over factorisations of each GPU count).
std::uint64_t space_size(const SearchSpace& space, const ModelShape& model);

}  // namespace pw
