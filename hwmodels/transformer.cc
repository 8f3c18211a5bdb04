#include "hwmodels/transformer.h"

#include <algorithm>

#include "core/error.h"

namespace pw::hw {

bool parse_recompute(const std::string& s, Recompute* out) {
  if (s == "none")
    *out = Recompute::kNone;
  else if (s == "selective")
    *out = Recompute::kSelective;
  else if (s == "full")
    *out = Recompute::kFull;
  else
    return false;
  return true;
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

WorkloadOptions workload_options(const ParallelConfig& p, bool flash_attention) {
  WorkloadOptions o;
  o.tp = p.tensor_parallel;
  o.micro_batch = p.micro_batch_size;
  o.sequence_parallel = p.sequence_parallel && p.tensor_parallel > 1;
  PW_ASSERT(parse_recompute(p.recompute, &o.recompute), "unvalidated recompute " + p.recompute);
  o.flash_attention = flash_attention;
  return o;
}

namespace {

constexpr double kAct = 2.0;  // bytes per 16-bit activation element

// Shape shorthands for one microbatch on one TP rank.
struct Dims {
  long long s, b, h, a, f, v, t, tokens;
  bool sp;
  double sp_div;  // tokens held per rank outside the TP region: 1/t with SP
};

Dims dims(const ModelShape& m, const WorkloadOptions& o) {
  Dims d{m.seq_length,
         o.micro_batch,
         m.hidden_size,
         m.num_attention_heads,
         ffn_size(m),
         m.vocab_size,
         o.tp,
         0,
         o.sequence_parallel && o.tp > 1,
         1.0};
  d.tokens = d.s * d.b;
  d.sp_div = d.sp ? 1.0 / static_cast<double>(d.t) : 1.0;
  return d;
}

LayerOp gemm(const char* name, long long m, long long n, long long k, long long batch = 1) {
  LayerOp op;
  op.name = name;
  op.gemm = true;
  op.m = m;
  op.n = n;
  op.k = k;
  op.batch = batch;
  op.flops = {2.0 * double(m) * double(n) * double(k) * double(batch)};
  op.bytes = {kAct * double(batch) * double(m * k + k * n + m * n)};
  return op;
}

LayerOp mem(const char* name, double bytes) {
  LayerOp op;
  op.name = name;
  op.bytes = {bytes};
  return op;
}

// The forward ops of one layer, in order.
std::vector<LayerOp> forward_ops(const Dims& d, bool flash, bool attention_core_only) {
  const double th = double(d.tokens * d.h);
  const long long heads = d.b * d.a / d.t;
  const double s2 = double(heads) * double(d.s) * double(d.s);
  std::vector<LayerOp> ops;
  if (!attention_core_only) {
    ops.push_back(mem("layernorm1", 2 * kAct * th * d.sp_div));
    ops.push_back(gemm("qkv", d.tokens, 3 * d.h / d.t, d.h));
  }
  ops.push_back(gemm("attn_scores", d.s, d.s, d.h / d.a, heads));
  if (!flash) {
    ops.push_back(mem("softmax", 2 * kAct * s2));
    ops.push_back(mem("attn_dropout", (2 * kAct + 1) * s2));
  }
  ops.push_back(gemm("attn_context", d.s, d.h / d.a, d.s, heads));
  if (attention_core_only) return ops;
  ops.push_back(gemm("proj", d.tokens, d.h, d.h / d.t));
  ops.push_back(mem("dropout_residual1", (3 * kAct + 1) * th * d.sp_div));
  ops.push_back(mem("layernorm2", 2 * kAct * th * d.sp_div));
  ops.push_back(gemm("mlp_up", d.tokens, d.f / d.t, d.h));
  ops.push_back(mem("gelu", 2 * kAct * double(d.tokens * d.f / d.t)));
  ops.push_back(gemm("mlp_down", d.tokens, d.h, d.f / d.t));
  ops.push_back(mem("dropout_residual2", (3 * kAct + 1) * th * d.sp_div));
  return ops;
}

bool is_attention_core(const LayerOp& op) {
  std::string n = op.name;
  return n == "attn_scores" || n == "attn_context";
}

// B: for weight GEMMs the input gradient dX = dY W^T (m x k from m x n times n x k); for the
// attention GEMMs both operands are activations, so both gradients are input gradients (flash
// attention also recomputes the scores: 5 GEMMs instead of 4). Memory-bound backward kernels
// read the saved input and the gradient and write a gradient: 1.5x the forward traffic.
std::vector<LayerOp> backward_input_ops(const std::vector<LayerOp>& fwd, bool flash) {
  std::vector<LayerOp> ops;
  for (const LayerOp& f : fwd) {
    if (!f.gemm) {
      ops.push_back(mem(f.name, 1.5 * f.bytes.value));
    } else if (is_attention_core(f)) {
      ops.push_back(gemm(f.name, f.m, f.k, f.n, f.batch));  // gradient of the left operand
      ops.push_back(gemm(f.name, f.k, f.n, f.m, f.batch));  // gradient of the right operand
      if (flash && std::string(f.name) == "attn_scores") ops.push_back(f);
    } else {
      ops.push_back(gemm(f.name, f.m, f.k, f.n, f.batch));
    }
  }
  return ops;
}

// A column sum over `rows` of a rows x width gradient: reads it, writes the width-long sum.
LayerOp reduction(const char* name, double rows, double width) {
  return mem(name, kAct * (rows * width + width));
}

// W: dW = X^T dY (k x n from k x m times m x n) for each weight GEMM, then the parameter
// reductions the executor's W also does: each bias gradient is the sum of its GEMM's output
// gradient over tokens, and each layer norm's gamma/beta gradients read the normalised input and
// the output gradient (tokens x h, sharded by t with SP) and write 2h. The row-parallel biases
// (proj, mlp_down) see the SP-sharded output gradient; the column-parallel ones all tokens.
std::vector<LayerOp> backward_weight_ops(const Dims& d, const std::vector<LayerOp>& fwd) {
  std::vector<LayerOp> ops;
  for (const LayerOp& f : fwd) {
    if (f.gemm && !is_attention_core(f)) ops.push_back(gemm(f.name, f.k, f.n, f.m, f.batch));
  }
  const double tokens = double(d.tokens), h = double(d.h);
  const double sharded = tokens * d.sp_div;
  ops.push_back(mem("layernorm1_param_grad", kAct * (2 * sharded * h + 2 * h)));
  ops.push_back(reduction("qkv_bias_grad", tokens, double(3 * d.h / d.t)));
  ops.push_back(reduction("proj_bias_grad", sharded, h));
  ops.push_back(mem("layernorm2_param_grad", kAct * (2 * sharded * h + 2 * h)));
  ops.push_back(reduction("mlp_up_bias_grad", tokens, double(d.f / d.t)));
  ops.push_back(reduction("mlp_down_bias_grad", sharded, h));
  return ops;
}

void add_comm(std::vector<TpComm>* out, CollectiveKind k, double bytes, int count,
              const char* where) {
  out->push_back(TpComm{k, {bytes}, count, where});
}

}  // namespace

std::vector<LayerOp> layer_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  Dims d = dims(m, o);
  bool flash = o.flash_attention;
  switch (pass) {
    case Pass::kForward:
      return forward_ops(d, flash, false);
    case Pass::kBackwardInput:
      return backward_input_ops(forward_ops(d, flash, false), flash);
    case Pass::kBackwardWeight:
      return backward_weight_ops(d, forward_ops(d, flash, false));
    case Pass::kRecompute:
      if (o.recompute == Recompute::kFull) return forward_ops(d, flash, false);
      if (o.recompute == Recompute::kSelective && !flash) return forward_ops(d, flash, true);
      return {};
  }
  return {};
}

std::vector<TpComm> layer_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  std::vector<TpComm> out;
  if (o.tp <= 1) return out;
  Dims d = dims(m, o);
  const double size = kAct * double(d.tokens * d.h);
  bool fwd_like =
      pass == Pass::kForward || (pass == Pass::kRecompute && o.recompute == Recompute::kFull);
  if (fwd_like) {
    if (d.sp) {
      add_comm(&out, CollectiveKind::kAllGather, size, 2, "sp all-gather before qkv/mlp_up");
      add_comm(&out, CollectiveKind::kReduceScatter, size, 2, "sp reduce-scatter after proj/mlp");
    } else {
      add_comm(&out, CollectiveKind::kAllReduce, size, 2, "all-reduce after proj/mlp_down");
    }
  } else if (pass == Pass::kBackwardInput) {
    if (d.sp) {
      add_comm(&out, CollectiveKind::kAllGather, size, 2, "sp all-gather of output gradients");
      add_comm(&out, CollectiveKind::kReduceScatter, size, 2, "sp reduce-scatter of input grads");
    } else {
      add_comm(&out, CollectiveKind::kAllReduce, size, 2, "all-reduce of qkv/mlp_up input grads");
    }
  } else if (pass == Pass::kBackwardWeight && d.sp) {
    // Megatron keeps the layer-norm outputs sharded and gathers them again for dW.
    add_comm(&out, CollectiveKind::kAllGather, size, 2, "sp re-gather of qkv/mlp_up inputs");
  }
  return out;
}

