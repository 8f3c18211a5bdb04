// Parameter counts of the workload model (declared in hwmodels/transformer.h): every layer kind,
// the embeddings and the head, and what one rank of a stage holds under TP, EP and expert TP.
#include <algorithm>
#include <array>
#include <vector>

#include "hwmodels/transformer.h"

namespace pw::hw {

namespace {

// The weight tensors of one module as PyTorch holds them (element counts, in forward order):
// the one place their shapes are written; the parameter counts below are their sums.
struct Tensors {
  std::array<double, 10> n{};
  int size = 0;
  void push(double x) {
    if (x > 0) n[static_cast<std::size_t>(size++)] = x;
  }
  double sum() const {
    double s = 0;
    for (int i = 0; i < size; ++i) s += n[static_cast<std::size_t>(i)];
    return s;
  }
  void append_to(std::vector<double>* out) const {
    out->insert(out->end(), n.begin(), n.begin() + size);
  }
  void append(const Tensors& o) {
    for (int i = 0; i < o.size; ++i) push(o.n[static_cast<std::size_t>(i)]);
  }
};

// A LayerNorm's scale and shift, or an RMSNorm's scale.
Tensors norm_tensors(const ModelShape& m) {
  Tensors t;
  t.push(m.hidden_size);
  if (!m.rmsnorm) t.push(m.hidden_size);
  return t;
}

// One MLP of width f: the fused up weight (gate and up together when gated), its bias, the down
// weight and bias. `split` divides the column-parallel part (weights, up bias); the down bias
// (row-parallel) is not split.
Tensors mlp_tensors(const ModelShape& m, double f, double split) {
  const double h = m.hidden_size, up = m.swiglu ? 2.0 : 1.0;
  Tensors t;
  t.push(up * h * f / split);
  if (m.bias) t.push(up * f / split);
  t.push(h * f / split);
  if (m.bias) t.push(h);
  return t;
}

// Attention: the fused qkv weight and bias (column-parallel, split by t), the q/k norms, the
// output projection (row-parallel) and its bias.
Tensors attention_tensors(const ModelShape& m, double tp) {
  const double h = m.hidden_size, q = double(query_width(m)), kv = double(kv_width(m));
  Tensors t;
  if (m.mla()) {
    // Multi-head latent attention: the down projections and the latents' norms are replicated
    // over the TP group; the up projections (column-parallel) and the output projection
    // (row-parallel) split by t. Each head's key/value up projection gives its key's
    // non-rotary part and its value.
    const double lq = m.q_lora_rank, lkv = m.kv_lora_rank, heads = m.num_attention_heads;
    auto norm = [&](double w) {
      t.push(w);
      if (!m.rmsnorm) t.push(w);
    };
    if (lq > 0) {
      t.push(h * lq);
      norm(lq);
      t.push(lq * q / tp);
    } else {
      t.push(h * q / tp);
    }
    t.push(h * (lkv + m.qk_pos_emb_head_dim));
    norm(lkv);
    t.push(lkv * heads * (m.qk_head_dim + m.v_head_dim) / tp);
    t.push(double(attention_output_width(m)) * h / tp);
    return t;
  }
  t.push(h * (q + 2 * kv) / tp);
  if (m.bias || m.qkv_bias) t.push((q + 2 * kv) / tp);
  if (m.qk_layernorm)
    for (int k = 0; k < (m.rmsnorm ? 2 : 4); ++k) t.push(head_dim(m));
  t.push(double(attention_output_width(m)) * h / tp);
  if (m.bias) t.push(h);
  return t;
}

// One multi-token prediction depth's own weights besides its layer: the embedding's and the
// hidden state's norms, the projection 2h -> h (column-parallel, split by `tp`, no bias), then
// (after the layer) the final norm.
Tensors mtp_input_tensors(const ModelShape& m, double tp) {
  Tensors t = norm_tensors(m);
  t.append(norm_tensors(m));
  t.push(2.0 * m.hidden_size * m.hidden_size / tp);
  return t;
}
double mtp_own_params(const ModelShape& m, double tp) {
  return mtp_input_tensors(m, tp).sum() + norm_parameter_count(m);
}

double router_params(const ModelShape& m) { return double(m.hidden_size) * m.num_experts; }

double mlp_params(const ModelShape& m, double f, double split) {
  return mlp_tensors(m, f, split).sum();
}

// Expert and router parameters of one MoE MLP held by a rank with ep / etp splits.
double moe_params(const ModelShape& m, int ep, int etp, double t, double* expert) {
  const double E = m.num_experts;
  const double experts = (E / ep) * mlp_params(m, expert_ffn_size(m), etp);
  if (expert) *expert += experts;
  double p = experts + router_params(m);  // the router is replicated
  if (m.moe_shared_expert_size > 0) p += mlp_params(m, m.moe_shared_expert_size, t);
  return p;
}

double layer_params(const ModelShape& m, bool moe, double t, int ep, int etp, double* expert) {
  const double mlp = moe ? moe_params(m, ep, etp, t, expert) : mlp_params(m, ffn_size(m), t);
  return attention_tensors(m, t).sum() + 2.0 * norm_parameter_count(m) + mlp;
}

double embedding_params(const ModelShape& m) {
  return double(m.vocab_size) * m.hidden_size +
         (m.rope ? 0.0 : double(m.seq_length) * m.hidden_size);
}

}  // namespace

double norm_parameter_count(const ModelShape& m) { return norm_tensors(m).sum(); }

double layer_parameter_count(const ModelShape& m, bool moe) {
  return layer_params(m, moe, 1, 1, 1, nullptr);
}

double non_embedding_parameter_count(const ModelShape& m) {
  const int moe = moe_layers_in(m, 0, m.num_layers);
  return (m.num_layers - moe) * layer_parameter_count(m, false) +
         moe * layer_parameter_count(m, true);
}

double mtp_parameter_count(const ModelShape& m) {
  if (m.mtp_num_layers <= 0) return 0;
  return m.mtp_num_layers * (layer_parameter_count(m, mtp_layer_is_moe(m)) + mtp_own_params(m, 1));
}

double parameter_count(const ModelShape& m) {
  const double out = m.untie_embeddings ? double(m.vocab_size) * m.hidden_size : 0.0;
  return non_embedding_parameter_count(m) + embedding_params(m) + norm_parameter_count(m) + out +
         mtp_parameter_count(m);
}

double active_parameter_count(const ModelShape& m) {
  if (m.num_experts == 0) return parameter_count(m);
  const int moe =
      moe_layers_in(m, 0, m.num_layers) + (mtp_layer_is_moe(m) ? std::max(0, m.mtp_num_layers) : 0);
  // Per MoE layer, top-k experts instead of all of them.
  const double per_expert = mlp_params(m, expert_ffn_size(m), 1);
  return parameter_count(m) - double(moe) * (m.num_experts - m.moe_router_topk) * per_expert;
}

double embedding_copy_parameters(const ModelShape& m, int tp, int pp) {
  if (pp <= 1 || (m.untie_embeddings && m.mtp_num_layers == 0)) return 0;
  return double(m.vocab_size) * m.hidden_size / tp;
}

double stage_parameter_count(const ModelShape& m, const WorkloadOptions& o, int layer_begin,
                             int layer_end, bool is_first, bool is_last, int pp, double* expert) {
  return stage_parameter_count(m, o, layer_begin, layer_end, StageRole{is_first, is_last, is_last},
                               pp, expert);
}

double stage_parameter_count(const ModelShape& m, const WorkloadOptions& o, int layer_begin,
                             int layer_end, StageRole role, int pp, double* expert) {
  const bool is_first = role.first, is_last = role.last;
  const double t = o.tp, h = m.hidden_size;
  if (expert) *expert = 0;
  const int moe = moe_layers_in(m, layer_begin, layer_end);
  const int dense = layer_end - layer_begin - moe;
  double p = dense * layer_params(m, false, t, o.ep, o.etp, nullptr);
  if (moe > 0) {
    // One MoE layer's count, added once per MoE layer (the same sums, in the same order, as
    // counting every layer: the screen asks this for millions of configurations).
    double one_expert = 0;
    const double one = layer_params(m, true, t, o.ep, o.etp, &one_expert);
    for (int i = 0; i < moe; ++i) {
      p += one;
      if (expert) *expert += one_expert;
    }
  }
  if (is_first) p += double(m.vocab_size) * h / t + (m.rope ? 0.0 : double(m.seq_length) * h);
  if (is_last) {
    p += norm_parameter_count(m);
    // Output layer: its own when untied; a copy of the input embedding when tied and p > 1.
    p += m.untie_embeddings ? double(m.vocab_size) * h / t : embedding_copy_parameters(m, o.tp, pp);
  }
  if (role.mtp && m.mtp_num_layers > 0) {
    // Per depth: two norms, the projection (column-parallel), one layer, the final norm; and a
    // copy of the input embedding for the shifted tokens: with the loss, when untied and p > 1
    // (tied, the output layer's copy serves both); on a stage of its own, always (Megatron
    // builds the embedding where mtp_process is, tied or not) unless that stage is the first,
    // whose input embedding serves (one embedding where pre_process and mtp_process meet).
    double one_expert = 0;
    const double layer = layer_params(m, mtp_layer_is_moe(m), t, o.ep, o.etp, &one_expert);
    p += m.mtp_num_layers * (layer + mtp_own_params(m, t));
    if (expert) *expert += m.mtp_num_layers * one_expert;
    if (is_last) {
      if (m.untie_embeddings) p += embedding_copy_parameters(m, o.tp, pp);
    } else if (!is_first) {
      p += double(m.vocab_size) * h / t;
    }
  }
  return p;
}

namespace {

// The tensors of layer_params, in forward order.
void layer_tensors(const ModelShape& m, bool moe, const WorkloadOptions& o,
                   std::vector<double>* out) {
  norm_tensors(m).append_to(out);
  attention_tensors(m, o.tp).append_to(out);
  norm_tensors(m).append_to(out);
  if (!moe) {
    mlp_tensors(m, ffn_size(m), o.tp).append_to(out);
    return;
  }
  out->push_back(router_params(m));
  const Tensors expert = mlp_tensors(m, expert_ffn_size(m), o.etp);
  for (int e = 0; e < m.num_experts / o.ep; ++e) expert.append_to(out);
  if (m.moe_shared_expert_size > 0) mlp_tensors(m, m.moe_shared_expert_size, o.tp).append_to(out);
}

}  // namespace

std::vector<double> stage_weight_tensors(const ModelShape& m, const WorkloadOptions& o,
                                         int layer_begin, int layer_end, bool is_first,
                                         bool is_last, int pipeline_parallel) {
  return stage_weight_tensors(m, o, layer_begin, layer_end, StageRole{is_first, is_last, is_last},
                              pipeline_parallel);
}

std::vector<double> stage_weight_tensors(const ModelShape& m, const WorkloadOptions& o,
                                         int layer_begin, int layer_end, StageRole role,
                                         int pipeline_parallel) {
  const bool is_first = role.first, is_last = role.last;
  std::vector<double> out;
  const double h = m.hidden_size;
  if (is_first) {
    out.push_back(double(m.vocab_size) * h / o.tp);
    if (!m.rope) out.push_back(double(m.seq_length) * h);
  }
  for (int l = layer_begin; l < layer_end; ++l) layer_tensors(m, is_moe_layer(m, l), o, &out);
  const double copy = embedding_copy_parameters(m, o.tp, pipeline_parallel);
  if (is_last) {
    norm_tensors(m).append_to(&out);
    if (m.untie_embeddings)
      out.push_back(double(m.vocab_size) * h / o.tp);
    else if (copy > 0)
      out.push_back(copy);
  }
  if (role.mtp) {
    for (int k = 0; k < m.mtp_num_layers; ++k) {  // as stage_parameter_count
      if (k == 0 && !is_last && !is_first) out.push_back(double(m.vocab_size) * h / o.tp);
      if (k == 0 && is_last && m.untie_embeddings && copy > 0) out.push_back(copy);
      mtp_input_tensors(m, o.tp).append_to(&out);
      layer_tensors(m, mtp_layer_is_moe(m), o, &out);
      norm_tensors(m).append_to(&out);
    }
  }
  return out;
}

}  // namespace pw::hw
