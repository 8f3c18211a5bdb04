// The dense Qwen3 presets (0.6B to 32B): parameter counts from the layer formula written here and
// against the model cards' published figures, and a config.json import giving the preset's shape.
#include <gtest/gtest.h>

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

TEST(Qwen3Dense, ParameterCountsFollowTheLayerFormulaAndTheModelCards) {
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

TEST(Qwen3Dense, HuggingFaceConfigGivesThePresetsShape) {
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

}  // namespace
}  // namespace pw::hw
