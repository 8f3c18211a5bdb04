#pragma once
/// The real model the CPU executor trains: a stack of pre-norm transformer blocks (norm, causal
/// softmax attention, residual, norm, MLP, residual), token embedding (+ learned positions) on
/// the first stage of a pipeline and a vocabulary projection with cross-entropy loss on the last.
/// Float64 (Eigen). The layer is GPT-3's by default (multi-head attention, GELU MLP, LayerNorm,
/// biases, learned positions) and takes the options of today's models, as Megatron names them:
/// grouped-query / multi-query attention (num_query_groups key/value heads shared by heads / groups
/// query heads each), a head dimension of its own (kv_channels), the gated SwiGLU MLP (silu(x
/// W_gate) * (x W_up), ffn_hidden_size wide), RMSNorm, rotary positions (RoPE, base 10000, rotating
/// pairs (2j, 2j+1) of every query and key head), no linear biases, and a top-k mixture-of-experts
/// MLP on the layers hwmodels' is_moe_layer names (see below). Tensor parallelism is
/// Megatron-style: the QKV and first MLP GEMMs are column-parallel (a rank holds heads / tp query
/// heads, groups / tp key/value heads and ffn / tp columns of gate and of up), the attention output
/// and second MLP GEMMs are row-parallel followed by an all-reduce; in the backward the
/// column-parallel inputs' gradients are all-reduced. Norms, the row-parallel biases, the embedding
/// and the head are replicated across the tensor-parallel group. The output projection is always a
/// tensor of its own (untied), whatever the plan's model says.
///
/// Mixture of experts (dropless, Megatron's default router): logits = x W_router (replicated),
/// each token takes its top-k experts (ties to the lower index) with gates = softmax over those k
/// logits, and its output is sum_j gate_j expert_j(x). Each expert is the layer's MLP (GELU or
/// SwiGLU) moe_ffn wide. With a capacity factor an expert takes at most ceil(cf x tokens x k /
/// experts) of a microbatch's pairs, those of the largest gates (Megatron's "probs" drop policy);
/// a dropped pair adds nothing. A shared expert (an MLP shared_ffn wide, split by TP like the
/// dense one) adds its output for every token. Expert parallelism splits the experts over `ep`
/// ranks of the data-parallel group (Megatron's order: ep rank = data index % ep); a layer's tokens
/// go to their experts' ranks by an all-to-all (dispatch) and come back by another (combine), in
/// the backward likewise. Expert tensor parallelism equals tensor parallelism: an expert's W1 is
/// split by columns and W2 by rows like the dense MLP, partial outputs are all-reduced after the
/// combine. Expert tensors are stacked: W1 is (experts x hidden) x mlp, W2 (experts x moe_ffn) x
/// hidden.
///
/// Weights are a pure function of (seed, tensor, global row, global column), so every rank, layout
/// and the unpipelined reference hold bit-identical weights. The backward is split into an input
/// gradient pass (B: what the previous stage needs) and a weight gradient pass (W: every parameter
/// gradient, from the inputs saved by F and the output gradients saved by B).
#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"

namespace pw::exec {

/// Row-major so that a token's features are contiguous (send buffers are the raw data).
using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Sizes of the executed model, derived from a plan's ModelShape and ParallelConfig.
struct ModelDims {
  int num_layers = 0;
  int hidden = 0;
  int heads = 0;
  int ffn = 0;
  int seq = 0;
  int vocab = 0;
  int micro_batch = 1;  ///< sequences per microbatch
  int tp = 1;           ///< tensor-parallel degree
  std::uint64_t seed = 0;
  int groups = 0;         ///< key/value heads (num_query_groups); 0 = heads (multi-head)
  int kv_channels = 0;    ///< head dimension; 0 = hidden / heads
  bool swiglu = false;    ///< gated MLP: W1 holds [gate | up], each ffn wide
  bool rmsnorm = false;   ///< RMSNorm (scale only): the norms' shift tensors are empty
  bool rope = false;      ///< rotary positions: the position table is empty
  bool bias = true;       ///< linear biases (empty tensors when false)
  bool qkv_bias = false;  ///< biases on the q, k, v projection only (Qwen2's add_qkv_bias)
  bool qk_norm = false;   ///< per-head norms of queries and keys, before RoPE (qk_layernorm)
  int window = 0;  ///< sliding attention window: keys i - window..i (hw::attention_window); 0 = all
  int experts = 0;             ///< routed experts of an MoE layer; 0 = dense model
  int topk = 0;                ///< experts per token
  int moe_ffn = 0;             ///< each expert's ffn width
  int shared_ffn = 0;          ///< the shared expert's ffn width (every token); 0 = none
  double capacity_factor = 0;  ///< tokens an expert takes: ceil(cf * tokens * topk / experts)
  int ep = 1;  ///< expert-parallel degree (divides experts and the data-parallel size)
  std::vector<std::uint8_t> moe_layer;  ///< by layer: 1 = MoE MLP (hwmodels' is_moe_layer)

