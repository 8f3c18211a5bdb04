#pragma once
/// The real model the CPU executor trains: a stack of pre-norm transformer blocks (norm, causal
/// softmax attention, residual, norm, MLP, residual), token embedding (+ learned positions) on
/// the first stage of a pipeline and a vocabulary projection with cross-entropy loss on the last.
/// Float64 (Eigen). The layer is GPT-3's by default (multi-head attention, GELU MLP, LayerNorm,
/// biases, learned positions) and takes the dense options of today's models, as Megatron names
/// them: grouped-query / multi-query attention (num_query_groups key/value heads shared by
/// heads / groups query heads each), a head dimension of its own (kv_channels), the gated SwiGLU
/// MLP (silu(x W_gate) * (x W_up), ffn_hidden_size wide), RMSNorm, rotary positions (RoPE, base
/// 10000, rotating pairs (2j, 2j+1) of every query and key head) and no linear biases. Tensor
/// parallelism is Megatron-style: the QKV and first MLP GEMMs are column-parallel (a rank holds
/// heads / tp query heads, groups / tp key/value heads and ffn / tp columns of gate and of up),
/// the attention output and second MLP GEMMs are row-parallel followed by an all-reduce; in the
/// backward the column-parallel inputs' gradients are all-reduced. Norms, the row-parallel
/// biases, the embedding and the head are replicated across the tensor-parallel group. The
/// output projection is always a tensor of its own (untied), whatever the plan's model says.
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
  int groups = 0;        ///< key/value heads (num_query_groups); 0 = heads (multi-head)
  int kv_channels = 0;   ///< head dimension; 0 = hidden / heads
  bool swiglu = false;   ///< gated MLP: W1 holds [gate | up], each ffn wide
  bool rmsnorm = false;  ///< RMSNorm (scale only): the norms' shift tensors are empty
  bool rope = false;     ///< rotary positions: the position table is empty
  bool bias = true;      ///< linear biases (empty tensors when false)

  int head_dim() const { return kv_channels > 0 ? kv_channels : hidden / heads; }
  int kv_heads() const { return groups > 0 ? groups : heads; }
  int local_heads() const { return heads / tp; }
  int local_kv_heads() const { return kv_heads() / tp; }
  int local_hidden() const { return local_heads() * head_dim(); }  ///< query width per rank
  int local_kv() const { return local_kv_heads() * head_dim(); }   ///< key (and value) width
  int local_ffn() const { return ffn / tp; }
  int tokens() const { return micro_batch * seq; }  ///< rows of an activation matrix
  /// The layer GPT-3 has (what the CUDA backend runs): none of the options above.
  bool gpt3_layer() const {
    return (groups == 0 || groups == heads) &&
           (kv_channels == 0 || kv_channels * heads == hidden) && !swiglu && !rmsnorm && !rope &&
           bias;
  }
};

/// Checks the shape (positive sizes, heads divide hidden, tp divides heads and ffn) and derives
/// the dims; throws ConfigError with `source` naming the offending model/parallel key.
ModelDims make_model_dims(const ModelShape& shape, const ParallelConfig& config, std::uint64_t seed,
                          const std::string& source);
/// make_model_dims for a plan, also checking that its placement covers the model's layers
/// (ConfigError on schedule.placement.num_layers otherwise). Shared by every backend.
ModelDims make_plan_model_dims(const Plan& plan, std::uint64_t seed, const std::string& source);

/// Per-layer parameter tensors in canonical order (index into LayerTensors).
enum LayerParam : int { kLn1G, kLn1B, kWqkv, kBqkv, kWo, kBo, kLn2G, kLn2B, kW1, kB1, kW2, kB2 };
inline constexpr int kNumLayerParams = 12;
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

/// The full-model (tp = 1) coordinates of element (r, c) of the tp-rank slice of a tensor.
void global_coords(const ModelDims& d, int layer, int id, int tp_rank, int r, int c, int* gr,
                   int* gc);

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

/// The layers [layer_begin, layer_end) of one tensor-parallel rank, plus the embedding and/or
/// head when the stage is first/last in its pipeline, and the per-microbatch saved state.
class StageModel {
 public:
  /// `loss_scale` multiplies every token's cross-entropy (1 / tokens of the whole global batch).
  StageModel(const ModelDims& dims, int layer_begin, int layer_end, bool has_embedding,
             bool has_head, int tp_rank, int num_microbatches, double loss_scale, TpComm* tp);

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

 private:
  struct LayerCache {
    Mat x, xhat1, a, qkv, qk_rot, probs, ctx, x1, xhat2, a2, u, g;  // qk_rot: RoPE only
    Eigen::VectorXd rstd1, rstd2;
    Mat d_qkv, d_a, d_y, d_a2, d_u, d_z;  // saved by B for W
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
  Mat attention_backward(const LayerCache& c, const Mat& d_ctx) const;
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
  std::vector<Tensor> tensors_;
  int first_layer_tensor_ = 0;
  int embedding_tensor_ = -1, head_tensor_ = -1;
  std::vector<MicrobatchState> state_;
};

}  // namespace pw::exec
