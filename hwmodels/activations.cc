// hwmodels' workload model, the bytes a layer holds between its passes: from F until B
// (activations, Korthikanti et al.'s accounting generalised to GQA, gated MLPs, MoE and FP8) and
// from B until W (what the weight gradients read).
#include <algorithm>

#include "hwmodels/layer_dims.h"
#include "hwmodels/transformer.h"

namespace pw::hw {

using detail::Dims;
using detail::dims;
using detail::expert_rows;
using detail::kAct;

namespace {

// Bytes the MLP half of a layer holds from F until B beyond its norm (per rank): the up output,
// the activation output and, for MoE, the router probabilities, the permuted expert input and
// the expert output the combine weights.
// Bytes per element of a linear layer's input saved for its weight gradient: Transformer
// Engine's FP8 layers keep the FP8 cast (1 byte), 16-bit layers the input itself.
double linear_input_bytes(const WorkloadOptions& o) { return o.fp8 ? 1.0 : kAct; }

double mlp_activation_bytes(const ModelShape& m, const WorkloadOptions& o, const Dims& d,
                            bool moe) {
  const double up = d.gated ? 2.0 : 1.0, lin = linear_input_bytes(o);
  // Up-projection output (16-bit, the activation's input) and activation output (down input).
  const double per_width = kAct * up + lin;
  if (!moe) return double(d.tokens) * per_width * double(d.f) / double(d.t);
  const double tokens = double(d.tokens) * d.sp_div;
  const double rows = expert_rows(m, o, d);
  const double fe = double(expert_ffn_size(m)) / std::max(1, o.etp);
  double bytes = 4.0 * tokens * m.num_experts;               // router probabilities (fp32)
  bytes += rows * (lin * double(d.h) + per_width * fe);      // expert input, up, activation
  bytes += kAct * tokens * m.moe_router_topk * double(d.h);  // expert outputs to combine
  if (m.moe_shared_expert_size > 0)
    bytes += double(d.tokens) * per_width * double(m.moe_shared_expert_size) / d.t;
  return bytes;
}

// The same for B until W: weight-GEMM inputs (activation output) and output gradients.
double mlp_weight_grad_bytes(const ModelShape& m, const WorkloadOptions& o, const Dims& d,
                             bool moe) {
  const double up = d.gated ? 2.0 : 1.0, lin = linear_input_bytes(o);
  // Up-projection output gradient (16-bit) and activation output (the down projection's input).
  const double per_width = kAct * up + lin;
  if (!moe) return double(d.tokens) * per_width * double(d.f) / double(d.t);
  const double rows = expert_rows(m, o, d);
  const double fe = double(expert_ffn_size(m)) / std::max(1, o.etp);
  // + the experts' input and their down projection's output gradient.
  double bytes = rows * (per_width * fe + (lin + kAct) * double(d.h));
  if (m.moe_shared_expert_size > 0)
    bytes += double(d.tokens) * per_width * double(m.moe_shared_expert_size) / d.t;
  return bytes;
}

// Attention's bytes held from F until B inside the TP region and, under multi-head latent
// attention, at the latents (per rank). Inside: Q, K, V 2(q + k + v), the attention output (the
// projection's input) 2o (o under FP8), q/k norm inputs. MLA's latents are formed on the rank's
// own tokens (SP-sharded): each latent's norm input (16-bit) and output (the up projection's
// input: 1 byte under FP8); the rotary key part needs nothing saved.
double attention_activation_bytes(const ModelShape& m, const Dims& d, double lin) {
  const double t = double(d.t);
  double bytes = double(d.tokens) * (kAct * double(d.q + d.k + d.vw) + lin * double(d.o)) / t;
  if (m.qk_layernorm) bytes += kAct * double(d.tokens) * double(d.q + d.k) / t;
  if (m.mla()) bytes += double(d.tokens) * d.sp_div * (kAct + lin) * double(d.lq + d.lkv);
  return bytes;
}

// The same for B until W: the column-parallel GEMMs' output gradients and the projection's
// input (per rank); under MLA the up projections' outputs (each head's query, and its key's
// non-rotary part and value), and at the latents the up projections' inputs and the down
// projections' output gradients.
double attention_weight_grad_bytes(const ModelShape& m, const Dims& d, double lin) {
  const double t = double(d.t);
  if (!m.mla()) return double(d.tokens) * (kAct * double(d.q + d.k + d.vw) + lin * double(d.o)) / t;
  const double up_out = double(d.q + d.a * (d.dqk - d.rope + d.dv));
  return double(d.tokens) * (kAct * up_out + lin * double(d.o)) / t +
         double(d.tokens) * d.sp_div *
             (lin * double(d.lq + d.lkv) + kAct * double(d.lq + d.lkv + d.rope));
}

}  // namespace

Bytes layer_activation_bytes(const ModelShape& m, const WorkloadOptions& o, bool moe) {
  Dims d = dims(m, o);
  const double sbh = double(d.s) * double(d.b) * double(d.h);
  const double t = double(d.t);
  if (o.recompute == Recompute::kFull) return {2.0 * sbh * d.sp_div};
  // Outside the TP region (x sbh): norm inputs 4, norm outputs 4 (the qkv and mlp-up inputs: 1
  // byte each under FP8; an MoE layer's second one also feeds the 16-bit router), two dropout
  // masks 2.
  const double lin = linear_input_bytes(o);
  const double replicated = (4.0 + lin + (moe ? kAct : lin) + 2.0) * sbh;
  const double parallel = attention_activation_bytes(m, d, lin);
  double bytes = d.sp ? replicated / t + parallel : replicated + parallel;
  bytes += mlp_activation_bytes(m, o, d, moe);
  bool keep_scores = o.recompute == Recompute::kNone && !o.flash_attention;
  if (keep_scores) bytes += 5.0 * double(d.a) * double(d.s) * double(d.sf) * double(d.b) / t;
  return {bytes};
}

Bytes layer_weight_grad_bytes(const ModelShape& m, const WorkloadOptions& o, bool moe) {
  Dims d = dims(m, o);
  const double sbh = double(d.s) * double(d.b) * double(d.h);
  const double t = double(d.t);
  // Inputs: norm1 out 2, norm2 out 2 (1 byte each under FP8; an MoE layer's second feeds the
  // router); attention output 2q/h (q/h), activation output. Output grads: qkv 2(q + 2kv)/h,
  // proj 2, MLP up and down (2 of it outside the TP region).
  const double lin = linear_input_bytes(o);
  const double replicated = (lin + (moe ? kAct : lin) + 2.0 + (moe ? 0.0 : 2.0)) * sbh;
  const double parallel = attention_weight_grad_bytes(m, d, lin);
  const double mlp = mlp_weight_grad_bytes(m, o, d, moe);
  return {(d.sp ? replicated / t : replicated) + parallel + mlp};
}

}  // namespace pw::hw
