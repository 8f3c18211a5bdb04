#include "executor/model.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "executor/mlp.h"
#include "hwmodels/transformer.h"

namespace pw::exec {

namespace {

constexpr double kLnEps = 1e-5;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash4(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  return mix(mix(mix(mix(a) ^ b) ^ c) ^ d);
}

// Uniform in [-1, 1), exactly representable (53-bit mantissa).
double uniform(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-52 - 1.0; }

std::uint64_t tensor_code(int layer, int id) {
  return static_cast<std::uint64_t>(layer + 3) * 64 + static_cast<std::uint64_t>(id);
}

}  // namespace

void full_shape(const ModelDims& d, int layer, int id, int* rows, int* cols) {
  const bool moe = layer >= 0 && d.is_moe(layer);
  const int h = d.hidden, f = moe ? d.moe_ffn : d.ffn;
  const int qkv = d.heads * d.head_dim() + 2 * d.kv_heads() * d.head_dim();
  const int mlp = d.swiglu ? 2 * f : f;     // [gate | up]
  const int bias = d.bias ? 1 : 0;          // linear biases: empty tensors without them
  const int experts = moe ? d.experts : 1;  // expert tensors stack every expert's rows
  if (layer == kEmbeddingLayer) {
    *rows = id == 0 ? d.vocab : (d.rope ? 0 : d.seq);
    *cols = h;
    return;
  }
  if (layer == kHeadLayer) {
    *rows = h;
    *cols = d.vocab;
    return;
  }
  *rows = 1;
  switch (id) {
    case kWqkv:
      *rows = h;
      *cols = qkv;
      return;
    case kBqkv:
      *cols = d.bias || d.qkv_bias ? qkv : 0;
      return;
    case kWo:
      *rows = d.heads * d.head_dim();
      *cols = h;
      return;
    case kW1:
      *rows = experts * h;
      *cols = mlp;
      return;
    case kB1:
      *cols = moe ? 0 : bias * mlp;
      return;
    case kW2:
      *rows = experts * f;
      *cols = h;
      return;
    case kBo:
      *cols = bias * h;
      return;
    case kB2:
      *cols = moe ? 0 : bias * h;
      return;
    case kRouter:
      *rows = moe ? h : 1;
      *cols = moe ? d.experts : 0;
      return;
    case kSharedW1:  // [gate | up] with SwiGLU, as the dense MLP's W1
      *rows = moe && d.shared_ffn > 0 ? h : 1;
      *cols = moe ? (d.swiglu ? 2 : 1) * d.shared_ffn : 0;
      return;
    case kSharedW2:
      *rows = moe && d.shared_ffn > 0 ? d.shared_ffn : 1;
      *cols = moe && d.shared_ffn > 0 ? h : 0;
      return;
    case kLn1B:
    case kLn2B:
      *cols = d.rmsnorm ? 0 : h;
      return;
    case kQNormG:
    case kKNormG:
      *cols = d.qk_norm ? d.head_dim() : 0;
      return;
    case kQNormB:
    case kKNormB:
      *cols = d.qk_norm && !d.rmsnorm ? d.head_dim() : 0;
      return;
    default:
      *cols = h;
      return;
  }
}

namespace {

// Local (tp-rank) shape of a tensor.
void local_shape(const ModelDims& d, int layer, int id, int* rows, int* cols) {
  full_shape(d, layer, id, rows, cols);
  if (layer < 0) return;
  const bool moe = d.is_moe(layer);
  const int qkv = d.local_hidden() + 2 * d.local_kv();
  const int mlp = d.local_mlp(layer);
  const int experts = moe ? d.local_experts() : 1;
  if (id == kWqkv || (id == kBqkv && *cols > 0)) *cols = qkv;
  if (id == kWo) *rows = d.local_hidden();
  if (id == kW1) *rows = experts * d.hidden;
  if (id == kW1 || (id == kB1 && *cols > 0)) *cols = mlp;
  if (id == kW2) *rows = experts * (moe ? d.local_moe_ffn() : d.local_ffn());
  if (id == kSharedW1 && *cols > 0) *cols = (d.swiglu ? 2 : 1) * d.local_shared_ffn();
  if (id == kSharedW2 && *cols > 0) *rows = d.local_shared_ffn();
}

double init_value(const ModelDims& d, int layer, int id, int gr, int gc) {
  const double u = uniform(hash4(d.seed, tensor_code(layer, id), static_cast<std::uint64_t>(gr),
                                 static_cast<std::uint64_t>(gc)));
  if (layer == kEmbeddingLayer) return id == 0 ? u : 0.1 * u;
  if (layer == kHeadLayer) return u / std::sqrt(static_cast<double>(d.hidden));
  switch (id) {
    case kLn1G:
    case kLn2G:
    case kQNormG:
    case kKNormG:
      return 1.0 + 0.1 * u;
    case kWqkv:
    case kWo:
    case kW1:
    case kRouter:
    case kSharedW1:
      return u / std::sqrt(static_cast<double>(d.hidden));
    case kSharedW2:
      return u / std::sqrt(static_cast<double>(d.shared_ffn));
    case kW2:
      return u / std::sqrt(static_cast<double>(d.is_moe(layer) ? d.moe_ffn : d.ffn));
    default:
      return 0.02 * u;  // biases and layer-norm shifts
  }
}

// LayerNorm (gamma, beta) or, with `rms`, RMSNorm (gamma only): xhat = (x - mean) * rstd or
// x * rstd, rstd = 1 / sqrt(var + eps) or 1 / sqrt(mean(x^2) + eps).
void norm_forward(const Mat& x, const Mat& gamma, const Mat& beta, bool rms, Mat& xhat,
                  Eigen::VectorXd& rstd, Mat& out) {
  const Eigen::Index n = x.rows(), h = x.cols();
  xhat.resize(n, h);
  rstd.resize(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double mean = rms ? 0.0 : x.row(i).mean();
    const double var = (x.row(i).array() - mean).square().mean();
    rstd(i) = 1.0 / std::sqrt(var + kLnEps);
    xhat.row(i) = (x.row(i).array() - mean) * rstd(i);
  }
  out = xhat.array().rowwise() * gamma.row(0).array();
  if (!rms) out.array().rowwise() += beta.row(0).array();
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = d_out * gamma; RMSNorm
// has no mean to subtract, so its middle term is absent.
Mat norm_backward(const Mat& d_out, const Mat& xhat, const Eigen::VectorXd& rstd, const Mat& gamma,
                  bool rms) {
  Mat dxhat = d_out.array().rowwise() * gamma.row(0).array();
  Mat dx(d_out.rows(), d_out.cols());
  for (Eigen::Index i = 0; i < d_out.rows(); ++i) {
    const double m1 = rms ? 0.0 : dxhat.row(i).mean();
    const double m2 = (dxhat.row(i).array() * xhat.row(i).array()).mean();
    dx.row(i) = rstd(i) * (dxhat.row(i).array() - m1 - xhat.row(i).array() * m2);
  }
  return dx;
}

void add_bias(Mat& m, const Mat& bias) {
  if (bias.size() > 0) m.rowwise() += bias.row(0);  // empty: the model has no linear biases
}

}  // namespace

ModelDims make_model_dims(const ModelShape& shape, const ParallelConfig& config, std::uint64_t seed,
                          const std::string& source) {
  auto need_positive = [&](int v, const char* key) {
    if (v <= 0) throw ConfigError(source, key, fmt::format("expected a positive value, got {}", v));
  };
  need_positive(shape.num_layers, "model.num_layers");
  need_positive(shape.hidden_size, "model.hidden_size");
  need_positive(shape.num_attention_heads, "model.num_attention_heads");
  need_positive(shape.seq_length, "model.seq_length");
  need_positive(shape.vocab_size, "model.vocab_size");
  need_positive(config.tensor_parallel, "parallel.tensor_model_parallel_size");
  need_positive(config.micro_batch_size, "parallel.micro_batch_size");
  // The executor runs the layer options ModelDims lists; a model beyond them is refused, never
  // run as something else.
  if (shape.mla() || shape.mtp_num_layers > 0)
    throw ConfigError(source, shape.mla() ? "model.kv_lora_rank" : "model.mtp_num_layers",
                      shape.mla() ? "the executor runs MHA/GQA/MQA attention; expected no "
                                    "multi-head latent attention (plan and simulate take it)"
                                  : "the executor runs the main model's loss; expected no "
                                    "multi-token prediction depths (plan and simulate take them)");
  if (const std::string problem = hw::model_shape_problem(shape); !problem.empty()) {
    const auto colon = problem.find(':');
    throw ConfigError(source, "model." + problem.substr(0, colon), problem.substr(colon + 2));
  }
  if (shape.num_experts > 0 && shape.bias)
    throw ConfigError(source, "model.add_bias_linear",
                      "the executor runs experts without biases, as today's MoE models have them; "
                      "expected false with experts (plan and simulate take biases)");
  if (config.context_parallel != 1 || config.fp8 != "off")
    throw ConfigError(source,
                      config.context_parallel != 1 ? "config.context_parallel" : "config.fp8",
                      "the executor runs t x p x d (x ep) layouts in fp64/bf16 only; expected "
                      "context_parallel 1 and fp8 off");
  const int ep = config.expert_parallel;
  if (ep < 1 || (ep > 1 && (shape.num_experts % ep != 0 || config.data_parallel % ep != 0)))
    throw ConfigError(source, "config.expert_parallel",
                      fmt::format("expected a divisor of num_experts {} and of data_parallel {} "
                                  "(the executor's expert ranks are data-parallel ranks), got {}",
                                  shape.num_experts, config.data_parallel, ep));
  if (shape.num_experts > 0 && config.expert_tp() != config.tensor_parallel)
    throw ConfigError(source, "config.expert_tensor_parallel",
                      fmt::format("the executor splits experts like the dense MLP: expected {} "
                                  "(tensor_parallel), got {}",
                                  config.tensor_parallel, config.expert_tp()));
  ModelDims d;
  d.num_layers = shape.num_layers;
  d.hidden = shape.hidden_size;
  d.heads = shape.num_attention_heads;
  d.ffn = shape.ffn_hidden_size > 0 ? shape.ffn_hidden_size : 4 * shape.hidden_size;
  d.seq = shape.seq_length;
  d.vocab = shape.vocab_size;
  d.micro_batch = config.micro_batch_size;
  d.tp = config.tensor_parallel;
  d.seed = seed;
  d.groups = shape.num_query_groups;
  d.kv_channels = shape.kv_channels;
  d.swiglu = shape.swiglu;
  d.rmsnorm = shape.rmsnorm;
  d.rope = shape.rope;
  d.bias = shape.bias;
  d.qkv_bias = shape.qkv_bias;
  d.qk_norm = shape.qk_layernorm;
  d.window = static_cast<int>(hw::attention_window(shape));
  d.experts = shape.num_experts;
  d.topk = shape.moe_router_topk;
  d.moe_ffn = shape.num_experts > 0 ? hw::expert_ffn_size(shape) : 0;
  d.shared_ffn = shape.num_experts > 0 ? shape.moe_shared_expert_size : 0;
  d.capacity_factor = shape.num_experts > 0 ? shape.moe_capacity_factor : 0;
  d.ep = ep;
  if (d.experts > 0)
    for (int l = 0; l < d.num_layers; ++l)
      d.moe_layer.push_back(hw::is_moe_layer(shape, l) ? 1 : 0);
  if (d.kv_channels < 0)
    throw ConfigError(source, "model.kv_channels",
                      fmt::format("expected a positive value, got {}", d.kv_channels));
  if (d.kv_channels == 0 && d.hidden % d.heads != 0)
    throw ConfigError(source, "model.num_attention_heads",
                      fmt::format("expected a divisor of hidden_size {}", d.hidden));
  if (d.groups < 0 || d.heads % d.kv_heads() != 0)
    throw ConfigError(
        source, "model.num_query_groups",
        fmt::format("expected a divisor of num_attention_heads {}, got {}", d.heads, d.groups));
  if (d.rope && d.head_dim() % 2 != 0)
    throw ConfigError(source, "model.kv_channels",
                      fmt::format("rotary positions turn pairs of channels: expected an even "
                                  "head dimension, got {}",
                                  d.head_dim()));
  if (d.heads % d.tp != 0 || d.kv_heads() % d.tp != 0 || d.ffn % d.tp != 0 ||
      d.moe_ffn % d.tp != 0 || d.shared_ffn % d.tp != 0)
    throw ConfigError(source, "parallel.tensor_model_parallel_size",
                      fmt::format("expected a divisor of num_attention_heads {}, of the key/value "
                                  "heads {}, of ffn_hidden_size {} and of the experts' ffn {} "
                                  "and {} (shared)",
                                  d.heads, d.kv_heads(), d.ffn, d.moe_ffn, d.shared_ffn));
  return d;
}

ModelDims make_plan_model_dims(const Plan& plan, std::uint64_t seed, const std::string& source) {
  ModelDims dims = make_model_dims(plan.model, plan.config, seed, source);
  if (plan.schedule.placement.num_layers != dims.num_layers)
    throw ConfigError(source, "schedule.placement.num_layers",
                      fmt::format("is {} but model.num_layers is {}",
                                  plan.schedule.placement.num_layers, dims.num_layers));
  return dims;
}

std::string tensor_name(int layer, int id) {
  static constexpr const char* kNames[kNumLayerParams] = {
      "ln1.gamma",    "ln1.beta",    "wqkv",         "bqkv",       "wo",
      "bo",           "ln2.gamma",   "ln2.beta",     "w1",         "b1",
      "w2",           "b2",          "router",       "shared.w1",  "shared.w2",
      "q_norm.gamma", "q_norm.beta", "k_norm.gamma", "k_norm.beta"};
  if (layer == kEmbeddingLayer) return id == 0 ? "embedding.tokens" : "embedding.positions";
  if (layer == kHeadLayer) return "head.w";
  return fmt::format("layer{}.{}", layer, kNames[id]);
}

bool is_expert_tensor(const ModelDims& d, int layer, int id) {
  return layer >= 0 && d.is_moe(layer) && (id == kW1 || id == kW2);
}

void global_coords(const ModelDims& d, int layer, int id, int tp_rank, int ep_rank, int r, int c,
                   int* gr, int* gc) {
  *gr = r;
  *gc = c;
  if (layer < 0) return;
  const bool moe = d.is_moe(layer);
  const int ql = d.local_hidden(), kl = d.local_kv();
  const int fl = moe ? d.local_moe_ffn() : d.local_ffn(), ff = moe ? d.moe_ffn : d.ffn;
  const int qf = d.heads * d.head_dim(), kf = d.kv_heads() * d.head_dim();
  if (moe && id == kW1) {  // local expert e's rows [e h, (e + 1) h)
    const int e = r / d.hidden;
    *gr = (ep_rank * d.local_experts() + e) * d.hidden + r % d.hidden;
  }
  if (moe && id == kW2) {  // local expert e's rows [e fl, (e + 1) fl), a tp slice of its ff
    const int e = r / fl;
    *gr = (ep_rank * d.local_experts() + e) * ff + tp_rank * fl + r % fl;
    return;
  }
  switch (id) {
    case kWqkv:
    case kBqkv:  // columns are [q | k | v]; q split by query heads, k and v by key/value heads
      if (c < ql)
        *gc = tp_rank * ql + c;
      else if (c < ql + kl)
        *gc = qf + tp_rank * kl + (c - ql);
      else
        *gc = qf + kf + tp_rank * kl + (c - ql - kl);
      return;
    case kWo:
      *gr = tp_rank * ql + r;
      return;
    case kW1:
    case kB1:  // [gate | up] with SwiGLU, each split by columns
      *gc = c < fl ? tp_rank * fl + c : ff + tp_rank * fl + (c - fl);
      return;
    case kW2:
      *gr = tp_rank * fl + r;
      return;
    case kSharedW1: {  // [gate | up], each split by columns like the dense W1
      const int fs = d.local_shared_ffn();
      *gc = c < fs ? tp_rank * fs + c : d.shared_ffn + tp_rank * fs + (c - fs);
      return;
    }
    case kSharedW2:
      *gr = tp_rank * d.local_shared_ffn() + r;
      return;
    default:
      return;
  }
}

std::vector<int> microbatch_tokens(const ModelDims& d, std::int64_t g) {
  std::vector<int> t(static_cast<std::size_t>(d.tokens()));
  for (int i = 0; i < d.tokens(); ++i)
    t[i] = static_cast<int>(hash4(d.seed, 0x70c3, static_cast<std::uint64_t>(g), i) % d.vocab);
  return t;
}

std::vector<int> microbatch_targets(const ModelDims& d, std::int64_t g) {
  std::vector<int> t(static_cast<std::size_t>(d.tokens()));
  for (int i = 0; i < d.tokens(); ++i)
    t[i] = static_cast<int>(hash4(d.seed, 0x7a67, static_cast<std::uint64_t>(g), i) % d.vocab);
  return t;
}

StageModel::StageModel(const ModelDims& dims, int layer_begin, int layer_end, bool has_embedding,
                       bool has_head, int tp_rank, int num_microbatches, double loss_scale,
                       TpComm* tp, int ep_rank, ExpertComm* ep)
    : dims_(dims),
      layer_begin_(layer_begin),
      layer_end_(layer_end),
      has_embedding_(has_embedding),
      has_head_(has_head),
      tp_rank_(tp_rank),
      loss_scale_(loss_scale),
      tp_(tp),
      ep_rank_(ep_rank),
      ep_(ep),
      state_(static_cast<std::size_t>(num_microbatches)) {
  init_tensors();
}

void StageModel::init_tensors() {
  auto add = [&](int layer, int id) {
    Tensor t;
    t.layer = layer;
    t.id = id;
    int rows = 0, cols = 0;
    local_shape(dims_, layer, id, &rows, &cols);
    t.value.resize(rows, cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        int gr = 0, gc = 0;
        global_coords(dims_, layer, id, tp_rank_, ep_rank_, r, c, &gr, &gc);
        t.value(r, c) = init_value(dims_, layer, id, gr, gc);
      }
    t.grad = Mat::Zero(rows, cols);
    t.m1 = Mat::Zero(rows, cols);
    t.m2 = Mat::Zero(rows, cols);
    tensors_.push_back(std::move(t));
  };
  if (has_embedding_) {
    embedding_tensor_ = static_cast<int>(tensors_.size());
    add(kEmbeddingLayer, 0);
    add(kEmbeddingLayer, 1);
  }
  first_layer_tensor_ = static_cast<int>(tensors_.size());
  for (int l = layer_begin_; l < layer_end_; ++l)
    for (int id = 0; id < kNumLayerParams; ++id) add(l, id);
  if (has_head_) {
    head_tensor_ = static_cast<int>(tensors_.size());
    add(kHeadLayer, 0);
  }
}

void StageModel::forward(int mb, const Mat* input, std::int64_t global_mb, bool keep_cache) {
  MicrobatchState& st = state_[mb];
  st.global_mb = global_mb;
  if (has_embedding_) {
    const std::vector<int> tok = microbatch_tokens(dims_, global_mb);
    const Mat& table = tensors_[embedding_tensor_].value;
    const Mat& pos = tensors_[embedding_tensor_ + 1].value;
    st.input.resize(dims_.tokens(), dims_.hidden);
    for (int i = 0; i < dims_.tokens(); ++i) {
      st.input.row(i) = table.row(tok[i]);
      if (!dims_.rope) st.input.row(i) += pos.row(i % dims_.seq);
    }
  } else {
    PW_ASSERT(input != nullptr, "a stage without the embedding needs an input");
    st.input = *input;
  }
  run_forward(st);
  if (!keep_cache) st.layers.clear();
}

void StageModel::recompute(int mb) { run_forward(state_[mb]); }

void StageModel::run_forward(MicrobatchState& st) {
  const int nl = layer_end_ - layer_begin_;
  st.layers.resize(static_cast<std::size_t>(nl));
  Mat x = st.input;
  for (int l = 0; l < nl; ++l) {
    x = layer_forward(l, x, st.layers[l]);
  }
  st.output = std::move(x);
  if (!has_head_) return;
  const Mat logits = st.output * tensors_[head_tensor_].value;
  const std::vector<int> target = microbatch_targets(dims_, st.global_mb);
  st.d_logits.resize(logits.rows(), logits.cols());
  double loss = 0;
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const double mx = logits.row(i).maxCoeff();
    const Eigen::RowVectorXd e = (logits.row(i).array() - mx).exp();
    const double sum = e.sum();
    loss += std::log(sum) + mx - logits(i, target[i]);
    st.d_logits.row(i) = e / sum;
    st.d_logits(i, target[i]) -= 1.0;
  }
  st.d_logits *= loss_scale_;
  st.loss = loss * loss_scale_;
}

Mat StageModel::layer_forward(int l, const Mat& x, LayerCache& c) {
  c.x = x;
  norm_forward(x, layer_tensor(l, kLn1G).value, layer_tensor(l, kLn1B).value, dims_.rmsnorm,
               c.xhat1, c.rstd1, c.a);
  c.qkv = c.a * layer_tensor(l, kWqkv).value;
  add_bias(c.qkv, layer_tensor(l, kBqkv).value);
  if (dims_.qk_norm) qk_norm_forward(l, c);
  attention_forward(c);
  Mat y = c.ctx * layer_tensor(l, kWo).value;
  all_reduce(y);
  add_bias(y, layer_tensor(l, kBo).value);
  c.x1 = x + y;
  norm_forward(c.x1, layer_tensor(l, kLn2G).value, layer_tensor(l, kLn2B).value, dims_.rmsnorm,
               c.xhat2, c.rstd2, c.a2);
  Mat z;
  if (dims_.is_moe(layer_begin_ + l)) {
    z = moe_forward(l, c);
    if (dims_.shared_ffn > 0) {  // the shared expert: every token, partial over TP like z
      c.sh_u = c.a2 * layer_tensor(l, kSharedW1).value;
      c.sh_g = mlp_activation(c.sh_u, dims_.swiglu);
      z.noalias() += c.sh_g * layer_tensor(l, kSharedW2).value;
    }
  } else {
    c.u = c.a2 * layer_tensor(l, kW1).value;
    add_bias(c.u, layer_tensor(l, kB1).value);
    c.g = mlp_activation(c.u, dims_.swiglu);
    z = c.g * layer_tensor(l, kW2).value;
  }
  all_reduce(z);
  add_bias(z, layer_tensor(l, kB2).value);
  return c.x1 + z;
}

namespace {

// Columns [col, col + heads * dh) of `m` as one row per (token, head): row i * heads + h.
Mat head_rows(const Mat& m, int col, int heads, int dh) {
  Mat r(m.rows() * heads, dh);
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (int h = 0; h < heads; ++h) r.row(i * heads + h) = m.block(i, col + h * dh, 1, dh);
  return r;
}

void put_head_rows(const Mat& r, int col, int heads, int dh, Mat& m) {
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (int h = 0; h < heads; ++h) m.block(i, col + h * dh, 1, dh) = r.row(i * heads + h);
}

}  // namespace

// Megatron's q_layernorm / k_layernorm: the layer's norm (LayerNorm or RMSNorm) over each head's
// head_dim channels, one weight shared by the heads, on the projected queries and keys before
// the rotary positions; values pass unchanged.
void StageModel::qk_norm_forward(int l, LayerCache& c) {
  const int dh = dims_.head_dim(), lh = dims_.local_heads(), lk = dims_.local_kv_heads();
  const int ql = dims_.local_hidden();
  Mat out;
  norm_forward(head_rows(c.qkv, 0, lh, dh), layer_tensor(l, kQNormG).value,
               layer_tensor(l, kQNormB).value, dims_.rmsnorm, c.qn_hat, c.qn_rstd, out);
  put_head_rows(out, 0, lh, dh, c.qkv);
  norm_forward(head_rows(c.qkv, ql, lk, dh), layer_tensor(l, kKNormG).value,
               layer_tensor(l, kKNormB).value, dims_.rmsnorm, c.kn_hat, c.kn_rstd, out);
  put_head_rows(out, ql, lk, dh, c.qkv);
}

void StageModel::qk_norm_backward(int l, LayerCache& c) {
  const int dh = dims_.head_dim(), lh = dims_.local_heads(), lk = dims_.local_kv_heads();
  const int ql = dims_.local_hidden();
  c.d_qn = head_rows(c.d_qkv, 0, lh, dh);
  c.d_kn = head_rows(c.d_qkv, ql, lk, dh);
  put_head_rows(
      norm_backward(c.d_qn, c.qn_hat, c.qn_rstd, layer_tensor(l, kQNormG).value, dims_.rmsnorm), 0,
      lh, dh, c.d_qkv);
  put_head_rows(
      norm_backward(c.d_kn, c.kn_hat, c.kn_rstd, layer_tensor(l, kKNormG).value, dims_.rmsnorm), ql,
      lk, dh, c.d_qkv);
}

// A TP rank holds its own heads, so its share of the norms' gradients is partial: summed over
// the tensor-parallel group, every rank holds the whole (the weights are replicated).
void StageModel::qk_norm_weight_grads(int l, const LayerCache& c) {
  auto acc = [&](int gamma, int beta, const Mat& d_out, const Mat& xhat) {
    Mat g(dims_.rmsnorm ? 1 : 2, dims_.head_dim());
    g.row(0) = (d_out.array() * xhat.array()).matrix().colwise().sum();
    if (!dims_.rmsnorm) g.row(1) = d_out.colwise().sum();
    all_reduce(g);
    layer_tensor(l, gamma).grad += g.row(0);
    if (!dims_.rmsnorm) layer_tensor(l, beta).grad += g.row(1);
  };
  acc(kQNormG, kQNormB, c.d_qn, c.qn_hat);
  acc(kKNormG, kKNormB, c.d_kn, c.kn_hat);
}

void StageModel::backward_input(int mb, const Mat* d_output) {
  MicrobatchState& st = state_[mb];
  PW_ASSERT(static_cast<int>(st.layers.size()) == layer_end_ - layer_begin_,
            "B needs the forward's saved activations (missing F or R)");
  Mat d;
  if (has_head_) {
    d = st.d_logits * tensors_[head_tensor_].value.transpose();
  } else {
    PW_ASSERT(d_output != nullptr, "a stage without the head needs an output gradient");
    d = *d_output;
  }
  for (int l = layer_end_ - layer_begin_ - 1; l >= 0; --l) d = layer_backward(l, d, st.layers[l]);
  if (has_embedding_)
    st.d_embed = std::move(d);
  else
    st.d_input = std::move(d);
}

Mat StageModel::layer_backward(int l, const Mat& dout, LayerCache& c) {
  c.d_z = dout;
  const bool moe = dims_.is_moe(layer_begin_ + l);
  if (moe) {
    c.d_a2 = moe_backward_input(l, dout, c);
    if (dims_.shared_ffn > 0) {
      c.sh_du = mlp_activation_backward(c.sh_u, dout * layer_tensor(l, kSharedW2).value.transpose(),
                                        dims_.swiglu);
      c.d_a2.noalias() += c.sh_du * layer_tensor(l, kSharedW1).value.transpose();
    }
  } else {
    c.d_u =
        mlp_activation_backward(c.u, dout * layer_tensor(l, kW2).value.transpose(), dims_.swiglu);
    c.d_a2 = c.d_u * layer_tensor(l, kW1).value.transpose();
  }
  all_reduce(c.d_a2);
  // The router is replicated over the TP ranks: its input gradient is whole on every rank.
  if (moe) c.d_a2.noalias() += c.d_router * layer_tensor(l, kRouter).value.transpose();
  c.d_y =
      dout + norm_backward(c.d_a2, c.xhat2, c.rstd2, layer_tensor(l, kLn2G).value, dims_.rmsnorm);
  const Mat d_ctx = c.d_y * layer_tensor(l, kWo).value.transpose();
  c.d_qkv = attention_backward(c, d_ctx);
  if (dims_.qk_norm) qk_norm_backward(l, c);
  c.d_a = c.d_qkv * layer_tensor(l, kWqkv).value.transpose();
  all_reduce(c.d_a);
  return c.d_y +
         norm_backward(c.d_a, c.xhat1, c.rstd1, layer_tensor(l, kLn1G).value, dims_.rmsnorm);
}

void StageModel::layer_weight_grads(int l, const LayerCache& c) {
  auto acc = [&](int id, const Mat& in, const Mat& d_out) {
    layer_tensor(l, id).grad.noalias() += in.transpose() * d_out;
  };
  auto acc_bias = [&](int id, const Mat& d_out) {
    Tensor& t = layer_tensor(l, id);
    if (t.grad.size() > 0) t.grad += d_out.colwise().sum();  // empty: no such tensor
  };
  if (dims_.is_moe(layer_begin_ + l)) {
    moe_weight_grads(l, c);
    acc(kRouter, c.a2, c.d_router);
    if (dims_.shared_ffn > 0) {
      acc(kSharedW2, c.sh_g, c.d_z);
      acc(kSharedW1, c.a2, c.sh_du);
    }
  } else {
    acc(kW2, c.g, c.d_z);
    acc_bias(kB2, c.d_z);
    acc(kW1, c.a2, c.d_u);
    acc_bias(kB1, c.d_u);
  }
  layer_tensor(l, kLn2G).grad += (c.d_a2.array() * c.xhat2.array()).matrix().colwise().sum();
  acc_bias(kLn2B, c.d_a2);
  acc(kWo, c.ctx, c.d_y);
  acc_bias(kBo, c.d_y);
  acc(kWqkv, c.a, c.d_qkv);
  acc_bias(kBqkv, c.d_qkv);
  if (dims_.qk_norm) qk_norm_weight_grads(l, c);
  layer_tensor(l, kLn1G).grad += (c.d_a.array() * c.xhat1.array()).matrix().colwise().sum();
  acc_bias(kLn1B, c.d_a);
}

void StageModel::backward_weight(int mb) {
  MicrobatchState& st = state_[mb];
  PW_ASSERT(st.layers.size() == static_cast<std::size_t>(layer_end_ - layer_begin_),
            "W needs the state saved by F and B");
  for (int l = 0; l < layer_end_ - layer_begin_; ++l) layer_weight_grads(l, st.layers[l]);
  if (has_head_) tensors_[head_tensor_].grad.noalias() += st.output.transpose() * st.d_logits;
  if (has_embedding_) {
    const std::vector<int> tok = microbatch_tokens(dims_, st.global_mb);
    Mat& table = tensors_[embedding_tensor_].grad;
    Mat& pos = tensors_[embedding_tensor_ + 1].grad;
    for (int i = 0; i < dims_.tokens(); ++i) {
      table.row(tok[i]) += st.d_embed.row(i);
      if (!dims_.rope) pos.row(i % dims_.seq) += st.d_embed.row(i);
    }
  }
  // Keep output and d_input: a stage on the same device may still read them (V placement).
  st.layers.clear();
  st.input.resize(0, 0);
  st.d_logits.resize(0, 0);
  st.d_embed.resize(0, 0);
}

void StageModel::zero_grads() {
  for (Tensor& t : tensors_) t.grad.setZero();
}

void StageModel::sgd_step(double lr) {
  for (Tensor& t : tensors_) t.value -= lr * t.grad;
}

void StageModel::adam_step(double lr, int step) {
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
  const double c1 = 1.0 - std::pow(kBeta1, step), c2 = 1.0 - std::pow(kBeta2, step);
  for (Tensor& t : tensors_) {
    t.m1 = kBeta1 * t.m1 + (1 - kBeta1) * t.grad;
    t.m2 = kBeta2 * t.m2 + (1 - kBeta2) * t.grad.cwiseProduct(t.grad);
    t.value.array() -= lr * (t.m1.array() / c1) / ((t.m2.array() / c2).sqrt() + kEps);
  }
}

std::int64_t StageModel::num_parameters() const {
  std::int64_t n = 0;
  for (const Tensor& t : tensors_) n += t.value.size();
  return n;
}

}  // namespace pw::exec
