#pragma once
/// Decoder-only transformer workload: the GEMMs and memory-bound ops of one layer per pass (F,
/// B-input, B-weight, recompute) on one rank, the TP, context-parallel and expert-parallel
/// communication each pass issues, embedding and logits on the first and last stages, stage costs
/// for any layer range, parameter counts and FLOPs per iteration. Covers GPT-3-style layers
/// (multi-head attention, GELU MLP, LayerNorm, tied embeddings, learned positions) and today's
/// (grouped-query attention with its own head dimension, SwiGLU, RMSNorm, untied embeddings,
/// RoPE, no biases, q/k norms, mixture-of-experts layers with top-k routing and shared experts),
/// context parallelism and FP8 GEMMs. Activations are 16-bit (bf16); logits are kept in fp32.
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/units.h"
#include "hwmodels/collectives.h"
#include "hwmodels/gpu_model.h"

namespace pw::hw {

enum class Recompute { kNone, kSelective, kFull };
/// "none" | "selective" | "full"; returns false if unknown.
bool parse_recompute(const std::string& s, Recompute* out);
const char* recompute_name(Recompute r);

/// Passes of a stage, as the schedule IR splits them.
enum class Pass { kForward, kBackwardInput, kBackwardWeight, kRecompute };

/// How context parallelism exchanges keys and values (ParallelConfig::cp_comm_type).
enum class CpComm : std::uint8_t { kP2p, kAllGather, kA2a };

/// What the workload depends on besides the model shape.
struct WorkloadOptions {
  int tp = 1;
  int micro_batch = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  bool flash_attention = false;  ///< fused attention: no s^2 tensors stored or streamed
  DType dtype = DType::kBf16;
  int cp = 1;  ///< context parallel: each rank holds seq_length / cp tokens
  CpComm cp_comm = CpComm::kP2p;
  int ep = 1;        ///< expert parallel: each rank holds num_experts / ep experts
  int etp = 1;       ///< expert tensor parallel: expert FFN width split etp ways
  bool fp8 = false;  ///< linear-layer GEMMs in FP8 (attention core stays bf16)
  /// Delayed scaling (ParallelConfig::fp8_amax_reduction): each stage pass's F and B end with
  /// the all-reduce of its FP8 tensors' amaxes (stage_costs, CommGroup::kAmax).
  bool fp8_amax_reduction = false;
  /// Megatron / Transformer Engine tp_comm_overlap (with sequence parallelism, tp > 1): the
  /// GEMMs its ring exchanges and pipelined reduce-scatters run beside are computed in tp row
  /// chunks (StageCosts::hide_f).
  bool tp_comm_overlap = false;
};

/// Builds options from the IR's ParallelConfig (recompute and fp8 strings already validated).
WorkloadOptions workload_options(const ParallelConfig& p, bool flash_attention = false);

/// One kernel of a pass on one TP rank. GEMMs have a shape (C[m x n] = A[m x k] B[k x n], `batch`
/// of them); memory-bound ops have only bytes. `flops` = 2*m*n*k*batch for GEMMs.
struct LayerOp {
  const char* name = "";
  bool gemm = false;
  bool fp8 = false;  ///< runs in FP8 (WorkloadOptions::fp8 linear layers); else `dtype`
  /// Part of a fused attention kernel: 1 forward, 2 backward (priced by the profile's attention
  /// efficiency when it gives one, else as the GEMM it is); 0 = not.
  int fused_attention = 0;
  long long m = 0, n = 0, k = 0, batch = 1;
  Flops flops{};
  Bytes bytes{};  ///< HBM traffic (memory-bound ops)
};

/// The group a pass's collective runs on.
enum class CommGroup : std::uint8_t {
  kTp,  ///< the tensor-parallel group (and expert-TP, which is the same ranks)
  kCp,  ///< the context-parallel group: K/V exchange, overlapped with the pass's compute
  kEp,  ///< the expert-parallel group: token dispatch and combine (all-to-all)
  /// Megatron's amax reduction group: every tensor-, data- and context-parallel rank of the
  /// pipeline stage (Transformer Engine's delayed-scaling amax all-reduce).
  kAmax,
};
const char* comm_group_name(CommGroup g);  ///< "tp", "cp", "ep", "fp8 amax"

/// One collective a pass issues (per microbatch, over `group`); `bytes` is the nccl-tests
/// size (whole buffer for all-reduce, gathered size for all-gather/reduce-scatter, per-rank
/// send buffer for all-to-all). CP collectives run concurrently with the pass (ring exchange
/// hidden behind attention); TP and EP collectives sit between the pass's kernels.
struct TpComm {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes{};
  int count = 1;
  const char* where = "";
  CommGroup group = CommGroup::kTp;
  /// A CP send/recv the pass waits for (multi-token prediction's token roll between
  /// neighbouring CP ranks), not a step of the ring under attention.
  bool waited = false;
};

/// Whether `c` is a step of the context-parallel ring (a CP send/recv, run under the attention
/// block before it: cp_ring_exposed) rather than a collective the pass waits for. One test for
/// every tier.
inline bool is_cp_ring_step(const TpComm& c) {
  return c.group == CommGroup::kCp && c.kind == CollectiveKind::kSendRecv && !c.waited;
}

/// The networks of a rank's TP, CP, EP and amax reduction groups.
struct CommNetworks {
  GroupNetwork tp, cp, ep, amax;
  const GroupNetwork& of(CommGroup g) const {
    return g == CommGroup::kCp ? cp : g == CommGroup::kEp ? ep : g == CommGroup::kAmax ? amax : tp;
  }
};

/// The kernels of one transformer layer's `pass` on one TP rank for one microbatch. The
/// recompute pass is the attention core (selective) or the whole forward (full); empty for none.
/// W holds the weight GEMMs and the parameter reductions: qkv/proj/mlp_up/mlp_down bias
/// gradients (`*_bias_grad`, read tokens x width, write width) and the two layer norms'
/// gamma/beta gradients (`layernorm{1,2}_param_grad`, read 2 x tokens x h, write 2h); tokens
/// outside the TP region are divided by t with sequence parallelism.
/// `moe` = the layer's MLP is a mixture of experts (is_moe_layer); its ops then are the router,
/// token permutation, grouped expert GEMMs (num_experts / ep per rank) and the shared expert.
std::vector<LayerOp> layer_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass,
                               bool moe = false);