std::vector<LayerOp> embedding_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  Dims d = dims(m, o);
  const double th = double(d.tokens * d.h);
  switch (pass) {
    case Pass::kForward:
      return {mem("embedding_lookup", 3 * kAct * th),
              mem("embedding_dropout", (2 * kAct + 1) * th)};
    case Pass::kBackwardInput:
      return {mem("embedding_dropout", 1.5 * (2 * kAct + 1) * th)};
    case Pass::kBackwardWeight:
      return {mem("embedding_grad", 3 * kAct * th)};
    default:
      return {};
  }
}

std::vector<LayerOp> head_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  Dims d = dims(m, o);
  const double th = double(d.tokens * d.h);
  const double logits = double(d.tokens) * double(d.v) / double(d.t);
  LayerOp logit_gemm = gemm("logits", d.tokens, d.v / d.t, d.h);
  switch (pass) {
    case Pass::kForward:
      // fp32 logits: convert, max, exp-sum, loss (read the fp32 logits three times).
      return {mem("final_layernorm", 2 * kAct * th * d.sp_div), logit_gemm,
              mem("cross_entropy", (kAct + 4.0 * 4) * logits)};
    case Pass::kBackwardInput:
      return {mem("cross_entropy", (4.0 + kAct) * logits), gemm("logits", d.tokens, d.h, d.v / d.t),
              mem("final_layernorm", 1.5 * 2 * kAct * th * d.sp_div)};
    case Pass::kBackwardWeight:  // plus the final layer norm's gamma/beta gradients
      return {gemm("logits", d.h, d.v / d.t, d.tokens),
              mem("final_layernorm_param_grad", kAct * (2 * th * d.sp_div + 2 * double(d.h)))};
    default:
      return {};
  }
}

