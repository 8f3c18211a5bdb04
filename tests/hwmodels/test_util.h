#pragma once
// Shared by the hwmodels tests: a preset's shape, and input that must be refused with a one-line
// ConfigError naming the file and `key` (a Hugging Face config.json text, or a scenario around a
// model and a parallel section).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/scenario.h"

namespace pw::hw::testing {

// The shape of a shipped preset (a test failure, and a crash on use, if it has none).
inline const ModelShape& preset(const char* name) {
  const ModelPreset* p = find_model_preset(name);
  EXPECT_NE(p, nullptr) << name;
  return p->shape;
}

inline void expect_hf_config_error(const std::string& text, const std::string& key) {
  try {
    parse_hf_config(text, "c/config.json");
    ADD_FAILURE() << "no error for " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "c/config.json");
    EXPECT_EQ(e.key(), key) << e.what();
  }
}

// A scenario of `model` and `parallel` on `nodes` DGX H100 nodes, read as "s.yaml".
inline Scenario scenario(const std::string& model, const std::string& parallel, int nodes = 1) {
  const std::string text = "model: " + model +
                           "\ncluster: {profile: dgx-h100, nodes: " + std::to_string(nodes) +
                           "}\nparallel: " + parallel + "\n";
  return parse_scenario(text, "s.yaml", "");
}

// Two layers (h = 1024, 8 heads, sequence 2048, fused attention) on two DGX H100 nodes at
// t = 1, p = 1, d = 16 (eight GPUs per node), global batch 32 (two microbatches per rank), FP8
// hybrid under Megatron's `recipe` (delayed or tensorwise).
inline Scenario fp8_scenario(const std::string& recipe) {
  return scenario(
      "{num_layers: 2, hidden_size: 1024, num_attention_heads: 8, seq_length: 2048, "
      "vocab_size: 32000, use_flash_attn: true}",
      "{micro_batch_size: 1, global_batch_size: 32, fp8: hybrid, fp8_recipe: " + recipe + "}", 2);
}

inline void expect_scenario_error(const std::string& model, const std::string& parallel,
                                  const std::string& key) {
  try {
    scenario(model, parallel);
    ADD_FAILURE() << "no error for " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "s.yaml");
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace pw::hw::testing
