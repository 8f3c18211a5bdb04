// The small dense presets (Qwen3 0.6B to 32B, Llama 3.2 1B and 3B): parameter counts from the
// layer formula written here and against the model cards' published figures, and a config.json
// import giving the preset's shape.
#include <gtest/gtest.h>

#include <tuple>

#include "hwmodels/hf_config.h"
#include "hwmodels/transformer.h"
#include "tests/hwmodels/test_util.h"

namespace pw::hw {
namespace {

using testing::preset;

struct Qwen3Dense {
  const char* name;
  int layers, hidden, heads, ffn;
  bool tied;
  double card_total, card_non_embedding;  // the model card's figures, in billions: the total
  double card_step;                       // to 0.1, the non-embedding count to this step
};

// Qwen/Qwen3-*/README.md "Number of Parameters" (total / non-embedding).
constexpr Qwen3Dense kQwen3[] = {
    {"qwen3-0.6b", 28, 1024, 16, 3072, true, 0.6, 0.44, 0.01},
    {"qwen3-1.7b", 28, 2048, 16, 6144, true, 1.7, 1.4, 0.1},
    {"qwen3-4b", 36, 2560, 32, 9728, true, 4.0, 3.6, 0.1},
    {"qwen3-8b", 36, 4096, 32, 12288, false, 8.2, 6.95, 0.01},
    {"qwen3-14b", 40, 5120, 40, 17408, false, 14.8, 13.2, 0.1},
    {"qwen3-32b", 64, 5120, 64, 25600, false, 32.8, 31.2, 0.1},
};

TEST(SmallDensePresets, ParameterCountsFollowTheLayerFormulaAndTheModelCards) {
  constexpr double kVocab = 151936, kHeadDim = 128, kKvHeads = 8;
  for (const Qwen3Dense& q : kQwen3) {
    SCOPED_TRACE(q.name);
    const double h = q.hidden, qw = q.heads * kHeadDim, kv = kKvHeads * kHeadDim;
    // q, k, v and output projections (no biases), the two 128-wide query/key norms, the two
    // RMSNorms, and the SwiGLU MLP's gate, up and down matrices.
    const double layer = h * qw + 2 * h * kv + qw * h + 2 * kHeadDim + 2 * h + 3 * h * q.ffn;
    const double non_embedding = q.layers * layer + h;  // + the final norm
    const double total = non_embedding + kVocab * h * (q.tied ? 1 : 2);
    const ModelShape& m = preset(q.name);
    EXPECT_EQ(parameter_count(m), total);
    EXPECT_EQ(active_parameter_count(m), total);
    EXPECT_NEAR(total / 1e9, q.card_total, 0.05 + 1e-9);
    EXPECT_NEAR(non_embedding / 1e9, q.card_non_embedding, q.card_step / 2 + 1e-9);
    EXPECT_EQ(m.num_layers, q.layers);
    EXPECT_TRUE(m.qk_layernorm);
    EXPECT_FALSE(m.qkv_bias);
  }
}

// Qwen/Qwen3-8B and Qwen/Qwen3-0.6B config.json (the fields that shape the model, and the
// neutral ones the reader knows): the import is the preset, so `export --to torchtitan` finds
// its flavor either way. 0.6B's 16 heads of 128 are wider than its hidden size (kv_channels).
constexpr const char* kQwen3_8b = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
  "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
  "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

constexpr const char* kQwen3_0_6b = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

TEST(SmallDensePresets, HuggingFaceConfigGivesThePresetsShape) {
  for (const auto& [text, name] :
       {std::pair{kQwen3_8b, "qwen3-8b"}, std::pair{kQwen3_0_6b, "qwen3-0.6b"}}) {
    SCOPED_TRACE(name);
    ModelShape m = parse_hf_config(text, "qwen3/config.json");
    m.name = name;
    m.seq_length = 4096;
    EXPECT_EQ(m, preset(name));
  }
  EXPECT_EQ(preset("qwen3-0.6b").kv_channels, 128);
  EXPECT_EQ(preset("qwen3-8b").kv_channels, 0);  // 32 heads x 128 = 4096, the hidden size
}

// Llama 3.2 1B and 3B: 16 / 28 layers of h 2048 / 3072 (32 / 24 heads of 64 / 128, 8 key/value
// heads), SwiGLU 8192, the 128,256-token embedding shared with the output layer. Per layer: q
// and o h x h each, k and v h x 8 d_head each, the MLP 3 h x 8192, two RMSNorms; plus the
// embedding and the final norm. The model cards' "1.23B" and "3.21B".
TEST(SmallDensePresets, Llama32CountsFollowTheLayerFormula) {
  for (const auto& [name, layers, h, heads, card] :
       {std::tuple{"llama3.2-1b", 16, 2048.0, 32, 1.23},
        std::tuple{"llama3.2-3b", 28, 3072.0, 24, 3.21}}) {
    SCOPED_TRACE(name);
    const double kv = 8 * (h / heads);
    const double layer = 2 * h * h + 2 * h * kv + 3 * h * 8192 + 2 * h;
    const double total = layers * layer + 128256 * h + h;
    EXPECT_EQ(parameter_count(preset(name)), total);
    EXPECT_GE(total / 1e9, card);  // the cards truncate to 0.01 B
    EXPECT_LT(total / 1e9, card + 0.01);
    EXPECT_FALSE(preset(name).untie_embeddings);
  }
  EXPECT_EQ(parameter_count(preset("llama3.2-1b")), 1'235'814'400.0);
  EXPECT_EQ(parameter_count(preset("llama3.2-3b")), 3'212'749'824.0);
}

// Qwen2.5 7B to 72B: Llama-style layers with biases on q, k and v (heads of h / heads), the
// 152,064-token embedding and an untied output layer. Per layer: q and o h x h, k and v
// h x kv d_head, the q/k/v bias h + 2 kv d_head, two RMSNorms, the MLP 3 h f; plus both
// vocabulary matrices and the final norm.
TEST(SmallDensePresets, Qwen25CountsFollowTheLayerFormula) {
  for (const auto& [name, layers, h, heads, kv, f] :
       {std::tuple{"qwen2.5-7b", 28, 3584.0, 28, 4, 18944.0},
        std::tuple{"qwen2.5-14b", 48, 5120.0, 40, 8, 13824.0},
        std::tuple{"qwen2.5-32b", 64, 5120.0, 40, 8, 27648.0},
        std::tuple{"qwen2.5-72b", 80, 8192.0, 64, 8, 29568.0}}) {
    SCOPED_TRACE(name);
    const double k = kv * (h / heads);
    const double layer = 2 * h * h + 2 * h * k + (h + 2 * k) + 2 * h + 3 * h * f;
    EXPECT_EQ(parameter_count(preset(name)), layers * layer + 2 * 152064 * h + h);
    EXPECT_TRUE(preset(name).qkv_bias);
    EXPECT_FALSE(preset(name).bias);
  }
  // Qwen2.5-7B by hand: 28 x 233,057,792 + 2 x 152,064 x 3,584 + 3,584 (the card's 7.61B).
  EXPECT_EQ(parameter_count(preset("qwen2.5-7b")), 7'615'616'512.0);
}

// Qwen/Qwen2.5-7B config.json: qwen2 configs carry no attention_bias field, and their q/k/v
// biases are always on.
constexpr const char* kQwen25_7b = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
  "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28,
  "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 152064})";

TEST(SmallDensePresets, Qwen25ConfigGivesThePresetsShape) {
  ModelShape m = parse_hf_config(kQwen25_7b, "qwen25/config.json");
  m.name = "qwen2.5-7b";
  m.seq_length = 4096;
  EXPECT_EQ(m, preset("qwen2.5-7b"));
}

// meta-llama/Llama-3.2-1B config.json (its Llama 3 RoPE scaling changes no cost).
constexpr const char* kLlama32_1b = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0,
  "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
  "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0", "use_cache": true,
  "vocab_size": 128256})";

TEST(SmallDensePresets, Llama32ConfigGivesThePresetsShape) {
  ModelShape m = parse_hf_config(kLlama32_1b, "llama32/config.json");
  m.name = "llama3.2-1b";
  m.seq_length = 8192;
  EXPECT_EQ(m, preset("llama3.2-1b"));
}

}  // namespace
}  // namespace pw::hw