/// Collectives of one layer's `pass`: TP (none when tp == 1), CP K/V exchange (cp > 1) and the
/// MoE all-to-all dispatch and combine (moe layers, ep > 1).
std::vector<TpComm> layer_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass,
                                   bool moe = false);

/// True when layer `layer` (0-based) of `m` has an MoE MLP: num_experts > 0, layer >=
/// moe_first_dense_layers and layer % moe_layer_freq == 0 (Megatron's pattern).
bool is_moe_layer(const ModelShape& m, int layer);
/// MoE layers in [begin, end).
int moe_layers_in(const ModelShape& m, int begin, int end);
/// True when the multi-token prediction depths' transformer layers are MoE: they take the last
/// layer's kind (Megatron's spec and FLOPs count; DeepSeek-V3's MTP layer is MoE).
bool mtp_layer_is_moe(const ModelShape& m);
/// Head dimension (kv_channels, or h / heads), query width heads x head dim, key/value width
/// groups x head dim, key/value heads (num_query_groups, or heads). Under multi-head latent
/// attention (ModelShape::mla) every head has its own keys and values, a query/key head is
/// qk_head_dim + qk_pos_emb_head_dim wide (query_width, kv_width) and a value head v_head_dim
/// (value_width; attention_output_width = heads x value head, the projection's input).
int head_dim(const ModelShape& m);
int kv_heads(const ModelShape& m);
long long qk_head_width(const ModelShape& m);
long long v_head_width(const ModelShape& m);
long long query_width(const ModelShape& m);
long long kv_width(const ModelShape& m);
long long value_width(const ModelShape& m);
long long attention_output_width(const ModelShape& m);
/// Expert FFN width (moe_ffn_hidden_size, or ffn_hidden_size).
int expert_ffn_size(const ModelShape& m);
/// Kernels of the embedding (first stage) for `pass`.
std::vector<LayerOp> embedding_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass);
/// Kernels of the final layer norm, logits GEMM and cross-entropy (last stage) for `pass` (W:
/// the logits weight gradient and the final layer norm's gamma/beta gradients).
std::vector<LayerOp> head_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass);
std::vector<TpComm> embedding_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass);
std::vector<TpComm> head_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass);
/// One multi-token prediction depth's own kernels for `pass` (empty without MTP): the norms of
/// the shifted tokens' embedding and of the hidden state, their concatenation and the projection
/// 2h -> h (column-parallel, no bias); full recomputation reruns them. A depth also runs one
/// transformer layer (mtp_layer_is_moe), embedding_ops and head_ops: stage_costs adds all four
/// to the last stage, once per depth.
std::vector<LayerOp> mtp_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass);
/// The collectives of one depth: mtp_ops' over TP (the projection's input gathered (SP) and its
/// output gathered in F; the split's gradient gathered (SP) and the input gradient reduced in B;
/// the input gathered again for dW (SP)) and, with context parallelism, the forward's token
/// rolls (Megatron's roll_tensor: the depth's input ids, position ids, labels and loss mask
/// each shifted by one token, the boundary elements exchanged with the neighbouring CP ranks and
/// waited for): waited CP send/recvs of one element per sequence.
std::vector<TpComm> mtp_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass);