  int head_dim() const { return kv_channels > 0 ? kv_channels : hidden / heads; }
  int kv_heads() const { return groups > 0 ? groups : heads; }
  int local_heads() const { return heads / tp; }
  int local_kv_heads() const { return kv_heads() / tp; }
  int local_hidden() const { return local_heads() * head_dim(); }  ///< query width per rank
  int local_kv() const { return local_kv_heads() * head_dim(); }   ///< key (and value) width
  int local_ffn() const { return ffn / tp; }
  int tokens() const { return micro_batch * seq; }  ///< rows of an activation matrix
  bool is_moe(int layer) const { return !moe_layer.empty() && moe_layer[layer] != 0; }
  int local_experts() const { return experts / ep; }
  int local_moe_ffn() const { return moe_ffn / tp; }
  int local_shared_ffn() const { return shared_ffn / tp; }
  /// Width of one expert's (or the dense) first GEMM on this rank: [gate | up] with SwiGLU.
  int local_mlp(int layer) const {
    return (swiglu ? 2 : 1) * (is_moe(layer) ? local_moe_ffn() : local_ffn());
  }
  /// The layer GPT-3 has (what the CUDA backend runs): none of the options above.
  bool gpt3_layer() const {
    return (groups == 0 || groups == heads) &&
           (kv_channels == 0 || kv_channels * heads == hidden) && !swiglu && !rmsnorm && !rope &&
           bias && !qk_norm && window == 0 && experts == 0;
  }
};

/// Checks the shape (positive sizes, heads divide hidden, tp divides heads and ffn, ep divides the
/// experts and the data-parallel size) and derives the dims; throws ConfigError with `source`
/// naming the offending model/parallel key.
ModelDims make_model_dims(const ModelShape& shape, const ParallelConfig& config, std::uint64_t seed,
                          const std::string& source);
/// make_model_dims for a plan, also checking that its placement covers the model's layers
/// (ConfigError on schedule.placement.num_layers otherwise). Shared by every backend.
ModelDims make_plan_model_dims(const Plan& plan, std::uint64_t seed, const std::string& source);

/// Per-layer parameter tensors in canonical order (index into LayerTensors).
/// kRouter, kSharedW1 and kSharedW2 are empty on dense layers (and the shared expert's on MoE
/// layers without one); on MoE layers kW1/kW2 stack the rank's experts and kB1/kB2 are empty
/// (experts carry no biases). kQNorm*/kKNorm* are the query and key norms (head_dim wide, shared by
/// the heads, replicated over TP ranks; empty without qk_norm, the shifts also with RMSNorm).
enum LayerParam : int {
  kLn1G,
  kLn1B,
  kWqkv,
  kBqkv,
  kWo,
  kBo,
  kLn2G,
  kLn2B,
  kW1,
  kB1,
  kW2,
  kB2,
  kRouter,
  kSharedW1,
  kSharedW2,
  kQNormG,
  kQNormB,
  kKNormG,
  kKNormB
};
inline constexpr int kNumLayerParams = 19;
/// Non-layer tensors use these pseudo layer ids.
inline constexpr int kEmbeddingLayer = -1;  ///< id 0 = token table (vocab x hidden), 1 = positions
inline constexpr int kHeadLayer = -2;       ///< id 0 = output projection (hidden x vocab)

/// One parameter tensor with its gradient and Adam moments (same shape).
struct Tensor {
  int layer = 0;  ///< model layer, or kEmbeddingLayer / kHeadLayer
  int id = 0;     ///< LayerParam for layers
  Mat value, grad, m1, m2;
};

/// Full-model (tp = 1) shape of a tensor.
void full_shape(const ModelDims& d, int layer, int id, int* rows, int* cols);

/// Name used in reports, e.g. "layer3.wqkv", "embedding.tokens", "head.w".
std::string tensor_name(int layer, int id);

/// The full-model (tp = 1, ep = 1) coordinates of element (r, c) of the (tp rank, ep rank) slice
/// of a tensor.
void global_coords(const ModelDims& d, int layer, int id, int tp_rank, int ep_rank, int r, int c,
                   int* gr, int* gc);
/// True for the tensors expert parallelism splits (an MoE layer's W1 and W2): their gradients are
/// reduced over the ranks holding the same experts, not the whole data-parallel group.
bool is_expert_tensor(const ModelDims& d, int layer, int id);

/// Deterministic synthetic data: token ids and next-token targets of global microbatch `g`.
std::vector<int> microbatch_tokens(const ModelDims& d, std::int64_t g);
std::vector<int> microbatch_targets(const ModelDims& d, std::int64_t g);

/// Tensor-parallel all-reduce used inside the layers (not called when tp = 1). Called a fixed
/// number of times per layer pass, not per action, so an interface is fine here.
class TpComm {
 public:
  virtual ~TpComm() = default;
  /// Sums `m` element-wise over the tensor-parallel group, in place, identically on all ranks.
  virtual void all_reduce_sum(Mat& m) = 0;
};

/// Expert-parallel all-to-all (not called when ep = 1). `send` holds the rows for ep rank 0, then
/// rank 1, ...; `send_counts` has `per` counts for each destination (rows per expert there) and
/// the rows for a destination are the sum of its counts. Fills `recv` with the rows from rank 0,
/// 1, ... and `recv_counts` with each source's `per` counts.
class ExpertComm {
 public:
  virtual ~ExpertComm() = default;
  virtual void all_to_all(const Mat& send, const std::vector<int>& send_counts, int per, Mat& recv,
                          std::vector<int>& recv_counts) = 0;
};

/// The layers [layer_begin, layer_end) of one tensor-parallel rank, plus the embedding and/or
/// head when the stage is first/last in its pipeline, and the per-microbatch saved state.
class StageModel {
 public:
  /// `loss_scale` multiplies every token's cross-entropy (1 / tokens of the whole global batch).
  /// `ep_rank` and `ep` matter only for MoE layers (ep may be null when dims.ep = 1).
  StageModel(const ModelDims& dims, int layer_begin, int layer_end, bool has_embedding,
             bool has_head, int tp_rank, int num_microbatches, double loss_scale, TpComm* tp,
             int ep_rank = 0, ExpertComm* ep = nullptr);

