// Sliding-window attention (ModelShape::window_size, Megatron's --window-size W,0): the keys a
// fused kernel computes, what it changes in a layer's FLOPs (attention core only, fused only),
// the FLOP conventions (which ignore it, as Megatron's), the Hugging Face import (Mistral's
// window, Qwen's use_sliding_window and layer_types; per-layer patterns refused), the scenario
// key and context parallelism refused with a window.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "core/file_io.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/layer_dims.h"
#include "hwmodels/profile.h"
#include "hwmodels/transformer.h"
#include "test_util.h"

namespace pw::hw {
namespace {

using testing::expect_hf_config_error;
using testing::expect_scenario_error;
using testing::preset;
using testing::scenario;

TEST(SlidingWindow, KeysPerQueryFollowTheTriangleAndTheBand) {
  // s = 8192, w = 4096: the first 4096 queries see 1..4096 keys (the triangle, 4096^2 / 2 =
  // 8,388,608 in the continuous count), the other 4096 see 4096 each (16,777,216): 25,165,824
  // over 8192 queries = 3072 a query; w - w^2 / (2s) = 4096 - 1024 = 3072.
  EXPECT_EQ(fused_attention_keys(8192, true, 4096), 3072);
  EXPECT_EQ(fused_attention_keys(8192, true, 0), 4096);      // the causal half
  EXPECT_EQ(fused_attention_keys(8192, true, 8192), 4096);   // a window of the sequence: the same
  EXPECT_EQ(fused_attention_keys(8192, false, 4096), 8192);  // no causal mask: every key
  // s = 1000, w = 100: 100 x 1900 / 2000 = 95 (the band's 100, less the triangle's 5 a query).
  EXPECT_EQ(fused_attention_keys(1000, true, 100), 95);
  // The window that masks something: shorter than seq_length - 1 (query s - 1 sees the keys
  // s - 1 - w .. s - 1, all of them when w >= s - 1).
  ModelShape m = preset("mistral-7b");
  EXPECT_EQ(m.window_size, 4096);
  EXPECT_EQ(attention_window(m), 4096);
  m.seq_length = 4097;
  EXPECT_EQ(attention_window(m), 0);
  m.seq_length = 4098;
  EXPECT_EQ(attention_window(m), 4096);
  m.window_size = 0;
  EXPECT_EQ(attention_window(m), 0);
}

TEST(SlidingWindow, OnlyTheFusedAttentionCoreShrinks) {
  // Mistral 7B (Llama 3 8B's layer but for the window) at s = 8192, t = 2, micro batch 2: 32
  // query heads on a rank, head dim 128. With the window each query sees 3072 keys, not 4096:
  // the forward kernel 2 x (2 x 8192 x 3072 x 128 x 32) FLOPs, the backward's 5 x (...).
  const ModelShape& w = preset("mistral-7b");
  ModelShape all = w;
  all.window_size = 0;
  WorkloadOptions o;
  o.tp = 2;
  o.micro_batch = 2;
  o.flash_attention = true;
  const double gemm = 2.0 * 8192 * 3072 * 128 * 32;
  auto flops = [&](const ModelShape& m, Pass pass, bool core) {
    double f = 0;
    for (const LayerOp& op : layer_ops(m, o, pass))
      if (detail::in_attention_core(op) == core) f += op.flops.value;
    return f;
  };
  EXPECT_EQ(flops(w, Pass::kForward, true), 2 * gemm);
  EXPECT_EQ(flops(w, Pass::kBackwardInput, true), 5 * gemm);
  EXPECT_EQ(flops(w, Pass::kForward, true) / flops(all, Pass::kForward, true), 0.75);
  for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight})
    EXPECT_EQ(flops(w, p, false), flops(all, p, false));
  // Unfused attention computes every score and masks after: no change.
  o.flash_attention = false;
  for (Pass p : {Pass::kForward, Pass::kBackwardInput})
    EXPECT_EQ(flops(w, p, true), flops(all, p, true));
  // The stage's forward is faster by its attention core's difference only.
  o.flash_attention = true;
  const GpuModel gpu(resolve_profile("dgx-h100", "", "", "").gpu);
  const StageCosts a = stage_costs(w, gpu, o, 0, 4, false, false);
  const StageCosts b = stage_costs(all, gpu, o, 0, 4, false, false);
  EXPECT_LT(a.f, b.f);
  EXPECT_EQ(b.f - a.f, b.attn_f - a.attn_f);
  EXPECT_EQ(a.m_b.value, b.m_b.value);  // fused attention keeps no scores either way
}

TEST(SlidingWindow, ModelFlopConventionsIgnoreTheWindowAndHardwareFlopsCountIt) {
  // Megatron's num_floating_point_operations counts every layer's attention over the whole
  // sequence, window or not; both conventions here do too. What runs (fused, F + B, no
  // recompute) drops by 7 GEMMs of 2 x s x 1024 keys x 128 x 32 heads per layer and sequence
  // (4096 - 3072 = 1024 keys a query): 2 sequences x 32 layers.
  const ModelShape& w = preset("mistral-7b");
  ModelShape all = w;
  all.window_size = 0;
  WorkloadOptions o;
  o.flash_attention = true;
  const IterationFlops a = iteration_flops(w, o, 2), b = iteration_flops(all, o, 2);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.model_causal, b.model_causal);
  const double dropped = 2.0 * 32 * 7 * (2.0 * 8192 * 1024 * 128 * 32);
  EXPECT_NEAR((b.hardware - a.hardware) / dropped, 1.0, 1e-12);
}