/// Sum of the ops' FLOPs.
Flops total_flops(const std::vector<LayerOp>& ops);
/// Keys a fused (flash) attention kernel computes per query, on average: half of `seq_k` under a
/// causal mask (the blocks above the diagonal are skipped), all of them without one. The layer
/// model's fused attention is causal (a language model's). A causal sliding `window` (0 = none;
/// attention_window) shorter than `seq_k` leaves w - w^2 / (2 seq_k): the triangle's first w
/// rows (w^2 / 2 keys) and w keys in each of the other seq_k - w, averaged over seq_k queries
/// (the whole causal mask's seq_k / 2 at w = seq_k, the convention above).
long long fused_attention_keys(long long seq_k, bool causal, long long window = 0);
/// The sliding attention window that masks something: ModelShape::window_size where it is
/// shorter than the sequence (a query then misses the earliest keys), else 0.
long long attention_window(const ModelShape& m);
/// FLOPs of one fused attention kernel over `heads` query heads (batch x heads): the scores and
/// context GEMMs, 2 x 2 seq_q k head_dim per head forward; 5 of them backward (each GEMM's two
/// gradients and the recomputed scores), k = fused_attention_keys. The layer model's fused
/// attention ops sum to this; calibration prices traced kernels with it.
double fused_attention_flops(long long heads, long long seq_q, long long seq_k, long long head_dim,
                             bool causal, bool backward);
/// Sum of the ops' times on `gpu`: GEMMs by GpuModel::gemm_time, memory-bound ops by
/// GpuModel::elementwise_time (the element-wise throughput, not the streaming bandwidth; the
/// backward's where `pass` is B or W).
TimePs ops_time(const std::vector<LayerOp>& ops, const GpuModel& gpu, DType dtype, Pass pass);

