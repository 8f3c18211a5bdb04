// The model shape's derived widths and layer pattern (declared in hwmodels/transformer.h) and
// its checks (model_shape_problem): one reading of ModelShape for every tier.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "hwmodels/transformer.h"

namespace pw::hw {

int head_dim(const ModelShape& m) {
  return m.kv_channels > 0 ? m.kv_channels : m.hidden_size / std::max(1, m.num_attention_heads);
}
int kv_heads(const ModelShape& m) {
  return m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads;
}
long long qk_head_width(const ModelShape& m) {
  return m.mla() ? static_cast<long long>(m.qk_head_dim) + m.qk_pos_emb_head_dim : head_dim(m);
}
long long v_head_width(const ModelShape& m) { return m.mla() ? m.v_head_dim : head_dim(m); }
long long query_width(const ModelShape& m) {
  return static_cast<long long>(m.num_attention_heads) * qk_head_width(m);
}
long long kv_width(const ModelShape& m) {
  return static_cast<long long>(kv_heads(m)) * qk_head_width(m);
}
long long value_width(const ModelShape& m) {
  return static_cast<long long>(kv_heads(m)) * v_head_width(m);
}
long long attention_output_width(const ModelShape& m) {
  return static_cast<long long>(m.num_attention_heads) * v_head_width(m);
}
int expert_ffn_size(const ModelShape& m) {
  return m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : ffn_size(m);
}

bool is_moe_layer(const ModelShape& m, int layer) {
  return m.num_experts > 0 && layer >= m.moe_first_dense_layers &&
         layer % std::max(1, m.moe_layer_freq) == 0;
}

int moe_layers_in(const ModelShape& m, int begin, int end) {
  if (m.num_experts <= 0) return 0;
  // Multiples of the frequency in [lo, end): those below end minus those below lo (the screen
  // asks this per stage of every configuration, so no loop over layers).
  const int f = std::max(1, m.moe_layer_freq), lo = std::max(begin, m.moe_first_dense_layers);
  if (end <= lo) return 0;
  auto below = [f](int n) { return (n + f - 1) / f; };
  return below(end) - below(lo);
}

bool mtp_layer_is_moe(const ModelShape& m) { return is_moe_layer(m, m.num_layers - 1); }

std::string model_shape_problem(const ModelShape& m) {
  const int a = m.num_attention_heads;
  if (a <= 0) return "num_attention_heads: expected a positive integer";
  if (m.kv_channels == 0 && m.hidden_size % a != 0)
    return fmt::format(
        "num_attention_heads: {} does not divide hidden_size {}; expected a divisor "
        "(or give kv_channels)",
        a, m.hidden_size);
  if (m.window_size < 0)
    return fmt::format(
        "window_size: {}; expected 0 (no window) or the tokens a query attends to "
        "before itself",
        m.window_size);
  if (m.num_query_groups < 0 || (m.num_query_groups > 0 && a % m.num_query_groups != 0))
    return fmt::format(
        "num_query_groups: {} does not divide num_attention_heads {}; expected a "
        "divisor",
        m.num_query_groups, a);
  if (m.q_lora_rank < 0 || m.kv_lora_rank < 0 || m.qk_head_dim < 0 || m.qk_pos_emb_head_dim < 0 ||
      m.v_head_dim < 0)
    return "kv_lora_rank: expected latent ranks and head widths >= 0";
  if (m.mla()) {
    if (m.qk_head_dim < 1 || m.qk_pos_emb_head_dim < 1 || m.v_head_dim < 1)
      return "qk_head_dim: multi-head latent attention (kv_lora_rank > 0) needs qk_head_dim, "
             "qk_pos_emb_head_dim and v_head_dim; expected positive widths";
    if (m.num_query_groups > 0 && m.num_query_groups != a)
      return "num_query_groups: multi-head latent attention has keys and values per head; "
             "expected 0";
    if (m.kv_channels > 0) return "kv_channels: expected 0 with multi-head latent attention";
    if (m.bias || m.qkv_bias || m.qk_layernorm)
      return "add_bias_linear: multi-head latent attention is modelled without linear biases "
             "and q/k norms; expected add_bias_linear, add_qkv_bias and qk_layernorm false";
  } else if (m.q_lora_rank > 0 || m.qk_head_dim > 0 || m.qk_pos_emb_head_dim > 0 ||
             m.v_head_dim > 0) {
    return "kv_lora_rank: q_lora_rank, qk_head_dim, qk_pos_emb_head_dim and v_head_dim "
           "describe multi-head latent attention; expected kv_lora_rank > 0 with them";
  }
  if (m.mtp_num_layers < 0 || m.mtp_num_layers > m.num_layers)
    return fmt::format("mtp_num_layers: expected 0..num_layers ({}), got {}", m.num_layers,
                       m.mtp_num_layers);
  if (m.mtp_num_layers > 0 && !m.rope)
    return "mtp_num_layers: multi-token prediction needs rotary positions (Megatron refuses "
           "learned absolute ones); expected position_embedding_type rope";
  if (m.num_experts < 0) return "num_experts: expected an integer >= 0";
  if (m.num_experts == 0) {
    if (m.moe_router_topk != 0 || m.moe_ffn_hidden_size != 0 || m.moe_shared_expert_size != 0)
      return "num_experts: expected a positive integer when moe_* keys are given";
    return "";
  }
  if (m.moe_router_topk < 1 || m.moe_router_topk > m.num_experts)
    return fmt::format("moe_router_topk: expected 1..num_experts ({}), got {}", m.num_experts,
                       m.moe_router_topk);
  if (m.moe_layer_freq < 1) return "moe_layer_freq: expected a positive integer";
  if (m.moe_first_dense_layers < 0 || m.moe_first_dense_layers >= m.num_layers)
    return fmt::format("moe_first_dense_layers: expected 0..{}, got {}", m.num_layers - 1,
                       m.moe_first_dense_layers);
  if (m.moe_capacity_factor < 0) return "moe_capacity_factor: expected >= 0 (0 = dropless)";
  return "";
}

}  // namespace pw::hw