std::vector<TpComm> embedding_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  std::vector<TpComm> out;
  if (o.tp <= 1 || pass != Pass::kForward) return out;
  Dims d = dims(m, o);
  add_comm(&out, d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
           kAct * double(d.tokens * d.h), 1, "vocab-parallel embedding");
  return out;
}

std::vector<TpComm> head_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  std::vector<TpComm> out;
  if (o.tp <= 1) return out;
  Dims d = dims(m, o);
  const double size = kAct * double(d.tokens * d.h);
  if (pass == Pass::kForward) {
    if (d.sp) add_comm(&out, CollectiveKind::kAllGather, size, 1, "sp all-gather before logits");
    // Vocab-parallel cross-entropy: max, sum of exp and target logit, fp32 per token.
    add_comm(&out, CollectiveKind::kAllReduce, 4.0 * double(d.tokens), 3, "cross-entropy");
  } else if (pass == Pass::kBackwardInput) {
    add_comm(&out, d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, size, 1,
             "logits input gradient");
  }
  return out;
}

Flops total_flops(const std::vector<LayerOp>& ops) {
  Flops f;
  for (const LayerOp& op : ops) f += op.flops;
  return f;
}

TimePs ops_time(const std::vector<LayerOp>& ops, const GpuModel& gpu, DType dtype) {
  TimePs t = 0;
  for (const LayerOp& op : ops) {
    t +=
        op.gemm ? gpu.gemm_time(op.m, op.n, op.k, dtype, op.batch) : gpu.elementwise_time(op.bytes);
  }
  return t;
}