/// Activation bytes one layer holds from F until B, per microbatch per TP rank (Korthikanti et
/// al.: s*b*h*(10 + 24/t + 5as/(ht)) without SP, s*b*h*(34/t + 5as/(ht)) with; selective
/// recompute or flash attention drop the 5as/(ht) term; full recompute keeps the layer input,
/// 2sbh, or 2sbh/t with SP).
/// Generalised: the attention part holds Q, K, V (2(q + 2kv) per token) and the attention output
/// (2q), the MLP its up output (2f, 4f gated) and activation output (2f), all per TP rank; an MoE
/// MLP holds fp32 router probabilities, the permuted expert input, expert up/activation outputs
/// (rows = tokens x top-k on this rank) and the expert outputs; q/k norms add their inputs. s is
/// seq_length / cp.
Bytes layer_activation_bytes(const ModelShape& m, const WorkloadOptions& o, bool moe = false);
/// Activation bytes one layer holds from B until W (weight-GEMM inputs and output gradients):
/// s*b*h*(8 + 24/t) without SP, 32*s*b*h/t with (32sbh at t = 1, as in the zero-bubble paper).
/// Generalised as layer_activation_bytes (GQA widths, gated MLP, MoE rows).
Bytes layer_weight_grad_bytes(const ModelShape& m, const WorkloadOptions& o, bool moe = false);

/// The bytes of the amax all-reduces that end a stage pass under delayed scaling (Transformer
/// Engine's reduce_and_update_fp8_tensors at the exit of the chunk's fp8_autocast, and in the
/// backward of its first FP8 module): 4 bytes per scaling entry, three per FP8 GEMM of the
/// forward, two per GEMM of the backward (a grouped expert GEMM counts its experts), over the
/// stage's `dense_layers` and `moe_layers`. Zero without FP8 GEMMs.
struct Fp8AmaxBytes {
  Bytes forward{}, backward{};
};
Fp8AmaxBytes fp8_amax_bytes(const ModelShape& m, const WorkloadOptions& o, int dense_layers,
                            int moe_layers);

/// Costs of one pipeline stage (layers [layer_begin, layer_end), plus the embedding if first
/// and the head if last) per microbatch on one TP rank. Times are compute only; TP collectives
/// are listed per pass (time them with tp_comm_time).
struct StageCosts {
  TimePs f = 0, b = 0, w = 0, r = 0;  ///< forward, input-gradient, weight-gradient, recompute
  Flops f_flops{}, b_flops{}, w_flops{}, r_flops{};
  std::vector<TpComm> comm_f, comm_b, comm_w, comm_r;
  Bytes comm_bytes_f{}, comm_bytes_b{};  ///< sum of TP collective sizes in F and B
  Bytes m_b{};                           ///< activations held from F until B
  Bytes m_w{};                           ///< activations held from B until W
  Bytes m_r{};        ///< extra activations the recompute pass re-creates (released by B)
  Bytes p2p_bytes{};  ///< activation sent to the next stage per microbatch (b*s*h*2 / t with SP)
  /// Per pass, the GEMM time next to its TP collectives under which Megatron's tp_comm_overlap
  /// runs them (sequence parallelism, t > 1; else 0): (t - 1)/t of each GEMM a sequence-parallel
  /// all-gather feeds or a reduce-scatter drains (qkv, proj, mlp up/down and the shared
  /// expert's in F and R; their input-gradient GEMMs in B; the qkv and mlp-up weight-gradient
  /// GEMMs beside the re-gather of their inputs in W). The ring's first (all-gather) or last
  /// (reduce-scatter) chunk of 1/t cannot overlap. With WorkloadOptions::tp_comm_overlap the
  /// GEMMs Transformer Engine splits (detail::tp_overlap_split: the F/R ones and the B input
  /// gradients of proj and mlp down) run as t GEMMs of 1/t of the rows each, priced so in the
  /// pass time, and the hideable part is t - 1 of those chunks.
  TimePs hide_f = 0, hide_b = 0, hide_w = 0, hide_r = 0;
  /// Per pass, the attention core's time (scores, softmax, context; the fused kernel): what a
  /// context-parallel ring step runs under (cp_ring_exposed).
  TimePs attn_f = 0, attn_b = 0, attn_w = 0, attn_r = 0;
};

/// Time of a pass that runs `hideable` of its `compute` under collectives of `comm` (both
/// picoseconds or both seconds): compute - hideable + max(hideable, comm). Without overlap the
/// pass is compute + comm. One formula for every tier.
template <typename T>
T overlapped_pass_time(T compute, T hideable, T comm) {
  const T h = hideable < compute ? hideable : compute;
  return compute - h + (h > comm ? h : comm);
}