// mistralai/Mistral-7B-v0.1's config.json.
constexpr const char* kMistral7b = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

std::string with(const std::string& fields, const char* base = kMistral7b) {
  return "{" + fields + ", " + std::string(base).substr(1);
}

std::string retyped(const char* type) {
  std::string t = kMistral7b;
  t.replace(t.find(R"("model_type": "mistral")"), 23,
            std::string(R"("model_type": ")") + type + "\"");
  return t;
}

TEST(SlidingWindow, HuggingFaceConfigsGiveEveryLayersWindowOrAreRefused) {
  ModelShape m = parse_hf_config(kMistral7b, "mistral/config.json");
  m.seq_length = 8192;
  m.name = "mistral-7b";
  EXPECT_EQ(m, preset("mistral-7b"));
  std::string none = kMistral7b;
  none.replace(none.find(R"("sliding_window": 4096)"), 22, R"("sliding_window": null)");
  EXPECT_EQ(parse_hf_config(none, "c/config.json").window_size, 0);
  // Qwen: the window only with use_sliding_window, and from layer max_window_layers on
  // (transformers' default 28): every layer slides at 0, none at >= the 32 layers.
  const std::string qwen = retyped("qwen2");
  EXPECT_EQ(parse_hf_config(qwen, "c/config.json").window_size, 0);
  EXPECT_EQ(parse_hf_config(with(R"("use_sliding_window": false)", qwen.c_str()), "c").window_size,
            0);
  EXPECT_EQ(parse_hf_config(
                with(R"("use_sliding_window": true, "max_window_layers": 0)", qwen.c_str()), "c")
                .window_size,
            4096);
  EXPECT_EQ(parse_hf_config(
                with(R"("use_sliding_window": true, "max_window_layers": 32)", qwen.c_str()), "c")
                .window_size,
            0);
  expect_hf_config_error(with(R"("use_sliding_window": true)", qwen.c_str()), "max_window_layers");
  expect_hf_config_error(
      with(R"("use_sliding_window": true, "max_window_layers": 8)", qwen.c_str()),
      "max_window_layers");
  std::string qwen_no_window = qwen;
  qwen_no_window.replace(qwen_no_window.find(R"("sliding_window": 4096,)"), 23, "");
  expect_hf_config_error(
      with(R"("use_sliding_window": true, "max_window_layers": 0)", qwen_no_window.c_str()),
      "sliding_window");
  // layer_types, where listed, says which layers slide: all or none is modelled.
  auto types = [](int sliding, int full) {
    std::string list = "\"layer_types\": [";
    for (int i = 0; i < sliding + full; ++i)
      list += std::string(i ? ", " : "") +
              (i < sliding ? "\"sliding_attention\"" : "\"full_attention\"");
    return list + "]";
  };
  EXPECT_EQ(parse_hf_config(with(types(32, 0), qwen.c_str()), "c").window_size, 4096);
  EXPECT_EQ(parse_hf_config(with(types(0, 32), kMistral7b), "c").window_size, 0);
  expect_hf_config_error(with(types(16, 16), qwen.c_str()), "layer_types");
  expect_hf_config_error(with(types(31, 0), qwen.c_str()), "layer_types");
  expect_hf_config_error(with(R"("layer_types": "sliding_attention")"), "layer_types");
}

TEST(SlidingWindow, ScenarioKeyAndContextParallelismRefused) {
  const std::string model =
      "{num_layers: 2, hidden_size: 1024, num_attention_heads: 8, seq_length: 8192, "
      "vocab_size: 32000, window_size: 4096}";
  EXPECT_EQ(scenario(model, "{micro_batch_size: 1, global_batch_size: 8}").model.window_size, 4096);
  expect_scenario_error(model,
                        "{micro_batch_size: 1, global_batch_size: 8, context_parallel_size: 2}",
                        "parallel.context_parallel_size");
  expect_scenario_error(
      "{num_layers: 2, hidden_size: 1024, num_attention_heads: 8, seq_length: 8192, "
      "vocab_size: 32000, window_size: -1}",
      "{micro_batch_size: 1, global_batch_size: 8}", "model.window_size");
  // A window masking nothing leaves context parallelism alone.
  const std::string inert =
      "{num_layers: 2, hidden_size: 1024, num_attention_heads: 8, seq_length: 8192, "
      "vocab_size: 32000, window_size: 8191}";
  EXPECT_EQ(scenario(inert, "{micro_batch_size: 1, global_batch_size: 8, context_parallel_size: 2}")
                .parallel.context_parallel,
            2);
}

}  // namespace
}  // namespace pw::hw
