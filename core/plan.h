#pragma once
/// An executable plan and a measured run: what the planner emits, the executor runs, and the
/// comparison lines up. Both travel as YAML or JSON (see core/plan_io.h).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "core/units.h"

namespace pw {

/// Model shape (Megatron names). Enough for the executor to build a real model of this shape.
struct ModelShape {
  std::string name;  ///< preset name or "custom"
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int ffn_hidden_size = 0;  ///< 0 = 4 * hidden_size
  int seq_length = 0;
  int vocab_size = 0;
  // Attention (Megatron names): grouped-query attention when 0 < num_query_groups < heads.
  int num_query_groups = 0;   ///< key/value heads; 0 = num_attention_heads (multi-head)
  int kv_channels = 0;        ///< head dimension; 0 = hidden_size / num_attention_heads
  bool qk_layernorm = false;  ///< per-head norms of queries and keys (Qwen3)
  /// Sliding-window attention in every layer (Megatron --window-size W,0; a config.json's
  /// sliding_window): a query attends to itself and the W tokens before it; 0 = none (so is a
  /// window of at least seq_length - 1, which masks nothing).
  int window_size = 0;
  bool swiglu = false;            ///< gated MLP: ffn_hidden_size is the gate's (and up's) width
  bool rmsnorm = false;           ///< RMSNorm (scale only) instead of LayerNorm (scale and shift)
  bool untie_embeddings = false;  ///< untie_embeddings_and_output_weights
  bool rope = false;              ///< rotary positions: no learned position table
  bool bias = true;               ///< add_bias_linear: biases on the linear layers
  bool qkv_bias = false;          ///< add_qkv_bias: biases on q, k, v only (Qwen2)
  // Multi-head latent attention (DeepSeek-V2/V3; Megatron --multi-latent-attention, its names):
  // queries and keys/values pass through low-rank latents; on when kv_lora_rank > 0. Heads are
  // full (no query groups); a head's query/key is qk_head_dim + qk_pos_emb_head_dim wide (the
  // rotary part of the key shared by all heads), its value v_head_dim.
  int q_lora_rank = 0;          ///< query latent width; 0 = queries projected from h directly
  int kv_lora_rank = 0;         ///< key/value latent width
  int qk_head_dim = 0;          ///< per-head query/key width without the rotary part
  int qk_pos_emb_head_dim = 0;  ///< per-head rotary width of queries and keys
  int v_head_dim = 0;           ///< per-head value width
  bool mla() const { return kv_lora_rank > 0; }
  // Mixture of experts (0 experts = dense).
  int num_experts = 0;
  int moe_router_topk = 0;
  int moe_ffn_hidden_size = 0;     ///< per expert; 0 = ffn_hidden_size
  int moe_shared_expert_size = 0;  ///< moe_shared_expert_intermediate_size; 0 = none
  int moe_layer_freq = 1;          ///< every k-th layer is MoE (after the first dense ones)
  int moe_first_dense_layers = 0;  ///< the first k layers are dense (DeepSeek's first_k_dense)
  double moe_capacity_factor = 0;  ///< 0 = dropless (tokens routed as the router says)
  /// Multi-token prediction (DeepSeek-V3; Megatron --mtp-num-layers): depths after the main
  /// model, each an embedding of the shifted tokens, two norms, a projection of their
  /// concatenation (2h -> h), one transformer layer of the last layer's kind, a final norm and the
  /// shared output head with its loss; on the last pipeline stage (Megatron's default).
  int mtp_num_layers = 0;
  friend bool operator==(const ModelShape&, const ModelShape&) = default;
};

/// The chosen parallel configuration.
struct ParallelConfig {
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int data_parallel = 1;
  int virtual_stages = 1;  ///< chunks per device
  int micro_batch_size = 1;
  int global_batch_size = 1;
  bool sequence_parallel = false;
  std::string recompute = "none";  ///< none | selective | full
  int zero_stage = 0;
  /// What ZeRO-3 gathers at once (zero3_gather_names): "layer" (FSDP with reshard after
  /// forward, Megatron-FSDP: every pass all-gathers its layers one collective per layer, the
  /// next one prefetched under the current one's compute, and frees them after use), "tensor"
  /// (DeepSpeed ZeRO-3: the same, but one collective per prefetch bucket of weight tensors,
  /// hw::zero3_pass_gathers) or "stage" (breadth-first pipelines: a stage's weights are
  /// gathered once per sweep of consecutive passes of that stage and held through it). Read only
  /// with zero_stage 3.
  std::string zero3_gather = "layer";
  bool optimizer_offload = false;
  std::string schedule = "1f1b";
  /// Context parallelism: the sequence split over cp ranks (Megatron order tp, cp, dp, pp:
  /// data_parallel counts the data-parallel groups, t * cp * p * d = GPUs).
  int context_parallel = 1;
  int expert_parallel = 1;         ///< expert_model_parallel_size (within cp * d * t)
  int expert_tensor_parallel = 0;  ///< expert_tensor_parallel_size; 0 = tensor_parallel
  std::string fp8 = "off";         ///< off | e4m3 | hybrid: FP8 GEMMs (Transformer Engine)
  /// Megatron's `--fp8-recipe` (with fp8 on): "delayed" (its default: Transformer Engine's
  /// delayed scaling, whose amax histories are all-reduced over the stage's tensor-, data- and
  /// context-parallel ranks at each model chunk's forward and backward) or "tensorwise"
  /// (current scaling: each tensor scaled as it is cast, no such reduction).
  std::string fp8_recipe = "delayed";
  /// True when the step all-reduces delayed scaling's amaxes (fp8 on, recipe delayed).
  bool fp8_amax_reduction() const { return fp8 != "off" && fp8_recipe == "delayed"; }
  /// Megatron's gradient buffer and data-parallel reduction in fp32 (`grad_reduce_in_fp32`,
  /// Megatron-LM's default with bf16): 4 bytes per gradient, 2 when false (bf16).
  bool grad_reduce_in_fp32 = true;
  /// Megatron's `overlap_grad_reduce`: each gradient bucket is reduced as soon as the backward
  /// has produced it instead of after the last backward pass.
  bool overlap_grad_reduce = false;
  /// Megatron's `overlap_param_gather` (distributed optimizer, needs overlap_grad_reduce): the
  /// all-gather of the updated weights leaves the end of the step and runs before each chunk's
  /// first forward of the next, bucket by bucket (hw::param_gather_aligned says when).
  bool overlap_param_gather = false;
  /// Megatron's `align_param_gather` (its default; `--no-align-param-gather`, NeMo 1's default,
  /// sets false): with overlap_param_gather and the interleaved schedule, every pipeline rank
  /// starts its first chunks' gathers with the step instead of at each chunk's first forward.
  bool align_param_gather = true;
  /// Megatron's `--ddp-bucket-size`: parameters per gradient (and parameter) bucket with
  /// overlap_grad_reduce; 0 = its default, max(40M, 1M x data-and-context ranks).
  double ddp_bucket_size = 0;
  /// Megatron's `overlap_p2p_comm` (its default for the interleaved schedule; the 2021 code and
  /// the non-interleaved schedule block): each direction's pipeline transfers posted one pass
  /// ahead and waited for late (sim/iteration_p2p.cc). Only where p2p_overlappable().
  bool overlap_p2p_comm = false;
  /// True for Megatron's interleaved schedule over p > 1, the one schedule whose transfers
  /// overlap_p2p_comm overlaps.
  bool p2p_overlappable() const {
    return schedule == "interleaved" && virtual_stages > 1 && pipeline_parallel > 1;
  }
  /// Megatron / Transformer Engine `tp_comm_overlap`: each tensor-parallel all-gather and
  /// reduce-scatter is split into chunks that run under the GEMM next to it (needs sequence
  /// parallelism).
  bool tp_comm_overlap = false;
  /// Megatron's `cp_comm_type` (with context_parallel > 1): "p2p", a ring of key/value
  /// exchanges under the attention blocks (the default); "all_gather", the keys and values
  /// gathered before attention and waited for; "a2a", DeepSpeed-Ulysses' all-to-alls of the
  /// queries, keys and values (heads scattered, sequence gathered) and of the output back.
  std::string cp_comm_type = "p2p";
  /// Megatron's `mtp_standalone` (set from a pipeline_model_parallel_layout that puts the
  /// multi-token prediction depths on a stage of their own): the depths run on the stage before
  /// the last, which holds only the loss; false: on the last stage with the loss (Megatron's
  /// default). Read only with ModelShape::mtp_num_layers > 0 and at least two stages.
  bool mtp_standalone = false;
  int num_gpus() const {
    return tensor_parallel * context_parallel * pipeline_parallel * data_parallel;
  }
  int expert_tp() const {
    return expert_tensor_parallel > 0 ? expert_tensor_parallel : tensor_parallel;
  }
  friend bool operator==(const ParallelConfig&, const ParallelConfig&) = default;
};

/// The values of ParallelConfig::fp8: off, e4m3, hybrid.
const std::vector<std::string>& fp8_format_names();
/// "off, e4m3 or hybrid", for messages.
std::string fp8_format_choices();
/// True when `f` is one of fp8_format_names().
bool is_fp8_format(const std::string& f);
/// The values of ParallelConfig::fp8_recipe: delayed, tensorwise.
const std::vector<std::string>& fp8_recipe_names();
/// "delayed or tensorwise", for messages.
std::string fp8_recipe_choices();
/// True when `r` is one of fp8_recipe_names().
bool is_fp8_recipe(const std::string& r);
/// The values of ParallelConfig::cp_comm_type: p2p, all_gather, a2a.
const std::vector<std::string>& cp_comm_type_names();
/// "p2p, all_gather or a2a", for messages.
std::string cp_comm_type_choices();
/// True when `t` is one of cp_comm_type_names().
bool is_cp_comm_type(const std::string& t);
/// " cp=N" for a configuration with context parallelism (" cp=N all_gather" or " cp=N a2a"
/// for the forms other than the ring), "" without: how the CLI prints it.
std::string cp_label(const ParallelConfig& c);
/// The values of ParallelConfig::zero3_gather: layer, tensor, stage.
const std::vector<std::string>& zero3_gather_names();
/// "layer, tensor or stage", for messages.
std::string zero3_gather_choices();
/// True when `g` is one of zero3_gather_names().
bool is_zero3_gather(const std::string& g);

/// Predicted interval of one action (same numbering as the schedule: device, position).
struct ActionTiming {
  std::int32_t device = 0;
  std::int32_t index = 0;  ///< position in the device's action list
  TimePs start = 0;
  TimePs end = 0;
  friend bool operator==(const ActionTiming&, const ActionTiming&) = default;
};

/// Where a plan came from.
struct Provenance {
  std::string version;         ///< pipewright version
  std::string profile_source;  ///< hardware profile file or name
  std::string created;         ///< ISO date (left empty in tests for byte-stable output)
  std::string command;         ///< command line that produced it
  /// Which engine produced `predicted`: "des" (the discrete-event simulator), "evaluator" (the
  /// fixed-cost evaluator), optionally followed by the reason of a fallback in parentheses;
  /// empty when not recorded (optional in the file).
  std::string prediction_source;
  friend bool operator==(const Provenance&, const Provenance&) = default;
};

/// A plan = scenario + configuration + schedule IR (communication explicit when lowered) +
/// rank-to-GPU map + predicted per-action times + provenance.
/// Whether attention runs fused (no s x s scores stored) when a scenario does not say:
/// Megatron-core's `attention_backend` default, `auto`, with which Transformer Engine picks a
/// fused kernel. The one default: the scenario reader and a plan built in memory take it.
inline constexpr bool kFusedAttentionByDefault = true;

struct Plan {
  ModelShape model;
  /// Fused (flash) attention, as the scenario's model.attention_backend / use_flash_attn
  /// (written in the model section as use_flash_attn when true; a plan file without it was
  /// priced unfused): how the plan's attention was priced.
  bool flash_attention = kFusedAttentionByDefault;
  std::string cluster;  ///< cluster/profile name
  ParallelConfig config;
  Schedule schedule;
  /// rank_to_gpu[pipeline rank] = global GPU index of the first data/tensor replica.
  std::vector<int> rank_to_gpu;
  std::vector<ActionTiming> predicted;  ///< may be empty
  TimePs predicted_iteration = 0;
  Provenance provenance;
  friend bool operator==(const Plan&, const Plan&) = default;
};

/// One measured action of an executed plan.
struct MeasuredAction {
  std::int32_t rank = 0;   ///< pipeline rank (device in the schedule)
  std::int32_t index = 0;  ///< position in that device's action list
  Action action;
  TimePs start = 0;  ///< relative to the iteration start on rank 0's clock
  TimePs end = 0;
};

/// A measured run of one plan (what `pipewright execute --measured` writes).
struct MeasuredRun {
  std::string backend;  ///< "cpu" or "cuda"
  std::string device;   ///< hardware description
  /// The optimizer the executor stepped ("sgd" or "adam"; "" in files written before the field):
  /// every tier of the model prices Adam's step.
  std::string optimizer;
  /// Per rank, the machine probe timed on that rank's core before the run (executor/probe.h,
  /// ms; the CPU executor writes it, empty elsewhere and in older files): set against the
  /// profile's calibration_probe, it tells a machine that changed speed from a wrong model.
  std::vector<double> probe_ms;
  int iterations = 1;
  TimePs iteration_time = 0;            ///< median over measured iterations
  std::vector<MeasuredAction> actions;  ///< from one representative iteration
};

}  // namespace pw