/// What a pass waits for beyond its compute when context parallelism runs as a ring (Megatron's
/// `cp_comm_type: p2p`, Transformer Engine's KV-P2P attention): each layer's attention runs in
/// cp equal blocks (causal load balancing gives every block the same work) and its cp - 1 ring
/// steps each move the next block's keys and values (with their gradients in the backward)
/// under the block before, so a step that outlasts its block shows. Summed over a pass's layers
/// and steps, with `ring` the steps' total time and `attention` the pass's attention core:
/// max(0, ring - attention x (cp - 1) / cp). One formula for every tier; the DES runs the steps.
template <typename T>
T cp_ring_exposed(T attention, T ring, int cp) {
  if (cp <= 1) return T{0};
  const T covered = attention * (cp - 1) / cp;
  return ring > covered ? ring - covered : T{0};
}

/// What a pipeline stage holds besides its transformer layers: the embedding (`first`), the
/// final norm, output layer and loss (`last`: with multi-token prediction the logits and loss
/// of the main model and of every depth, Megatron's process_mtp_loss) and the multi-token
/// prediction depths (`mtp`: each an embedding of the shifted tokens, its norms, projection and
/// layer; on the last stage, or on the one before it with ParallelConfig::mtp_standalone, which
/// then sends the main model's and every depth's hidden states on: 1 + D activations).
struct StageRole {
  bool first = false;
  bool last = false;
  bool mtp = false;
};
/// The role of stage `index` (0 = the input's) of a pipeline of `stages`.
StageRole stage_role(int index, int stages, bool mtp_standalone);

StageCosts stage_costs(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                       int layer_begin, int layer_end, StageRole role);
/// The same with the depths on the last stage (Megatron's default): {is_first, is_last, is_last}.
StageCosts stage_costs(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                       int layer_begin, int layer_end, bool is_first, bool is_last);
/// The same for `dense_layers` dense and `moe_layers` MoE layers (stage_costs counts them in
/// its range); screens tabulate one layer of each kind with it.
StageCosts stage_costs_for(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                           int dense_layers, int moe_layers, StageRole role);
StageCosts stage_costs_for(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                           int dense_layers, int moe_layers, bool is_first, bool is_last);
/// Time of a list of collectives, each on its group's network, in sequence. CP collectives are
/// included (they are what a pass would wait for if nothing hid them).
TimePs tp_comm_time(const std::vector<TpComm>& comms, const CommNetworks& nets);
/// Time of a list of collectives that contains only TP ones (asserts so) on the TP group.
TimePs tp_comm_time(const std::vector<TpComm>& comms, const GroupNetwork& tp_group);

/// Parameters of the model: every layer, the input embedding, learned positions (not with RoPE),
/// the final norm and, when untied, the output layer. GPT-3 style (f = 4h, tied): L*(4h^2 + 2hf
/// + 9h + f) + V*h + s*h + 2h. Counts every expert of MoE layers.
double parameter_count(const ModelShape& m);
/// Parameters of one norm: h for RMSNorm (scale), 2h for LayerNorm (scale and shift).
double norm_parameter_count(const ModelShape& m);
/// Parameters one token uses: as parameter_count but with moe_router_topk experts per MoE layer.
double active_parameter_count(const ModelShape& m);
/// Parameters of one transformer layer (dense or MoE): attention (q, k, v, output weights and
/// biases, q/k norms), two norms (2h each for LayerNorm, h for RMSNorm), the MLP (2hf + f + h
/// with biases, 3hf gated) or the router (h x E), experts and shared expert. GPT-3 style:
/// 4h^2 + 2hf + 9h + f.
double layer_parameter_count(const ModelShape& m, bool moe = false);
/// Sum of layer_parameter_count over the layers: the N of scaling laws (embeddings excluded;
/// the multi-token prediction depths too: they are a training objective, not the model).
double non_embedding_parameter_count(const ModelShape& m);
/// Parameters of the multi-token prediction depths (0 without): per depth one transformer layer
/// (mtp_layer_is_moe), the projection 2h x h and three norms (embedding, hidden state, final);
/// the embedding and output layer are the model's own. parameter_count includes them; DeepSeek
/// reports them apart (671B + the MTP module).
double mtp_parameter_count(const ModelShape& m);
/// Element counts of the weight tensors one rank of that stage holds, in the order its forward
/// uses them (the embedding and learned positions; per layer the input norm's, the fused qkv
/// weight and bias, q/k norms, the output projection and bias, the second norm, then the MLP's
/// fused up (gate and up together when gated) and down weights and biases, or the router, each
/// local expert's and the shared expert's; the final norm and output layer), as PyTorch modules
/// hold them. They sum to stage_parameter_count.
std::vector<double> stage_weight_tensors(const ModelShape& m, const WorkloadOptions& o,
                                         int layer_begin, int layer_end, StageRole role,
                                         int pipeline_parallel);
