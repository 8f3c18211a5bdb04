#include "hwmodels/transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "hwmodels/layer_dims.h"

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
  o.cp = p.context_parallel;
  PW_ASSERT(is_cp_comm_type(p.cp_comm_type), "unvalidated cp_comm_type " + p.cp_comm_type);
  o.cp_comm = p.cp_comm_type == "all_gather" ? CpComm::kAllGather
              : p.cp_comm_type == "a2a"      ? CpComm::kA2a
                                             : CpComm::kP2p;
  o.ep = p.expert_parallel;
  o.etp = p.expert_tp();
  PW_ASSERT(is_fp8_format(p.fp8), "unvalidated fp8 " + p.fp8);
  o.fp8 = p.fp8 != "off";
  o.fp8_amax_reduction = p.fp8_amax_reduction();
  o.tp_comm_overlap = p.tp_comm_overlap && o.sequence_parallel;
  return o;
}

const char* comm_group_name(CommGroup g) {
  switch (g) {
    case CommGroup::kTp:
      return "tp";
    case CommGroup::kCp:
      return "cp";
    case CommGroup::kEp:
      return "ep";
    case CommGroup::kAmax:
      return "fp8 amax";
  }
  return "?";
}

namespace detail {

Dims dims(const ModelShape& m, const WorkloadOptions& o) {
  Dims d{};
  d.cp = std::max(1, o.cp);
  d.sf = m.seq_length;
  d.window = attention_window(m);
  d.s = m.seq_length / d.cp;
  d.b = o.micro_batch;
  d.h = m.hidden_size;
  d.a = m.num_attention_heads;
  d.dqk = qk_head_width(m);
  d.dv = v_head_width(m);
  d.q = query_width(m);
  d.k = kv_width(m);
  d.vw = value_width(m);
  d.o = attention_output_width(m);
  if (m.mla()) {
    d.lq = m.q_lora_rank;
    d.lkv = m.kv_lora_rank;
    d.rope = m.qk_pos_emb_head_dim;
  }
  d.f = ffn_size(m);
  d.v = m.vocab_size;
  d.t = o.tp;
  d.tokens = d.s * d.b;
  d.sp = o.sequence_parallel && o.tp > 1;
  d.sp_div = d.sp ? 1.0 / static_cast<double>(d.t) : 1.0;
  d.gated = m.swiglu;
  d.bias = m.bias;
  return d;
}

double expert_rows(const ModelShape& m, const WorkloadOptions& o, const Dims& d) {
  double rows = double(d.tokens) * d.sp_div * m.moe_router_topk * std::max(1, o.etp);
  if (m.moe_capacity_factor > 0) rows *= m.moe_capacity_factor;
  return rows;
}

}  // namespace detail

using detail::Dims;
using detail::dims;
using detail::expert_rows;
using detail::in_attention_core;
using detail::is_attention_core;
using detail::kAct;
using detail::kFp8Cast;
using detail::tp_paired;

