// Workload model: parameter counts, FLOPs, activation memory (Korthikanti), ZeRO, stage costs.
// Expected values come from the formulas and tables of shared/reference/models-and-hardware.md,
// written out here independently of the code under test.
#include "hwmodels/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hwmodels/memory.h"
#include "hwmodels/model_presets.h"

namespace pw::hw {
namespace {

ModelShape shape(int layers, int h, int a, int s = 2048, int v = 51200) {
  return ModelShape{"test", layers, h, a, 4 * h, s, v};
}

TEST(ParameterCount, ReproducesMegatronWeakScalingTable) {
  struct Row {
    const char* preset;
    double billions;
  };
  // Narayanan et al. SC21 weak-scaling table (params column).
  const Row rows[] = {{"megatron-1.7b", 1.7},     {"megatron-3.6b", 3.6},
                      {"megatron-7.5b", 7.5},     {"megatron-18.4b", 18.4},
                      {"megatron-39.1b", 39.1},   {"megatron-76.1b", 76.1},
                      {"megatron-145.6b", 145.6}, {"megatron-310.1b", 310.1},
                      {"megatron-529.6b", 529.6}, {"megatron-1t", 1008.0}};
  for (const Row& r : rows) {
    const ModelPreset* p = find_model_preset(r.preset);
    ASSERT_NE(p, nullptr) << r.preset;
    EXPECT_NEAR(parameter_count(p->shape) / 1e9, r.billions, 0.1) << r.preset;
  }
}

TEST(ParameterCount, EqualsPaperFormulaPlusFinalNorm) {
  ModelShape m = shape(96, 12288, 96);
  const double L = 96, h = 12288, V = 51200, s = 2048;
  // P = 12 L h^2 (1 + 13/(12h) + (V+s)/(12Lh)), plus the final layer norm (2h).
  double expected = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h)) + 2 * h;
  EXPECT_NEAR(parameter_count(m) / expected, 1.0, 1e-12);
}

TEST(IterationFlops, MatchesSeventyTwoFormWithoutRecompute) {
  ModelShape m = shape(96, 12288, 96);
  WorkloadOptions o;
  const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
  double expected = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  IterationFlops f = iteration_flops(m, o, 1536);
  EXPECT_NEAR(f.model / expected, 1.0, 1e-9);
  EXPECT_NEAR(f.hardware / expected, 1.0, 1e-9);
}

TEST(IterationFlops, MatchesNinetySixFormWithFullRecompute) {
  ModelShape m = shape(105, 20480, 128);
  WorkloadOptions o;
  o.recompute = Recompute::kFull;
  const double B = 2520, s = 2048, L = 105, h = 20480, V = 51200;
  double expected = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  EXPECT_NEAR(iteration_flops(m, o, 2520).hardware / expected, 1.0, 1e-9);
}

TEST(IterationFlops, SelectiveRecomputeAddsTheAttentionCore) {
  ModelShape m = shape(24, 2304, 24);
  WorkloadOptions o;
  o.recompute = Recompute::kSelective;
  IterationFlops f = iteration_flops(m, o, 512);
  // Scores and context forward: 4 s^2 h FLOPs per sequence per layer.
  double extra = 512.0 * 24 * 4 * 2048.0 * 2048.0 * 2304;
  EXPECT_NEAR((f.hardware - f.model) / extra, 1.0, 1e-9);
}

TEST(FlopsAreIndependentOfTensorParallelism, SumOverRanksIsConstant) {
  ModelShape m = shape(1, 4096, 32);
  WorkloadOptions o1, o8;
  o8.tp = 8;
  for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight}) {
    EXPECT_NEAR(8 * total_flops(layer_ops(m, o8, p)).value / total_flops(layer_ops(m, o1, p)).value,
                1.0, 1e-12);
  }
}

/// Sum of the memory-bound ops' bytes (and, via `names`, their names in order).
double elementwise_bytes(const std::vector<LayerOp>& ops,
                         std::vector<std::string>* names = nullptr) {
  double bytes = 0;
  for (const LayerOp& op : ops) {
    if (op.gemm) continue;
    bytes += op.bytes.value;
    if (names) names->push_back(op.name);
  }
  return bytes;
}

double op_bytes(const std::vector<LayerOp>& ops, const std::string& name) {
  for (const LayerOp& op : ops)
    if (name == op.name) return op.bytes.value;
  ADD_FAILURE() << "no op " << name;
  return -1;
}