/// The same with the depths on the last stage: {is_first, is_last, is_last}.
std::vector<double> stage_weight_tensors(const ModelShape& m, const WorkloadOptions& o,
                                         int layer_begin, int layer_end, bool is_first,
                                         bool is_last, int pipeline_parallel);
/// Parameters per tensor rank of the last stage's copy of the input embedding, whose gradient
/// is summed with the first stage's after the backward (Megatron's embedding group: the first and
/// last pipeline ranks): the tied output layer, or the multi-token prediction depths' embedding
/// of the shifted tokens. 0 without a copy (p = 1; untied without multi-token prediction).
double embedding_copy_parameters(const ModelShape& m, int tp, int pp);
/// Parameters held by one rank of a stage holding layers [layer_begin, layer_end) (TP-split
/// weights, replicated norms and row-parallel biases; experts split by ep and etp; the
/// embedding on the first stage, the final norm and the output layer on the last: a separate
/// one when untied, a tied copy when p > 1; the multi-token prediction depths with a copy of the
/// input embedding for the shifted tokens, shared with the tied output layer when both sit on
/// the last stage). `expert` (optional) receives the expert part, whose gradients reduce over
/// the expert-data-parallel group.
double stage_parameter_count(const ModelShape& m, const WorkloadOptions& o, int layer_begin,
                             int layer_end, StageRole role, int pp, double* expert = nullptr);
/// The same with the depths on the last stage: {is_first, is_last, is_last}.
double stage_parameter_count(const ModelShape& m, const WorkloadOptions& o, int layer_begin,
                             int layer_end, bool is_first, bool is_last, int pp,
                             double* expert = nullptr);

/// FLOPs of one iteration of `global_batch` sequences: model FLOPs (F + B + W) and hardware
/// FLOPs (plus recomputation). Summed from the ops, so it reproduces 72*B*s*L*h^2*(1 + s/(6h) +
/// V/(12Lh)) and, with full recompute, 96*B*s*L*h^2*(1 + s/(6h) + V/(16Lh)). `model` counts the
/// attention scores over all s x s pairs (Megatron's and NeMo 24.07's convention);
/// `model_causal` halves the attention-core FLOPs for the causal mask (Megatron-Bridge's newer
/// tables); `hardware` is what runs (fused attention skips the masked half).
struct IterationFlops {
  double model = 0;
  double model_causal = 0;
  double hardware = 0;
};
IterationFlops iteration_flops(const ModelShape& m, const WorkloadOptions& o,
                               long long global_batch);

/// Checks a model shape (heads divide into query groups, experts and top-k consistent, ...);
/// returns the first problem as "key: expected ..." or an empty string.
std::string model_shape_problem(const ModelShape& m);

/// ffn_hidden_size, defaulting to 4 * hidden_size when 0.
inline int ffn_size(const ModelShape& m) {
  return m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size;
}

}  // namespace pw::hw