namespace {

LayerOp gemm(const char* name, long long m, long long n, long long k, long long batch = 1,
             bool fp8 = false) {
  LayerOp op;
  op.name = name;
  op.gemm = true;
  op.fp8 = fp8;
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

// Keys each query attends to: all of them, or half on average when fused attention skips the
// causal mask's upper triangle (with context parallelism the load-balanced split gives every
// rank the same half), or a sliding window's share (unfused attention computes every score
// and masks them after).
long long keys_seen(const Dims& d, bool flash) {
  return flash ? fused_attention_keys(d.sf, true, d.window) : d.sf;
}

void push_mlp(std::vector<LayerOp>* ops, const Dims& d, const char* up, const char* act,
              const char* down, long long rows, long long width, long long batch, bool fp8,
              long long n_out) {
  ops->push_back(gemm(up, rows, (d.gated ? 2 : 1) * width, d.h, batch, fp8));
  ops->push_back(mem(act, (d.gated ? 3 : 2) * kAct * double(rows * width * batch)));
  if (fp8) ops->push_back(mem("fp8_cast", kFp8Cast * double(rows * width * batch)));
  ops->push_back(gemm(down, rows, n_out, width, batch, fp8));
}

// Multi-head latent attention's projections (Megatron's MLASelfAttention): the down
// projections are replicated over the TP group and run on the rank's own tokens (SP-sharded),
// the latents are normed there and gathered (the TP region's input) for the column-parallel up
// projections, which give every head its query and its key/value (the key's rotary part comes
// from the down projection, shared by the heads); rotary embedding of the query's and key's
// rotary parts.
void push_mla_projections(std::vector<LayerOp>* ops, const Dims& d, bool fp8) {
  const long long own = static_cast<long long>(double(d.tokens) * d.sp_div);
  const long long heads = d.a / d.t, nope = d.dqk - d.rope;
  if (d.lq > 0) {
    ops->push_back(gemm("q_down", own, d.lq, d.h, 1, fp8));
    ops->push_back(mem("q_latent_norm", 2 * kAct * double(own * d.lq)));
    ops->push_back(gemm("q_up", d.tokens, heads * d.dqk, d.lq, 1, fp8));
  } else {
    ops->push_back(gemm("q_up", d.tokens, heads * d.dqk, d.h, 1, fp8));
  }
  ops->push_back(gemm("kv_down", own, d.lkv + d.rope, d.h, 1, fp8));
  ops->push_back(mem("kv_latent_norm", 2 * kAct * double(own * d.lkv)));
  ops->push_back(gemm("kv_up", d.tokens, heads * (nope + d.dv), d.lkv, 1, fp8));
  ops->push_back(mem("rope", 2 * kAct * double(d.tokens * (heads + 1) * d.rope)));
}

// The forward ops of one layer, in order.
std::vector<LayerOp> forward_ops(const ModelShape& m, const WorkloadOptions& o, const Dims& d,
                                 bool moe, bool attention_core_only) {
  const bool flash = o.flash_attention, fp8 = o.fp8;
  const double th = double(d.tokens * d.h);
  const long long heads = d.b * d.a / d.t;
  const long long keys = keys_seen(d, flash);
  const double s2 = double(heads) * double(d.s) * double(keys);
  std::vector<LayerOp> ops;
  if (!attention_core_only) {
    ops.push_back(mem("layernorm1", 2 * kAct * th * d.sp_div));
    if (m.mla()) {
      push_mla_projections(&ops, d, fp8);
    } else {
      ops.push_back(gemm("qkv", d.tokens, (d.q + d.k + d.vw) / d.t, d.h, 1, fp8));
      if (m.qk_layernorm)
        ops.push_back(mem("qk_layernorm", 2 * kAct * double(d.tokens * (d.q + d.k) / d.t)));
      if (m.rope) ops.push_back(mem("rope", 2 * kAct * double(d.tokens * (d.q + d.k) / d.t)));
    }
  }
  ops.push_back(gemm("attn_scores", d.s, keys, d.dqk, heads));
  ops.back().fused_attention = flash ? 1 : 0;
  if (!flash) {
    ops.push_back(mem("softmax", 2 * kAct * s2));
    ops.push_back(mem("attn_dropout", (2 * kAct + 1) * s2));
  }
  ops.push_back(gemm("attn_context", d.s, d.dv, keys, heads));
  ops.back().fused_attention = flash ? 1 : 0;
  if (attention_core_only) return ops;
  if (fp8) ops.push_back(mem("fp8_cast", kFp8Cast * double(d.tokens * d.o / d.t)));
  ops.push_back(gemm("proj", d.tokens, d.h, d.o / d.t, 1, fp8));
  ops.push_back(mem("dropout_residual1", (3 * kAct + 1) * th * d.sp_div));
  ops.push_back(mem("layernorm2", 2 * kAct * th * d.sp_div));
  if (!moe) {
    push_mlp(&ops, d, "mlp_up", d.gated ? "swiglu" : "gelu", "mlp_down", d.tokens, d.f / d.t, 1,
             fp8, d.h);
  } else {
    const double tokens = double(d.tokens) * d.sp_div;
    const long long E = m.num_experts;
    ops.push_back(gemm("router", static_cast<long long>(tokens), E, d.h));
    ops.push_back(mem("router_topk", 3 * 4.0 * tokens * double(E)));
    const double rows = expert_rows(m, o, d);
    const long long local = std::max<long long>(1, E / std::max(1, o.ep));
    const long long per_expert = static_cast<long long>(std::ceil(rows / double(local)));
    ops.push_back(mem("moe_permute", 2 * kAct * tokens * m.moe_router_topk * double(d.h)));
    // A MoE layer's pre-MLP norm is a kernel of its own (Megatron's layer spec: TENorm where
    // num_experts is set, since the router reads its output too; a dense MLP's fc1 fuses the
    // norm and its FP8 cast), so under FP8 the experts' grouped fc1 (Transformer Engine's
    // GroupedLinear) and the shared expert's fc1 cast their 16-bit inputs themselves.
    if (fp8) ops.push_back(mem("fp8_cast", kFp8Cast * double(per_expert * local * d.h)));
    push_mlp(&ops, d, "expert_up", "expert_act", "expert_down", per_expert,
             expert_ffn_size(m) / std::max(1, o.etp), local, fp8, d.h);
    ops.push_back(mem("moe_unpermute", 2 * kAct * tokens * m.moe_router_topk * double(d.h)));
    if (m.moe_shared_expert_size > 0) {
      if (fp8) ops.push_back(mem("fp8_cast", kFp8Cast * double(d.tokens * d.h)));
      push_mlp(&ops, d, "shared_up", "shared_act", "shared_down", d.tokens,
               m.moe_shared_expert_size / d.t, 1, fp8, d.h);
    }
  }
  ops.push_back(mem("dropout_residual2", (3 * kAct + 1) * th * d.sp_div));
  return ops;
}

}  // namespace

namespace detail {

bool tp_paired(const LayerOp& op, Pass pass) {
  if (!op.gemm) return false;
  const std::string n = op.name;
  const bool column = n == "qkv" || n == "q_up" || n == "kv_up" || n == "mlp_up" ||
                      n == "shared_up" || n == "mtp_eh_proj";
  const bool row = n == "proj" || n == "mlp_down" || n == "shared_down";
  return pass == Pass::kBackwardWeight ? column : column || row;
}

bool tp_overlap_split(const LayerOp& op, Pass pass) {
  if (!tp_paired(op, pass) || pass == Pass::kBackwardWeight) return false;
  if (pass != Pass::kBackwardInput) return true;
  const std::string n = op.name;
  return n == "proj" || n == "mlp_down" || n == "shared_down";
}

bool is_attention_core(const LayerOp& op) {
  std::string n = op.name;
  return n == "attn_scores" || n == "attn_context";
}

bool in_attention_core(const LayerOp& op) {
  const std::string n = op.name;
  return is_attention_core(op) || n == "softmax" || n == "attn_dropout";
}

}  // namespace detail

namespace {

// B: for weight GEMMs the input gradient dX = dY W^T (m x k from m x n times n x k); for the
// attention GEMMs both operands are activations, so both gradients are input gradients (flash
// attention also recomputes the scores: 5 GEMMs instead of 4). Memory-bound backward kernels
// read the saved input and the gradient and write a gradient: 1.5x the forward traffic. FP8
// GEMMs cast their output gradient to FP8 first.
std::vector<LayerOp> backward_input_ops(const std::vector<LayerOp>& fwd, bool flash) {
  std::vector<LayerOp> ops;
  for (const LayerOp& f : fwd) {
    if (!f.gemm) {
      if (std::string(f.name) == "fp8_cast") continue;
      ops.push_back(mem(f.name, 1.5 * f.bytes.value));
    } else if (is_attention_core(f)) {
      const std::size_t first = ops.size();
      ops.push_back(gemm(f.name, f.m, f.k, f.n, f.batch));  // gradient of the left operand
      ops.push_back(gemm(f.name, f.k, f.n, f.m, f.batch));  // gradient of the right operand
      if (flash && std::string(f.name) == "attn_scores") ops.push_back(f);
      for (std::size_t i = first; i < ops.size(); ++i) ops[i].fused_attention = flash ? 2 : 0;
    } else {
      if (f.fp8) ops.push_back(mem("fp8_cast", kFp8Cast * double(f.m * f.n * f.batch)));
      ops.push_back(gemm(f.name, f.m, f.k, f.n, f.batch, f.fp8));
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
// gradient over tokens, and each norm's parameter gradients read the normalised input and the
// output gradient (tokens x h, sharded by t with SP) and write 2h (h for RMSNorm). The
// row-parallel biases (proj, mlp_down) see the SP-sharded output gradient; the column-parallel
// ones all tokens. Models without biases (add_bias_linear false) have no bias reductions.
std::vector<LayerOp> backward_weight_ops(const ModelShape& m, const Dims& d,
                                         const std::vector<LayerOp>& fwd) {
  std::vector<LayerOp> ops;
  for (const LayerOp& f : fwd) {
    if (f.gemm && !is_attention_core(f)) ops.push_back(gemm(f.name, f.k, f.n, f.m, f.batch, f.fp8));
  }
  const double tokens = double(d.tokens), h = double(d.h);
  const double sharded = tokens * d.sp_div;
  const double norm_params = norm_parameter_count(m);
  ops.push_back(mem("layernorm1_param_grad", kAct * (2 * sharded * h + norm_params)));
  ops.push_back(mem("layernorm2_param_grad", kAct * (2 * sharded * h + norm_params)));
  if (d.bias || m.qkv_bias)
    ops.push_back(reduction("qkv_bias_grad", tokens, double((d.q + d.k + d.vw) / d.t)));
  if (d.bias) {
    ops.push_back(reduction("proj_bias_grad", sharded, h));
    for (const LayerOp& f : fwd) {
      const std::string n = f.name;
      if (n == "mlp_up" || n == "shared_up" || n == "expert_up")
        ops.push_back(reduction("mlp_up_bias_grad", double(f.m * f.batch), double(f.n)));
      if (n == "mlp_down" || n == "shared_down" || n == "expert_down")
        ops.push_back(reduction("mlp_down_bias_grad",
                                n == "expert_down" ? double(f.m * f.batch) : sharded, h));
    }
  }
  return ops;
}

void add_comm(std::vector<TpComm>* out, CollectiveKind k, double bytes, int count,
              const char* where, CommGroup g = CommGroup::kTp) {
  out->push_back(TpComm{k, {bytes}, count, where, g});
}

}  // namespace

std::vector<LayerOp> layer_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass, bool moe) {
  Dims d = dims(m, o);
  bool flash = o.flash_attention;
  switch (pass) {
    case Pass::kForward:
      return forward_ops(m, o, d, moe, false);
    case Pass::kBackwardInput:
      return backward_input_ops(forward_ops(m, o, d, moe, false), flash);
    case Pass::kBackwardWeight:
      return backward_weight_ops(m, d, forward_ops(m, o, d, moe, false));
    case Pass::kRecompute:
      if (o.recompute == Recompute::kFull) return forward_ops(m, o, d, moe, false);
      // Selective: the attention core again (Megatron checkpoints core attention; with fused
      // attention that is the fused forward kernel, which held no s x s tensor to begin with).
      if (o.recompute == Recompute::kSelective) return forward_ops(m, o, d, moe, true);
      return {};
  }
  return {};
}

std::vector<TpComm> layer_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass,
                                   bool moe) {
  std::vector<TpComm> out;
  Dims d = dims(m, o);
  const bool fwd_like =
      pass == Pass::kForward || (pass == Pass::kRecompute && o.recompute == Recompute::kFull);
  if (o.tp > 1 && (fwd_like || pass == Pass::kBackwardInput || pass == Pass::kBackwardWeight)) {
    // Each TP region: its column-parallel input `in` is gathered (SP) and its gradient reduced,
    // its row-parallel output `out_size` reduced and its gradient gathered; Megatron keeps the
    // layer-norm outputs sharded and gathers them again for dW. A dense MLP (or MoE shared
    // expert) and attention each have one region; under MLA attention's input is its latents
    // (query latent, or h without one, key/value latent and the rotary key).
    auto region = [&](double in, double out_size, int count) {
      if (pass == Pass::kBackwardWeight) {
        if (d.sp)
          add_comm(&out, CollectiveKind::kAllGather, in, count,
                   "sp re-gather of qkv/mlp_up inputs");
      } else if (d.sp) {
        add_comm(
            &out, CollectiveKind::kAllGather, fwd_like ? in : out_size, count,
            fwd_like ? "sp all-gather before qkv/mlp_up" : "sp all-gather of output gradients");
        add_comm(
            &out, CollectiveKind::kReduceScatter, fwd_like ? out_size : in, count,
            fwd_like ? "sp reduce-scatter after proj/mlp" : "sp reduce-scatter of input grads");
      } else {
        add_comm(
            &out, CollectiveKind::kAllReduce, fwd_like ? out_size : in, count,
            fwd_like ? "all-reduce after proj/mlp_down" : "all-reduce of qkv/mlp_up input grads");
      }
    };
    const double size = kAct * double(d.tokens * d.h);
    const int regions = moe && m.moe_shared_expert_size == 0 ? 1 : 2;
    if (!m.mla()) {
      region(size, size, regions);
    } else {
      region(kAct * double(d.tokens * ((d.lq > 0 ? d.lq : d.h) + d.lkv + d.rope)), size, 1);
      if (regions == 2) region(size, size, 1);
    }
  }
  // Context parallelism as a ring (cp_ring_exposed): every pass that runs the attention core
  // (F, B, any recompute) makes cp - 1 steps in which each rank sends the keys and values it
  // holds (its own tokens' at first) to the next rank; the backward's steps also carry the
  // gradients of the keys and values the rank has seen, towards their owner.
  // The other forms are waited for: all_gather gathers every rank's keys and values before
  // attention (the backward gathers them again and reduce-scatters their gradients); a2a
  // (Ulysses) sends each rank's queries, keys and values for the heads another rank attends to
  // (its tokens x (q + k + v) / t, an all-to-all) and the attention output back (tokens x o /
  // t), the backward the same for the gradients.
  if (d.cp > 1 && pass != Pass::kBackwardWeight &&
      (pass != Pass::kRecompute || o.recompute != Recompute::kNone)) {
    const double kv = kAct * double((d.k + d.vw) / d.t) * double(d.tokens);
    const bool bwd = pass == Pass::kBackwardInput;
    switch (o.cp_comm) {
      case CpComm::kP2p:
        if (bwd)
          add_comm(&out, CollectiveKind::kSendRecv, 2 * kv, d.cp - 1,
                   "cp ring step: keys/values and their gradients", CommGroup::kCp);
        else
          add_comm(&out, CollectiveKind::kSendRecv, kv, d.cp - 1, "cp ring step: keys/values",
                   CommGroup::kCp);
        break;
      case CpComm::kAllGather:
        add_comm(&out, CollectiveKind::kAllGather, kv * d.cp, 1, "cp all-gather of keys/values",
                 CommGroup::kCp);
        if (bwd)
          add_comm(&out, CollectiveKind::kReduceScatter, kv * d.cp, 1,
                   "cp reduce-scatter of key/value gradients", CommGroup::kCp);
        break;
      case CpComm::kA2a:
        add_comm(&out, CollectiveKind::kAllToAll,
                 kAct * double((d.q + d.k + d.vw) / d.t) * d.tokens, 1,
                 bwd ? "cp all-to-all of query/key/value gradients" : "cp all-to-all of q/k/v",
                 CommGroup::kCp);
        add_comm(&out, CollectiveKind::kAllToAll, kAct * double(d.o / d.t) * d.tokens, 1,
                 bwd ? "cp all-to-all of output gradients" : "cp all-to-all of the output",
                 CommGroup::kCp);
        break;
    }
  }
  // Expert parallelism: tokens go to the ranks holding their experts and come back (dispatch and
  // combine, in the forward and again for the gradients in the backward).
  if (moe && o.ep > 1 && (fwd_like || pass == Pass::kBackwardInput)) {
    const double send = kAct * double(d.tokens) * d.sp_div * m.moe_router_topk * double(d.h);
    add_comm(&out, CollectiveKind::kAllToAll, send, 2, "moe dispatch/combine", CommGroup::kEp);
  }
  if (moe && o.etp > 1 && (fwd_like || pass == Pass::kBackwardInput)) {
    const double rows = expert_rows(m, o, d);
    add_comm(&out, CollectiveKind::kAllGather, kAct * rows * double(d.h), 1,
             "expert-tp all-gather of tokens");
    add_comm(&out, CollectiveKind::kReduceScatter, kAct * rows * double(d.h), 1,
             "expert-tp reduce-scatter of outputs");
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

namespace {

// One multi-token prediction depth's forward kernels besides its transformer layer, embedding
// and head (Megatron's MultiTokenPredictionLayer): the norms of the shifted tokens' embedding
// and of the hidden state, their concatenation (2h on the rank's own tokens, sharded with SP),
// and the column-parallel projection 2h -> h/t without bias (under FP8 when the layers are).
std::vector<LayerOp> mtp_forward_ops(const WorkloadOptions& o, const Dims& d) {
  const double own = double(d.tokens * d.h) * d.sp_div;
  std::vector<LayerOp> ops{mem("mtp_norms", 2 * 2 * kAct * own),
                           mem("mtp_concat", 2 * 2 * kAct * own)};
  if (o.fp8) ops.push_back(mem("fp8_cast", kFp8Cast * 2 * own));
  ops.push_back(gemm("mtp_eh_proj", d.tokens, d.h / d.t, 2 * d.h, 1, o.fp8));
  return ops;
}

}  // namespace

std::vector<LayerOp> mtp_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  if (m.mtp_num_layers <= 0) return {};
  Dims d = dims(m, o);
  switch (pass) {
    case Pass::kForward:
      return mtp_forward_ops(o, d);
    case Pass::kBackwardInput:
      return backward_input_ops(mtp_forward_ops(o, d), false);
    case Pass::kBackwardWeight: {  // the projection's weights and the two norms' parameters
      const double own = double(d.tokens * d.h) * d.sp_div;
      return {gemm("mtp_eh_proj", 2 * d.h, d.h / d.t, d.tokens, 1, o.fp8),
              mem("mtp_norms_param_grad", 2 * kAct * (2 * own + norm_parameter_count(m)))};
    }
    case Pass::kRecompute:  // full recomputation checkpoints the depth at its inputs
      if (o.recompute == Recompute::kFull) return mtp_forward_ops(o, d);
      return {};
  }
  return {};
}

std::vector<TpComm> mtp_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass) {
  std::vector<TpComm> out;
  if (m.mtp_num_layers <= 0) return out;
  Dims d = dims(m, o);
  if (d.cp > 1 && pass == Pass::kForward) {
    // roll_tensor (megatron/core/transformer/multi_token_prediction.py) with a CP group: each
    // rank sends the first element of each of its two sequence chunks, per sequence, to its
    // previous and next CP rank and waits. Per depth the layer rolls its input ids and position
    // ids (int64) and the loss rolls the labels (int64) and the loss mask (float32). Rolled
    // once, in the forward (the rolled ids are kept, not recomputed).
    const double ids = 8.0 * double(d.b), mask = 4.0 * double(d.b);
    out.push_back(TpComm{
        CollectiveKind::kSendRecv, {ids}, 3, "mtp cp roll of token ids", CommGroup::kCp, true});
    out.push_back(TpComm{CollectiveKind::kSendRecv,
                         {mask},
                         1,
                         "mtp cp roll of the loss mask",
                         CommGroup::kCp,
                         true});
  }
  if (o.tp <= 1) return out;
  const double h = kAct * double(d.tokens * d.h);
  const bool fwd_like =
      pass == Pass::kForward || (pass == Pass::kRecompute && o.recompute == Recompute::kFull);
  // The projection's output (h/t wide) is gathered over TP, then split again by SP (free): in
  // F an all-gather of its input (SP) and of its output; in B the split's gradient gathered
  // (SP) and the input gradient reduced; in W its input gathered again (SP).
  if (fwd_like) {
    if (d.sp) add_comm(&out, CollectiveKind::kAllGather, 2 * h, 1, "mtp all-gather before eh_proj");
    add_comm(&out, CollectiveKind::kAllGather, h, 1, "mtp all-gather of eh_proj output");
  } else if (pass == Pass::kBackwardInput) {
    if (d.sp) add_comm(&out, CollectiveKind::kAllGather, h, 1, "mtp all-gather of sp gradients");
    add_comm(&out, d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, 2 * h, 1,
             "mtp eh_proj input gradient");
  } else if (pass == Pass::kBackwardWeight && d.sp) {
    add_comm(&out, CollectiveKind::kAllGather, 2 * h, 1, "mtp re-gather of eh_proj input");
  }
  return out;
}

Flops total_flops(const std::vector<LayerOp>& ops) {
  Flops f;
  for (const LayerOp& op : ops) f += op.flops;
  return f;
}

long long fused_attention_keys(long long seq_k, bool causal, long long window) {
  if (!causal) return seq_k;
  if (window <= 0 || window >= seq_k) return seq_k / 2;
  return window * (2 * seq_k - window) / (2 * seq_k);
}

long long attention_window(const ModelShape& m) {
  return m.window_size > 0 && m.window_size < m.seq_length - 1 ? m.window_size : 0;
}

double fused_attention_flops(long long heads, long long seq_q, long long seq_k, long long head_dim,
                             bool causal, bool backward) {
  const double gemm = 2.0 * double(seq_q) * double(fused_attention_keys(seq_k, causal)) *
                      double(head_dim) * double(heads);
  return (backward ? 5.0 : 2.0) * gemm;
}

TimePs ops_time(const std::vector<LayerOp>& ops, const GpuModel& gpu, DType dtype, Pass pass) {
  const bool backward = pass == Pass::kBackwardInput || pass == Pass::kBackwardWeight;
  TimePs t = 0;
  for (const LayerOp& op : ops) {
    if (op.fused_attention > 0) {
      const TimePs a = gpu.fused_attention_time(op.flops, dtype, op.fused_attention == 2);
      if (a >= 0) {
        t += a;
        continue;
      }
    }
    t += op.gemm ? gpu.gemm_time(op.m, op.n, op.k, op.fp8 ? DType::kFp8 : dtype, op.batch)
                 : gpu.elementwise_time(op.bytes, backward);
  }
  return t;
}

}  // namespace pw::hw