Bytes layer_activation_bytes(const ModelShape& m, const WorkloadOptions& o) {
  Dims d = dims(m, o);
  const double sbh = double(d.s) * double(d.b) * double(d.h);
  const double t = double(d.t);
  if (o.recompute == Recompute::kFull) return {2.0 * sbh * d.sp_div};
  // MLP tensors scale with ffn/(4h) (19sbh of the 34sbh are MLP at f = 4h: 2 + 8 + 8 + 1).
  const double mlp_scale = double(d.f) / (4.0 * double(d.h));
  double replicated = 10.0;                  // LN inputs 4, LN outputs 4, two dropout masks 2
  double parallel = 8.0 + 16.0 * mlp_scale;  // Q, K, V, proj input; MLP up output, GeLU output
  double per_sbh = d.sp ? (replicated + parallel) / t : replicated + parallel / t;
  double bytes = per_sbh * sbh;
  bool keep_scores = o.recompute == Recompute::kNone && !o.flash_attention;
  if (keep_scores) bytes += 5.0 * double(d.a) * double(d.s) * double(d.s) * double(d.b) / t;
  return {bytes};
}

Bytes layer_weight_grad_bytes(const ModelShape& m, const WorkloadOptions& o) {
  Dims d = dims(m, o);
  const double sbh = double(d.s) * double(d.b) * double(d.h);
  const double t = double(d.t);
  const double mlp_scale = double(d.f) / (4.0 * double(d.h));
  // Inputs: LN1 out 2, context 2/t, LN2 out 2, GeLU out 8/t. Output grads: qkv 6/t, proj 2,
  // mlp_up 8/t, mlp_down 2. With SP the replicated terms are sharded too.
  double replicated = 8.0;
  double parallel = 2.0 + 6.0 + 16.0 * mlp_scale;
  return {(d.sp ? (replicated + parallel) / t : replicated + parallel / t) * sbh};
}

StageCosts stage_costs(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                       int layer_begin, int layer_end, bool is_first, bool is_last) {
  PW_ASSERT(layer_begin >= 0 && layer_end >= layer_begin, "bad layer range");
  StageCosts c;
  const double layers = layer_end - layer_begin;
  const Pass passes[] = {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight,
                         Pass::kRecompute};
  TimePs* times[] = {&c.f, &c.b, &c.w, &c.r};
  Flops* flops[] = {&c.f_flops, &c.b_flops, &c.w_flops, &c.r_flops};
  std::vector<TpComm>* comms[] = {&c.comm_f, &c.comm_b, &c.comm_w, &c.comm_r};
  for (int i = 0; i < 4; ++i) {
    auto ops = layer_ops(m, o, passes[i]);
    *times[i] = static_cast<TimePs>(layers) * ops_time(ops, gpu, o.dtype);
    *flops[i] = total_flops(ops) * layers;
    for (TpComm tc : layer_tp_comms(m, o, passes[i])) {
      tc.count *= static_cast<int>(layers);
      if (tc.count > 0) comms[i]->push_back(tc);
    }
    if (is_first) {
      auto e = embedding_ops(m, o, passes[i]);
      *times[i] += ops_time(e, gpu, o.dtype);
      *flops[i] += total_flops(e);
      for (const TpComm& tc : embedding_tp_comms(m, o, passes[i])) comms[i]->push_back(tc);
    }
    if (is_last && passes[i] != Pass::kRecompute) {
      auto hd = head_ops(m, o, passes[i]);
      *times[i] += ops_time(hd, gpu, o.dtype);
      *flops[i] += total_flops(hd);
      for (const TpComm& tc : head_tp_comms(m, o, passes[i])) comms[i]->push_back(tc);
    }
  }
  for (const TpComm& tc : c.comm_f) c.comm_bytes_f += tc.bytes * tc.count;
  for (const TpComm& tc : c.comm_b) c.comm_bytes_b += tc.bytes * tc.count;

  Dims d = dims(m, o);
  const double sbh = double(d.s) * double(d.b) * double(d.h);
  c.m_b = layer_activation_bytes(m, o) * layers;
  c.m_w = layer_weight_grad_bytes(m, o) * layers;
  if (o.recompute != Recompute::kNone) {
    WorkloadOptions plain = o;
    plain.recompute = Recompute::kNone;
    c.m_r = (layer_activation_bytes(m, plain) - layer_activation_bytes(m, o)) * layers;
  }
  if (is_first) c.m_b += Bytes{sbh * d.sp_div};  // embedding dropout mask (1 byte/element)
  if (is_last) {
    const double logits = double(d.tokens) * double(d.v) / double(d.t);
    c.m_b += Bytes{2.0 * sbh * d.sp_div + 4.0 * logits};  // final LN input, fp32 logits
    c.m_w += Bytes{2.0 * sbh + 2.0 * logits};             // logits-GEMM input and output grad
  }
  c.p2p_bytes = {2.0 * sbh * d.sp_div};
  return c;
}