// Small shape h 64, a 4, f 256, s 32, b 2 (64 tokens), t 4 with sequence parallelism (16 tokens
// per rank outside the TP region), 2 bytes per element. A reduction reads tokens x width and
// writes width; a layer norm's gamma/beta gradient reads x-hat and dY (2 x tokens x h), writes 2h.
TEST(WeightGradientPass, CountsBiasAndLayerNormParameterGradients) {
  ModelShape m{"small", 1, 64, 4, 256, 32, 1000};
  WorkloadOptions o;
  o.tp = 4;
  o.micro_batch = 2;
  o.sequence_parallel = true;
  const auto w = layer_ops(m, o, Pass::kBackwardWeight);
  EXPECT_DOUBLE_EQ(op_bytes(w, "layernorm1_param_grad"), 4352);  // 2 (2*16*64 + 2*64)
  EXPECT_DOUBLE_EQ(op_bytes(w, "qkv_bias_grad"), 6240);          // 2 (64*48 + 48), 3h/t = 48
  EXPECT_DOUBLE_EQ(op_bytes(w, "proj_bias_grad"), 2176);         // 2 (16*64 + 64)
  EXPECT_DOUBLE_EQ(op_bytes(w, "layernorm2_param_grad"), 4352);  // as layernorm1
  EXPECT_DOUBLE_EQ(op_bytes(w, "mlp_up_bias_grad"), 8320);       // 2 (64*64 + 64), f/t = 64
  EXPECT_DOUBLE_EQ(op_bytes(w, "mlp_down_bias_grad"), 2176);     // as proj
  std::vector<std::string> names;
  // 4352 + 6240 + 2176 + 4352 + 8320 + 2176 = 27616, and nothing else memory-bound in W.
  EXPECT_DOUBLE_EQ(elementwise_bytes(w, &names), 27616);
  EXPECT_EQ(names.size(), 6u);
  // The weight GEMMs are unchanged: 2 * 64 tokens * (3h*h + h*h + 2hf) / t = 1572864 FLOPs.
  EXPECT_DOUBLE_EQ(total_flops(w).value, 2.0 * 64 * (3 * 64 * 64 + 64 * 64 + 2 * 64 * 256) / 4);

  // Without SP every term sees all 64 tokens: LN 2 (2*64*64 + 128) = 16640 each, proj and
  // mlp_down 2 (64*64 + 64) = 8320 each; 2*16640 + 6240 + 3*8320 = 64480.
  o.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(elementwise_bytes(layer_ops(m, o, Pass::kBackwardWeight)), 64480);

  // At t = 1 the reductions write exactly the layer's 9h + f bias and layer-norm parameters
  // and read them once per token: 2 (tokens + 1)(9h + f) = 2 * 65 * 832 = 108160.
  o.tp = 1;
  EXPECT_DOUBLE_EQ(elementwise_bytes(layer_ops(m, o, Pass::kBackwardWeight)), 108160);
}

TEST(WeightGradientPass, ForwardAndInputGradientBytesUnchanged) {
  ModelShape m{"small", 1, 64, 4, 256, 32, 1000};
  WorkloadOptions o;
  o.tp = 4;
  o.micro_batch = 2;
  o.sequence_parallel = true;
  // th/t = 1024 (SP), s^2 elements = b a / t heads * s^2 = 2 * 1024 = 2048, gelu 64 * 64 = 4096:
  // LN1 4*1024 + softmax 4*2048 + dropout 5*2048 + dropout_residual1 7*1024 + LN2 4*1024
  // + gelu 4*4096 + dropout_residual2 7*1024 = 57344; B's memory-bound kernels are 1.5x that.
  EXPECT_DOUBLE_EQ(elementwise_bytes(layer_ops(m, o, Pass::kForward)), 57344);
  EXPECT_DOUBLE_EQ(elementwise_bytes(layer_ops(m, o, Pass::kBackwardInput)), 1.5 * 57344);
  // The last stage's W adds the final layer norm's gamma/beta: 2 (2*16*64 + 2*64) = 4352.
  EXPECT_DOUBLE_EQ(op_bytes(head_ops(m, o, Pass::kBackwardWeight), "final_layernorm_param_grad"),
                   4352);
  EXPECT_DOUBLE_EQ(elementwise_bytes(head_ops(m, o, Pass::kBackwardWeight)), 4352);
}

// Korthikanti et al. rows for the GPT-3 175B shape, t = 8, b = 1.
TEST(ActivationMemory, EqualsEachKorthikantiRow) {
  ModelShape m = shape(96, 12288, 96);
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  const double sbh = s * b * h;
  struct Row {
    bool sp;
    Recompute r;
    double expected;
  };
  const Row rows[] = {
      {false, Recompute::kNone, sbh * (10 + 24 / t + 5 * a * s / (h * t))},
      {true, Recompute::kNone, sbh * (34 / t + 5 * a * s / (h * t))},
      {false, Recompute::kSelective, sbh * (10 + 24 / t)},
      {true, Recompute::kSelective, sbh * 34 / t},
      {false, Recompute::kFull, sbh * 2},
  };
  for (const Row& row : rows) {
    WorkloadOptions o;
    o.tp = 8;
    o.sequence_parallel = row.sp;
    o.recompute = row.r;
    EXPECT_DOUBLE_EQ(layer_activation_bytes(m, o).value, row.expected)
        << "sp=" << row.sp << " recompute=" << recompute_name(row.r);
  }
  WorkloadOptions none;  // t = 1: s b h (34 + 5 a s / h)
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, none).value, sbh * (34 + 5 * a * s / h));
}