  /// F: runs the stage on `input` (tokens x hidden; ignored when the stage has the embedding,
  /// which embeds global microbatch `global_mb`). With `keep_cache` false only the input is kept
  /// and recompute() must run before the backward.
  void forward(int mb, const Mat* input, std::int64_t global_mb, bool keep_cache);
  /// R: rebuilds the cache of a forward that ran with keep_cache = false (bit-identical).
  void recompute(int mb);
  /// B: input gradient from `d_output` (ignored on the head stage, which starts from the loss).
  /// Saves what backward_weight needs; the result is input_grad(mb).
  void backward_input(int mb, const Mat* d_output);
  /// W: accumulates every parameter gradient of microbatch `mb`, then frees its state.
  void backward_weight(int mb);

  const Mat& output(int mb) const { return state_[mb].output; }
  const Mat& input_grad(int mb) const { return state_[mb].d_input; }
  /// This microbatch's share of the loss (already multiplied by loss_scale).
  double loss(int mb) const { return state_[mb].loss; }

  std::vector<Tensor>& tensors() { return tensors_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  void zero_grads();
  /// Plain SGD: w -= lr * g.
  void sgd_step(double lr);
  /// Adam (bias-corrected), `step` counts from 1.
  void adam_step(double lr, int step);
  /// Number of parameters held by this rank's slice.
  std::int64_t num_parameters() const;
  const ModelDims& dims() const { return dims_; }
  int tp_rank() const { return tp_rank_; }
  int ep_rank() const { return ep_rank_; }

 private:
  struct LayerCache {
    Mat x, xhat1, a, qkv, qk_rot, probs, ctx, x1, xhat2, a2, u, g;  // qk_rot: RoPE only
    Eigen::VectorXd rstd1, rstd2;
    // qk_norm: the normalized queries and keys, one row per (token, head), their 1 / rms, and
    // the gradients reaching the norms' outputs (saved by B for W).
    Mat qn_hat, kn_hat, d_qn, d_kn;
    Eigen::VectorXd qn_rstd, kn_rstd;
    Mat d_qkv, d_a, d_y, d_a2, d_u, d_z;  // saved by B for W
    // MoE layers (u, g, d_u then hold the received rows in local-expert order).
    Mat gates, ypair, xe, d_ye, d_router;  // gates: tokens x k; ypair: expert outputs by pair
    Mat sh_u, sh_g, sh_du;                 // the shared expert's (every token)
    std::vector<int> route;                ///< expert of pair i * k + j
    std::vector<int> pos;          ///< row of pair i * k + j in the dispatch order; -1: dropped
    std::vector<int> send_counts;  ///< pairs sent per expert (all experts, by owner)
    std::vector<int> recv_counts;  ///< rows received per (source rank, local expert)
    std::vector<int> perm;         ///< received row of each local-expert-ordered row
    std::vector<int> expert_off;   ///< local expert e's rows: [expert_off[e], expert_off[e+1])
  };
  struct MicrobatchState {
    Mat input, output, d_input, d_logits, d_embed;
    std::vector<LayerCache> layers;
    std::int64_t global_mb = -1;
    double loss = 0;
  };

  Tensor& layer_tensor(int local_layer, int id) {
    return tensors_[first_layer_tensor_ + local_layer * kNumLayerParams + id];
  }
  void init_tensors();
  void run_forward(MicrobatchState& st);
  Mat layer_forward(int l, const Mat& x, LayerCache& c);
  void attention_forward(LayerCache& c) const;
  Mat layer_backward(int l, const Mat& dout, LayerCache& c);
  // The MoE MLP and its all-to-all exchange (executor/moe_layer.cc).
  Mat moe_forward(int l, LayerCache& c);                          ///< partial over TP ranks
  Mat moe_backward_input(int l, const Mat& dout, LayerCache& c);  ///< partial over TP ranks
  void moe_weight_grads(int l, const LayerCache& c);
  void exchange(const Mat& send, const std::vector<int>& send_counts, Mat& recv,
                std::vector<int>& recv_counts);
  Mat attention_backward(const LayerCache& c, const Mat& d_ctx) const;
  // The query/key norms on c.qkv in place; back through them on c.d_qkv; their weight gradients.
  void qk_norm_forward(int l, LayerCache& c);
  void qk_norm_backward(int l, LayerCache& c);
  void qk_norm_weight_grads(int l, const LayerCache& c);
  void layer_weight_grads(int l, const LayerCache& c);
  void all_reduce(Mat& m) {
    if (tp_ != nullptr && dims_.tp > 1) tp_->all_reduce_sum(m);
  }

  ModelDims dims_;
  int layer_begin_, layer_end_;
  bool has_embedding_, has_head_;
  int tp_rank_;
  double loss_scale_;
  TpComm* tp_;
  int ep_rank_;
  ExpertComm* ep_;
  std::vector<Tensor> tensors_;
  int first_layer_tensor_ = 0;
  int embedding_tensor_ = -1, head_tensor_ = -1;
  std::vector<MicrobatchState> state_;
};

}  // namespace pw::exec