TimePs tp_comm_time(const std::vector<TpComm>& comms, const GroupNetwork& tp_group) {
  TimePs t = 0;
  for (const TpComm& c : comms) {
    t += c.count * collective_time(c.kind, CollectiveAlgo::kAuto, c.bytes, tp_group);
  }
  return t;
}

double layer_parameter_count(const ModelShape& m) {
  const double h = m.hidden_size, f = ffn_size(m);
  return 4 * h * h + 2 * h * f + 9 * h + f;
}

double non_embedding_parameter_count(const ModelShape& m) {
  return m.num_layers * layer_parameter_count(m);
}

double parameter_count(const ModelShape& m) {
  const double h = m.hidden_size;
  return non_embedding_parameter_count(m) + double(m.vocab_size) * h + double(m.seq_length) * h +
         2 * h;
}

double stage_parameter_count(const ModelShape& m, int tp, int layers, bool is_first, bool is_last,
                             int pp) {
  const double h = m.hidden_size, f = ffn_size(m), t = tp;
  // Column-parallel weights and biases split; row-parallel biases and layer norms replicated.
  const double layer = (4 * h * h + 2 * h * f + 3 * h + f) / t + 2 * h + 4 * h;
  double p = layers * layer;
  if (is_first) p += double(m.vocab_size) * h / t + double(m.seq_length) * h;
  if (is_last) {
    p += 2 * h;
    if (pp > 1) p += double(m.vocab_size) * h / t;  // tied output-layer copy
  }
  return p;
}

IterationFlops iteration_flops(const ModelShape& m, const WorkloadOptions& o,
                               long long global_batch) {
  // Per sequence on an unsplit model (FLOPs do not depend on t or the microbatch size).
  auto per_sequence = [&m](WorkloadOptions w, bool with_recompute) {
    w.tp = 1;
    w.micro_batch = 1;
    w.sequence_parallel = false;
    double layer = 0, extra = 0;
    for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight}) {
      layer += total_flops(layer_ops(m, w, p)).value;
      extra += total_flops(head_ops(m, w, p)).value + total_flops(embedding_ops(m, w, p)).value;
    }
    if (with_recompute) layer += total_flops(layer_ops(m, w, Pass::kRecompute)).value;
    return m.num_layers * layer + extra;
  };
  // Model FLOPs count the unfused attention once per pass; hardware FLOPs count what runs.
  WorkloadOptions plain = o;
  plain.flash_attention = false;
  const double b = static_cast<double>(global_batch);
  return IterationFlops{b * per_sequence(plain, false), b * per_sequence(o, true)};
}

}  // namespace pw::hw