TEST(ActivationMemory, SharesOfTensorParallelBaselineMatchPublished) {
  struct Row {
    ModelShape m;
    double shares[5];  // none, SP, selective, SP+selective, full (percent)
  };
  const Row rows[] = {{shape(48, 6144, 64), {100, 66.84, 49.42, 16.18, 7.64}},
                      {shape(96, 12288, 96), {100, 62.04, 56.53, 18.49, 8.71}},
                      {shape(105, 20480, 128), {100, 58.31, 62.04, 20.27, 9.42}}};
  const std::pair<bool, Recompute> configs[] = {{false, Recompute::kNone},
                                                {true, Recompute::kNone},
                                                {false, Recompute::kSelective},
                                                {true, Recompute::kSelective},
                                                {false, Recompute::kFull}};
  for (const Row& row : rows) {
    WorkloadOptions base;
    base.tp = 8;
    double baseline = layer_activation_bytes(row.m, base).value;
    for (int i = 0; i < 5; ++i) {
      WorkloadOptions o = base;
      o.sequence_parallel = configs[i].first;
      o.recompute = configs[i].second;
      EXPECT_NEAR(100 * layer_activation_bytes(row.m, o).value / baseline, row.shares[i], 1.0)
          << "h=" << row.m.hidden_size << " config " << i;
    }
  }
}

TEST(ActivationMemory, WeightGradientHoldIsThirtyTwoSbhAtTOne) {
  // Zero-bubble paper: M_W = 32 b s h (against M_B = 34 bsh + 5 a s^2 b).
  ModelShape m = shape(1, 4096, 32);
  WorkloadOptions o;
  EXPECT_DOUBLE_EQ(layer_weight_grad_bytes(m, o).value, 32.0 * 2048 * 4096);
}

TEST(ZeroMemory, MatchesReferenceForSevenPointFiveBillionOnSixtyFourRanks) {
  const double P = 7.5e9;
  EXPECT_NEAR(model_state_bytes(P, 0, 64).total().value / 1e9, 120.0, 0.05);
  EXPECT_NEAR(model_state_bytes(P, 1, 64).total().value / 1e9, 31.4, 0.05);
  EXPECT_NEAR(model_state_bytes(P, 2, 64).total().value / 1e9, 16.6, 0.05);
  EXPECT_NEAR(model_state_bytes(P, 3, 64).total().value / 1e9, 1.9, 0.05);
}

TEST(ZeroMemory, OffloadMovesOptimizerStateToHost) {
  ModelStateBytes s = model_state_bytes(1e9, 1, 8, true);
  EXPECT_EQ(s.optimizer.value, 0.0);
  EXPECT_DOUBLE_EQ(s.host_optimizer.value, 12e9 / 8);
}

TEST(StageCosts, ScaleWithLayersAndAddHeadOnLastStage) {
  ModelShape m = shape(24, 2304, 24);
  GpuSpec spec;
  spec.peak_flops[static_cast<int>(DType::kBf16)] = 312e12;
  GpuModel gpu(spec);
  WorkloadOptions o;
  StageCosts one = stage_costs(m, gpu, o, 0, 1, false, false);
  StageCosts three = stage_costs(m, gpu, o, 5, 8, false, false);
  EXPECT_EQ(three.f, 3 * one.f);
  EXPECT_EQ(three.w, 3 * one.w);
  EXPECT_DOUBLE_EQ(three.m_b.value, 3 * one.m_b.value);
  StageCosts last = stage_costs(m, gpu, o, 7, 8, false, true);
  EXPECT_GT(last.f, one.f);
  // Logits GEMM: 2 s b h V FLOPs forward.
  EXPECT_NEAR(last.f_flops.value - one.f_flops.value, 2.0 * 2048 * 2304 * 51200, 1.0);
  EXPECT_EQ(one.r, 0);  // no recompute pass without recomputation
  EXPECT_GT(one.b, one.f);
}

TEST(StageCosts, TensorParallelPassesIssueMegatronCollectives) {
  ModelShape m = shape(4, 4096, 32);
  GpuSpec spec;
  spec.peak_flops[static_cast<int>(DType::kBf16)] = 312e12;
  GpuModel gpu(spec);
  WorkloadOptions o;
  o.tp = 8;
  StageCosts c = stage_costs(m, gpu, o, 0, 4, false, false);
  // Reference: 8 b s h (t-1)/t elements per layer per microbatch over two all-reduces forward and
  // two backward; each all-reduce carries b s h elements of 2 bytes.
  ASSERT_EQ(c.comm_f.size(), 1u);
  EXPECT_EQ(c.comm_f[0].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(c.comm_f[0].count, 8);
  EXPECT_DOUBLE_EQ(c.comm_f[0].bytes.value, 2.0 * 2048 * 4096);
  EXPECT_DOUBLE_EQ(c.comm_bytes_b.value, 4 * 2 * 2.0 * 2048 * 4096);
  o.sequence_parallel = true;
  StageCosts sp = stage_costs(m, gpu, o, 0, 4, false, false);
  EXPECT_EQ(sp.comm_f.size(), 2u);  // all-gather + reduce-scatter
  EXPECT_DOUBLE_EQ(sp.p2p_bytes.value, 2.0 * 2048 * 4096 / 8);
}

}  // namespace
}  // namespace pw::hw
