#include "hwmodels/hf_config.h"

#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/file_io.h"
#include "core/input_limits.h"
#include "hwmodels/transformer.h"

namespace pw::hw {
namespace {

using Json = nlohmann::json;

// Fields that do not change a training step's cost or memory in pipewright's model.
const std::set<std::string> kNeutral = {
    "architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype",
    "dtype", "transformers_version", "initializer_range", "rms_norm_eps", "rope_theta",
    "rope_scaling", "use_cache", "_name_or_path", "max_position_embeddings", "pretraining_tp",
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob",
    "attention_dropout", "max_window_layers", "use_sliding_window", "sliding_window",
    "tie_word_embeddings", "hidden_act", "attention_bias", "mlp_bias", "head_dim",
    "num_key_value_heads", "layer_types", "use_qk_norm",
    // DeepSeek: routing rules and losses (which experts a
    // token picks, not how many), inference settings and
    // the checkpoint's storage format.
    "auto_map", "aux_loss_alpha", "seq_aux", "ep_size", "n_group", "topk_group", "topk_method",
    "scoring_func", "routed_scaling_factor", "quantization_config"};

class Reader {
 public:
  Reader(const Json& j, std::string file) : j_(j), file_(std::move(file)) {}
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw ConfigError(file_, key, msg);
  }
  int integer(const char* key, int lo = 1) const {
    if (!has(key)) fail(key, "missing; expected an integer");
    const Json& v = j_.at(key);
    if (!v.is_number_integer()) fail(key, "expected an integer");
    const auto x = v.get<long long>();
    if (x < lo || x > std::numeric_limits<int>::max())
      fail(key, fmt::format("{}; expected an integer in {}..{}", x, lo,
                            std::numeric_limits<int>::max()));
    return static_cast<int>(x);
  }
  int integer_or(const char* key, int fallback, int lo = 1) const {
    return has(key) ? integer(key, lo) : fallback;
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail(key, "expected true or false");
    return j_.at(key).get<bool>();
  }
  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_number()) fail(key, "expected a number");
    return j_.at(key).get<double>();
  }
  std::string text_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) fail(key, "expected a string");
    return j_.at(key).get<std::string>();
  }
  const Json& json() const { return j_; }

 private:
  const Json& j_;
  std::string file_;
};

// The window every layer attends over (ModelShape::window_size, as NeMo's importers read it:
// Megatron's window (sliding_window, 0)), or 0. Which layers slide: `layer_types` where the
// file lists them, else Mistral's and Mixtral's `sliding_window` alone, or Qwen's
// `use_sliding_window` from layer `max_window_layers` on (transformers' Qwen2/Qwen3 default:
// 28). Some layers sliding and others not is refused: one window for every layer is modelled.
int sliding_window(const Reader& r, const std::string& type, int num_layers) {
  auto window = [&](const char* why) {
    if (!r.has("sliding_window"))
      r.fail("sliding_window", fmt::format("missing with {}; expected the window", why));
    return r.integer("sliding_window", 1);
  };
  if (r.has("layer_types")) {
    const Json& v = r.json().at("layer_types");
    int sliding = 0, full = 0;
    if (v.is_array() && static_cast<int>(v.size()) == num_layers)
      for (const Json& e : v) {
        if (e == "sliding_attention") ++sliding;
        if (e == "full_attention") ++full;
      }
    if (sliding + full != num_layers)
      r.fail("layer_types", fmt::format("expected a list of num_hidden_layers ({}) entries, each "
                                        "full_attention or sliding_attention",
                                        num_layers));
    if (sliding > 0 && full > 0)
      r.fail("layer_types", fmt::format("{} sliding_attention and {} full_attention layers: "
                                        "per-layer attention windows are not modelled; expected "
                                        "every layer alike",
                                        sliding, full));
    return sliding > 0 ? window("sliding_attention layers") : 0;
  }
  if (type == "mistral" || type == "mixtral")
    return r.has("sliding_window") ? window("sliding_window") : 0;
  if (!r.boolean_or("use_sliding_window", false)) return 0;
  const int from = r.integer_or("max_window_layers", 28, 0);
  if (from >= num_layers) return 0;
  if (from > 0)
    r.fail("max_window_layers",
           fmt::format("{} with use_sliding_window and {} layers: layers {}.. slide and the "
                       "first {} do not; per-layer attention windows are not modelled, expected "
                       "0 (every layer slides) or at least num_hidden_layers",
                       from, num_layers, from, from));
  return window("use_sliding_window true");
}

}  // namespace

