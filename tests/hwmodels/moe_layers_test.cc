// Mixture-of-experts layers in the one workload model: their activations and their FP8 casts.
// Expected values come from formulas and byte counts written beside each test (the MoE half of
// modern_models_test.cc, kept apart to keep each file one idea).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hwmodels/memory.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"
#include "tests/hwmodels/test_util.h"

namespace pw::hw {
namespace {

using testing::preset;

TEST(ModernModels, ActivationMemoryOfAnMoeLayerIsExactToTheByte) {
  // Qwen3-30B-A3B, t = 1, ep = 8, b = 1, s = 4096, fused attention. Attention: 10sbh + 2s(q +
  // 2kv + q) + q/k norm inputs 2s(q + kv). MoE: fp32 router probabilities 4sE, the expert rows
  // r = s x top-k: input 2rh, up 2r(2fe), activation 2r fe, and the expert outputs 2s k h.
  const ModelShape& m = preset("qwen3-30b-a3b");
  WorkloadOptions o;
  o.ep = 8;
  o.flash_attention = true;
  const double s = 4096, h = 2048, q = 32 * 128, kv = 4 * 128, E = 128, k = 8, fe = 768;
  const double r = s * k;
  const double expected = 10 * s * h + 2 * s * (q + 2 * kv + q) + 2 * s * (q + kv) + 4 * s * E +
                          2 * r * (h + 3 * fe) + 2 * s * k * h;
  EXPECT_EQ(layer_activation_bytes(m, o, true).value, expected);
  // Expert parallelism does not change a rank's activations (its tokens' k copies), the number of
  // experts it holds does change its parameters: 128 / 8 experts of 3 h fe each.
  double expert = 0;
  const double all = stage_parameter_count(m, o, 0, 1, false, false, 2, &expert);
  EXPECT_EQ(expert, 16 * 3 * h * fe);
  EXPECT_EQ(all - expert, layer_parameter_count(m, true) - 128 * 3 * h * fe);
}

// Under FP8 a dense layer's fc1 casts nothing apart (Transformer Engine's LayerNormLinear fuses
// the norm and the cast), but a MoE layer's pre-MLP norm is a kernel of its own (Megatron's spec:
// TENorm where num_experts is set), so the experts' grouped fc1 and the shared expert's fc1 each
// cast their 16-bit input: read 2 + write 1 bytes an element (kFp8Cast). By hand, Qwen3-30B-A3B
// at s = 4096, b = 1, t = 1, ep = 8: 4096 x top-8 = 32768 expert rows, 128 / 8 = 16 local experts
// of 2048 rows, h = 2048: 3 x 32768 x 2048 = 201,326,592 bytes. DeepSeek-V3's shared expert reads
// every token: 3 x 4096 x 7168 = 88,080,384 bytes.
TEST(ModernModels, Fp8MoeLayersCastTheExpertInputsTheirNormLeaves) {
  auto before = [](const std::vector<LayerOp>& ops, const std::string& name) -> const LayerOp* {
    for (std::size_t i = 1; i < ops.size(); ++i)
      if (ops[i].name == name) return &ops[i - 1];
    return nullptr;
  };
  WorkloadOptions o;
  o.fp8 = true;
  o.flash_attention = true;
  o.ep = 8;
  const std::vector<LayerOp> qwen = layer_ops(preset("qwen3-30b-a3b"), o, Pass::kForward, true);
  const LayerOp* cast = before(qwen, "expert_up");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(std::string(cast->name), "fp8_cast");
  EXPECT_EQ(cast->bytes.value, 3.0 * 32768 * 2048);
  o.ep = 1;
  const std::vector<LayerOp> ds = layer_ops(preset("deepseek-v3"), o, Pass::kForward, true);
  cast = before(ds, "shared_up");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(std::string(cast->name), "fp8_cast");
  EXPECT_EQ(cast->bytes.value, 3.0 * 4096 * 7168);
  // A dense layer: fc1 follows its norm, qkv too.
  const std::vector<LayerOp> dense = layer_ops(preset("llama3-8b"), o, Pass::kForward, false);
  ASSERT_NE(before(dense, "mlp_up"), nullptr);
  EXPECT_EQ(std::string(before(dense, "mlp_up")->name), "layernorm2");
  EXPECT_EQ(std::string(before(dense, "qkv")->name), "layernorm1");
  // BF16 casts nothing.
  o.fp8 = false;
  o.ep = 8;
  for (const LayerOp& op : layer_ops(preset("qwen3-30b-a3b"), o, Pass::kForward, true))
    EXPECT_NE(std::string(op.name), "fp8_cast");
}

}  // namespace
}  // namespace pw::hw