ModelShape parse_hf_config(const std::string& text, const std::string& file) {
  const Json j = parse_json_limited(text, file);
  if (!j.is_object()) throw ConfigError(file, "", "expected a JSON object (a config.json)");
  Reader r(j, file);
  const std::string type = r.text_or("model_type", "");
  const std::set<std::string> types = {"llama", "mistral",   "mixtral",     "qwen2",
                                       "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3"};
  if (!types.count(type))
    r.fail("model_type", fmt::format("'{}'; expected one of {}", type, kHfModelTypes));

  // Fields read per architecture; every other field must be neutral.
  std::set<std::string> read = {"num_hidden_layers", "hidden_size", "num_attention_heads",
                                "intermediate_size", "vocab_size"};
  const bool deepseek = type == "deepseek_v2" || type == "deepseek_v3";
  const bool moe = type == "mixtral" || type == "qwen3_moe" || deepseek;
  if (type == "mixtral") read.insert({"num_local_experts", "num_experts_per_tok"});
  if (deepseek)
    read.insert({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                 "v_head_dim", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                 "n_shared_experts", "first_k_dense_replace", "moe_layer_freq",
                 "num_nextn_predict_layers"});
  if (type == "qwen3_moe")
    read.insert({"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                 "decoder_sparse_step", "mlp_only_layers"});
  for (const auto& [key, value] : j.items()) {
    if (!read.count(key) && !kNeutral.count(key))
      r.fail(key, fmt::format("unknown field for model_type '{}'; pipewright reads {} and "
                              "ignores only fields that do not change cost or memory",
                              type, fmt::join(read, ", ")));
  }

  ModelShape m;
  // Named after the checkpoint's directory (".../Llama-3-8B/config.json"), else the file.
  const std::filesystem::path path(file);
  m.name = path.filename() == "config.json" ? path.parent_path().filename().string()
                                            : path.stem().string();
  if (m.name.empty()) m.name = type;
  m.num_layers = r.integer("num_hidden_layers");
  m.hidden_size = r.integer("hidden_size");
  m.num_attention_heads = r.integer("num_attention_heads");
  m.ffn_hidden_size = r.integer("intermediate_size");
  m.vocab_size = r.integer("vocab_size");
  m.num_query_groups = r.integer_or("num_key_value_heads", 0);
  if (m.num_query_groups == m.num_attention_heads) m.num_query_groups = 0;
  const int hd = r.integer_or("head_dim", 0);
  if (hd > 0 && hd * m.num_attention_heads != m.hidden_size && !deepseek) m.kv_channels = hd;
  if (deepseek) {
    // Multi-head latent attention (null q_lora_rank: queries projected from h directly).
    m.q_lora_rank = r.integer_or("q_lora_rank", 0);
    m.kv_lora_rank = r.integer("kv_lora_rank");
    m.qk_head_dim = r.integer("qk_nope_head_dim");
    m.qk_pos_emb_head_dim = r.integer("qk_rope_head_dim");
    m.v_head_dim = r.integer("v_head_dim");
    if (m.num_query_groups > 0)
      r.fail("num_key_value_heads",
             fmt::format("{} with multi-head latent attention; expected num_attention_heads ({})",
                         m.num_query_groups, m.num_attention_heads));
    // Multi-token prediction depths (DeepSeek-V3's config has 1; Megatron's mtp_num_layers).
    m.mtp_num_layers = r.integer_or("num_nextn_predict_layers", 0, 0);
  }
  m.swiglu = true;  // every architecture read here has a gated MLP
  const std::string act = r.text_or("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    r.fail("hidden_act", fmt::format("'{}'; expected silu (a SwiGLU MLP)", act));
  m.rmsnorm = true;
  m.rope = true;
  m.bias = false;
  m.untie_embeddings = !r.boolean_or("tie_word_embeddings", false);
  m.qkv_bias = r.boolean_or("attention_bias", type == "qwen2");
  if (r.boolean_or("mlp_bias", false)) r.fail("mlp_bias", "true; expected false (no MLP biases)");
  m.qk_layernorm = type == "qwen3" || type == "qwen3_moe";
  m.window_size = sliding_window(r, type, m.num_layers);
  if (r.number_or("attention_dropout", 0) != 0)
    r.fail("attention_dropout", "expected 0 (dropout is not modelled for these architectures)");
  if (deepseek) {
    m.num_experts = r.integer("n_routed_experts");
    m.moe_router_topk = r.integer("num_experts_per_tok");
    m.moe_ffn_hidden_size = r.integer("moe_intermediate_size");
    const long long shared =
        static_cast<long long>(r.integer_or("n_shared_experts", 0, 0)) * m.moe_ffn_hidden_size;
    if (shared > std::numeric_limits<int>::max())
      r.fail("n_shared_experts",
             fmt::format("{} shared experts of width {}: beyond what "
                         "pipewright models",
                         shared / m.moe_ffn_hidden_size, m.moe_ffn_hidden_size));
    m.moe_shared_expert_size = static_cast<int>(shared);
    m.moe_layer_freq = r.integer_or("moe_layer_freq", 1);
    m.moe_first_dense_layers = r.integer_or("first_k_dense_replace", 0, 0);
  } else if (moe) {
    m.num_experts = r.integer(type == "mixtral" ? "num_local_experts" : "num_experts");
    m.moe_router_topk = r.integer("num_experts_per_tok");
    m.moe_ffn_hidden_size =
        type == "mixtral" ? m.ffn_hidden_size : r.integer("moe_intermediate_size");
    m.moe_layer_freq = r.integer_or("decoder_sparse_step", 1);
    if (r.has("mlp_only_layers") &&
        !(j.at("mlp_only_layers").is_array() && j.at("mlp_only_layers").empty()))
      r.fail("mlp_only_layers", "expected an empty list (dense layers by list are not read)");
  }
  const std::string problem = model_shape_problem(m);
  if (!problem.empty()) {
    // The problem names pipewright's key; the error names the config.json field it came from.
    const auto colon = problem.find(':');
    const std::string key = problem.substr(0, colon);
    const std::string field = key == "num_query_groups"  ? "num_key_value_heads"
                              : key == "moe_router_topk" ? "num_experts_per_tok"
                              : key == "moe_layer_freq"
                                  ? (deepseek ? "moe_layer_freq" : "decoder_sparse_step")
                              : key == "moe_first_dense_layers" ? "first_k_dense_replace"
                              : key == "qk_head_dim"            ? "qk_nope_head_dim"
                              : key == "mtp_num_layers"         ? "num_nextn_predict_layers"
                              : key == "num_experts" ? (type == "mixtral" ? "num_local_experts"
                                                        : deepseek        ? "n_routed_experts"
                                                                          : "num_experts")
                                                     : key;
    throw ConfigError(file, field, problem.substr(colon + 2));
  }
  return m;
}

ModelShape load_hf_config(const std::string& path) {
  return parse_hf_config(read_file(path), path);
}

}  // namespace pw::hw
