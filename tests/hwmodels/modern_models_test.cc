// Today's models in the one workload model: GQA, SwiGLU, RMSNorm, untied embeddings, RoPE, MoE,
// context and expert parallelism, FP8. Expected values come from the published parameter counts
// (shared/reference/h100-runs.md, the model cards) and from formulas written beside each test.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/memory.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/scenario.h"
#include "hwmodels/transformer.h"
#include "tests/hwmodels/test_util.h"

namespace pw::hw {
namespace {

using testing::preset;

TEST(ModernModels, ParameterCountsMatchThePublishedOnes) {
  // shared/reference/h100-runs.md and the model cards (exact integers).
  EXPECT_EQ(parameter_count(preset("llama3-8b")), 8'030'261'248.0);
  EXPECT_EQ(parameter_count(preset("llama3-70b")), 70'553'706'496.0);
  EXPECT_EQ(parameter_count(preset("llama3.1-405b")), 405'853'388'800.0);
  EXPECT_EQ(parameter_count(preset("mixtral-8x7b")), 46'702'792'704.0);
  EXPECT_EQ(parameter_count(preset("qwen3-30b-a3b")), 30'532'122'624.0);
  EXPECT_EQ(active_parameter_count(preset("qwen3-30b-a3b")), 3'353'032'704.0);
  // Mixtral: "12.9B active parameters per token" (Jiang et al. 2024): 2 of 8 experts.
  EXPECT_NEAR(active_parameter_count(preset("mixtral-8x7b")) / 1e9, 12.9, 0.05);
  // Llama 2 7B: 6,738,415,616 (the model card's 6.7B; 32 x 202,383,360 + 2 x 32000 x 4096 + 4096).
  EXPECT_EQ(parameter_count(preset("llama2-7b")), 6'738'415'616.0);
  // Qwen3-235B-A22B: "235B total, 22B activated".
  EXPECT_NEAR(parameter_count(preset("qwen3-235b-a22b")) / 1e9, 235.1, 0.5);
  EXPECT_NEAR(active_parameter_count(preset("qwen3-235b-a22b")) / 1e9, 22.2, 0.3);
  // GPT-3 keeps its form: 12Lh^2(1 + 13/(12h) + (V+s)/(12Lh)) + 2h.
  const ModelShape& g = preset("gpt3-175b");
  const double L = g.num_layers, h = g.hidden_size;
  EXPECT_NEAR(
      parameter_count(g),
      12 * L * h * h * (1 + 13 / (12 * h) + (g.vocab_size + g.seq_length) / (12 * L * h)) + 2 * h,
      1.0);
}

TEST(ModernModels, MoeLayerCountsFollowTheLayerPattern) {
  // The definition (is_moe_layer: l >= first dense layers and l % freq == 0), counted one by one.
  ModelShape m{"m", 61, 64, 8, 256, 64, 128};
  m.num_experts = 8;
  m.moe_router_topk = 2;
  for (int freq : {1, 2, 3})
    for (int first : {0, 1, 3}) {
      m.moe_layer_freq = freq;
      m.moe_first_dense_layers = first;
      for (int b = 0; b <= 61; b += 7)
        for (int e = b; e <= 61; e += 5) {
          int n = 0;
          for (int l = b; l < e; ++l) n += is_moe_layer(m, l) ? 1 : 0;
          EXPECT_EQ(moe_layers_in(m, b, e), n) << freq << " " << first << " " << b << " " << e;
        }
    }
}

TEST(ModernModels, FlopsPerTokenFollowTheFormulaInBothConventions) {
  // Per token and iteration: 6 x (linear weights + output layer) + attention over all pairs
  // 12 x L x s x q (scores and context: 4sq forward, 8sq backward); the causal convention halves
  // the attention term.
  const ModelShape& m = preset("llama3-8b");
  const double h = m.hidden_size, f = m.ffn_hidden_size, s = m.seq_length, L = m.num_layers;
  const double q = 4096, kv = 1024, V = m.vocab_size;
  const double linear = L * (h * (q + 2 * kv) + q * h + 3 * h * f) + V * h;
  const double per_token = 6 * linear + 12 * L * s * q;
  WorkloadOptions o;
  o.flash_attention = true;
  const IterationFlops fl = iteration_flops(m, o, 2);
  EXPECT_NEAR(fl.model / (2 * s * per_token), 1.0, 1e-12);
  EXPECT_NEAR(fl.model_causal / (2 * s * (per_token - 6 * L * s * q)), 1.0, 1e-12);
  // What runs with fused attention: half the pairs, plus the recomputed scores in B.
  EXPECT_LT(fl.hardware, fl.model);
}

TEST(ModernModels, FusedAttentionOpsSumToTheKernelFlopFormula) {
  // Llama 3 8B, t = 2, micro batch 2, fused attention: 2 x 32 / 2 = 32 query heads on a rank,
  // s = 8192, head dim 128. Causal: each query sees s / 2 keys on average, so the forward's scores
  // and context GEMMs are 2 x (2 x 8192 x 4096 x 128) FLOPs per head, and the backward's five
  // GEMMs 5 x (2 x 8192 x 4096 x 128).
  const ModelShape& m = preset("llama3-8b");
  WorkloadOptions o;
  o.tp = 2;
  o.micro_batch = 2;
  o.flash_attention = true;
  const double gemm = 2.0 * 8192 * 4096 * 128 * 32;
  auto fused = [&](Pass pass, int kind) {
    double f = 0;
    for (const LayerOp& op : layer_ops(m, o, pass))
      if (op.fused_attention == kind) f += op.flops.value;
    return f;
  };
  EXPECT_EQ(fused(Pass::kForward, 1), 2 * gemm);
  EXPECT_EQ(fused(Pass::kBackwardInput, 2), 5 * gemm);
  EXPECT_EQ(fused_attention_flops(32, 8192, 8192, 128, true, false), 2 * gemm);
  EXPECT_EQ(fused_attention_flops(32, 8192, 8192, 128, true, true), 5 * gemm);
  // Without a causal mask every key is computed: twice the work.
  EXPECT_EQ(fused_attention_flops(32, 8192, 8192, 128, false, false), 4 * gemm);
}

// Selective recomputation checkpoints the attention core (Megatron's core_attn); with fused
// attention that re-runs the fused forward kernel in the backward (2 x 2 x 8192 x 4096 x 128
// FLOPs per head, as in the forward above) and re-creates nothing, since the kernel holds no
// s x s tensor: the same activation bytes as no recomputation, for the kernel's time.
TEST(ModernModels, SelectiveRecomputeWithFusedAttentionRerunsTheFusedForward) {
  const ModelShape& m = preset("llama3-8b");
  WorkloadOptions o;
  o.tp = 2;
  o.micro_batch = 2;
  o.flash_attention = true;
  WorkloadOptions none = o;
  o.recompute = Recompute::kSelective;
  double fused = 0, other = 0;
  for (const LayerOp& op : layer_ops(m, o, Pass::kRecompute))
    (op.fused_attention == 1 ? fused : other) += op.flops.value;
  EXPECT_EQ(fused, 2 * (2.0 * 8192 * 4096 * 128 * 32));
  EXPECT_EQ(other, 0);
  EXPECT_EQ(layer_activation_bytes(m, o).value, layer_activation_bytes(m, none).value);
}

// The attention core's time per pass (what a context-parallel ring step runs under): under
// selective recompute with fused attention the recompute pass is that core and nothing else, so
// its time is the recompute's and the forward's core; the weight-gradient pass has none; the
// backward's core (five GEMMs) is part of it and longer than the forward's (two).
TEST(ModernModels, AttentionCoreTimeIsWhatSelectiveRecomputeReruns) {
  const ModelShape& m = preset("llama3-8b");
  WorkloadOptions o;
  o.tp = 2;
  o.cp = 2;
  o.flash_attention = true;
  o.recompute = Recompute::kSelective;
  const GpuModel gpu(resolve_profile("dgx-h100", "", "", "").gpu);
  const StageCosts c = stage_costs(m, gpu, o, 0, 4, false, false);
  EXPECT_GT(c.r, 0);
  EXPECT_EQ(c.attn_r, c.r);
  EXPECT_EQ(c.attn_f, c.r);
  EXPECT_EQ(c.attn_w, 0);
  EXPECT_GT(c.attn_b, c.attn_f);
  EXPECT_LT(c.attn_b, c.b);
}

TEST(ModernModels, ActivationMemoryOfGqaSwigluWithCpIsExactToTheByte) {
  // Llama 3 70B, t = 4 with SP, cp = 2, b = 1, fused attention, no recompute, per layer:
  // s = 8192 / 2 tokens; outside TP 10sbh / t; Q, K, V and the attention output
  // 2s(q + 2kv + q) / t; SwiGLU up (2f wide) and activation output 2s(2f + f) / t.
  const ModelShape& m = preset("llama3-70b");
  WorkloadOptions o;
  o.tp = 4;
  o.sequence_parallel = true;
  o.cp = 2;
  o.flash_attention = true;
  const double s = 4096, h = 8192, q = 8192, kv = 1024, f = 28672, t = 4;
  const double expected = 10 * s * h / t + 2 * s * (q + 2 * kv + q) / t + 2 * s * (2 * f + f) / t;
  EXPECT_EQ(layer_activation_bytes(m, o).value, expected);
  // FP8 (Transformer Engine): the four linear layers keep their inputs' FP8 casts, 1 byte: the
  // two norm outputs (qkv, mlp-up inputs: 4sh -> 2sh), the attention output (2sq -> sq) and the
  // activation output (2sf -> sf); Q, K, V and the up-projection output stay 16-bit.
  o.fp8 = true;
  const double fp8 = 8 * s * h / t + s * (2 * (q + 2 * kv) + q) / t + s * (2 * 2 * f + f) / t;
  EXPECT_EQ(layer_activation_bytes(m, o).value, fp8);
}

TEST(ModernModels, ExpertStateIsShardedOverTheExpertDataParallelGroup) {
  // 1e9 dense + 3e9 expert parameters, distributed optimizer over d = 16 and expert-DP = 2:
  // weights 2 B x 4e9, bf16 gradients 2 B x 4e9 (ZeRO-1), optimizer 12 B x (1e9/16 + 3e9/2).
  const ModelStateBytes s = model_state_bytes(4e9, 3e9, 1, 16, 2, false, false, 2.0, 0.0);
  EXPECT_DOUBLE_EQ(s.weights.value, 8e9);
  EXPECT_DOUBLE_EQ(s.gradients.value, 8e9);
  EXPECT_DOUBLE_EQ(s.optimizer.value, 12 * (1e9 / 16 + 3e9 / 2));
  // FP8 adds its weight copy and transpose, 2 B per parameter of the transformer layers (here
  // 3.5e9 of the 4e9: the rest stands for the embedding and output layer, which have none).
  EXPECT_DOUBLE_EQ(model_state_bytes(4e9, 3e9, 1, 16, 2, false, true, 2.0, 3.5e9).weights.value,
                   8e9 + 7e9);
  // Megatron's fp32 gradient buffer: 4 B per gradient, ZeRO-2 shards it like the optimizer.
  EXPECT_DOUBLE_EQ(model_state_bytes(4e9, 3e9, 1, 16, 2, false, false, 4.0, 0.0).gradients.value,
                   16e9);
  EXPECT_DOUBLE_EQ(model_state_bytes(4e9, 3e9, 2, 16, 2, false, false, 4.0, 0.0).gradients.value,
                   4 * (1e9 / 16 + 3e9 / 2));
}

// A GPT-style layer (GELU, f = 4h), h = 1024, s = 2048, on an H100, sequence-parallel at `t`
// with fused attention: the TP-overlap tests' layer.
struct SpLayer {
  ModelShape m{"t", 2, 1024, 16, 4096, 2048, 32000};
  GpuModel gpu{resolve_profile("dgx-h100", "", "", "").gpu};
  WorkloadOptions o;
  explicit SpLayer(int t) {
    o.tp = t;
    o.sequence_parallel = true;
    o.flash_attention = true;
  }
};

TEST(ModernModels, TpCommOverlapHidesUnderThePairedGemmsLessOneRingChunk) {
  // The layer at t = 2. The hideable time of each pass is (t-1)/t of the GEMMs beside its
  // sequence-parallel collectives: F: qkv (s x 3h/t x h), proj (s x h x h/t), mlp up
  // (s x f/t x h), mlp down (s x h x f/t); B: their input gradients (m x k from m x n times
  // n x k); W: the qkv and mlp-up weight gradients (k x n over m), beside the re-gather of their
  // inputs.
  SpLayer l(2);
  const ModelShape& m = l.m;
  const GpuModel& gpu = l.gpu;
  WorkloadOptions& o = l.o;
  const StageCosts c = stage_costs_for(m, gpu, o, 1, 0, false, false);
  auto g = [&](long long mm, long long n, long long k) {
    const TimePs t = gpu.gemm_time(mm, n, k, DType::kBf16);
    return t - t / 2;
  };
  const long long s = 2048, h = 1024, f = 4096;
  EXPECT_EQ(c.hide_f, g(s, 3 * h / 2, h) + g(s, h, h / 2) + g(s, f / 2, h) + g(s, h, f / 2));
  EXPECT_EQ(c.hide_b, g(s, h, 3 * h / 2) + g(s, h / 2, h) + g(s, h, f / 2) + g(s, f / 2, h));
  EXPECT_EQ(c.hide_w, g(h, 3 * h / 2, s) + g(h, f / 2, s));
  EXPECT_EQ(c.hide_r, 0);       // no recomputation
  o.sequence_parallel = false;  // nothing to overlap without the sequence-parallel collectives
  EXPECT_EQ(stage_costs_for(m, gpu, o, 1, 0, false, false).hide_f, 0);
  // The pass: compute - hideable + max(hideable, comm).
  EXPECT_EQ(overlapped_pass_time(10, 4, 3), 10);
  EXPECT_EQ(overlapped_pass_time(10, 4, 7), 13);
  EXPECT_EQ(overlapped_pass_time(10, 20, 5), 10);  // never more hidden than the compute
}

TEST(ModernModels, TpCommOverlapSplitsTheRingExchangeGemmsIntoTRowChunks) {
  // The same layer at t = 4 with WorkloadOptions::tp_comm_overlap: Transformer Engine runs the
  // F (and R) GEMMs beside the sequence-parallel collectives and the input gradients of proj and
  // mlp down in B as t GEMMs of s/t rows (NeMo's userbuffers configurations: ring exchanges,
  // pipelined reduce-scatters of 4 chunks); qkv and mlp-up input gradients and the W GEMMs
  // overlap in bulk, unsplit. A split GEMM adds t x gemm(s/t) - gemm(s) to its pass and hides
  // (t - 1) x gemm(s/t); an unsplit one hides gemm - gemm / t and adds nothing.
  SpLayer l(4);
  const ModelShape& m = l.m;
  const GpuModel& gpu = l.gpu;
  WorkloadOptions& o = l.o;
  o.recompute = Recompute::kFull;
  const StageCosts plain = stage_costs_for(m, gpu, o, 1, 0, false, false);
  o.tp_comm_overlap = true;
  const StageCosts split = stage_costs_for(m, gpu, o, 1, 0, false, false);
  const long long s = 2048, h = 1024, f = 4096, t = 4;
  auto gemm = [&](long long mm, long long n, long long k) {
    return gpu.gemm_time(mm, n, k, DType::kBf16);
  };
  auto added = [&](long long n, long long k) { return t * gemm(s / t, n, k) - gemm(s, n, k); };
  auto hidden = [&](long long n, long long k) { return (t - 1) * gemm(s / t, n, k); };
  auto whole = [&](long long mm, long long n, long long k) {
    return gemm(mm, n, k) - gemm(mm, n, k) / t;
  };
  const TimePs f_added = added(3 * h / t, h) + added(h, h / t) + added(f / t, h) + added(h, f / t);
  EXPECT_EQ(split.f, plain.f + f_added);
  EXPECT_EQ(split.r, plain.r + f_added);
  EXPECT_EQ(split.hide_f,
            hidden(3 * h / t, h) + hidden(h, h / t) + hidden(f / t, h) + hidden(h, f / t));
  EXPECT_EQ(split.hide_r, split.hide_f);
  // B: proj's input gradient (s x h/t from s x h) and mlp down's (s x f/t) split; qkv's
  // (s x h) and mlp up's (s x h) whole.
  EXPECT_EQ(split.b, plain.b + added(h / t, h) + added(f / t, h));
  EXPECT_EQ(split.hide_b,
            whole(s, h, 3 * h / t) + hidden(h / t, h) + whole(s, h, f / t) + hidden(f / t, h));
  EXPECT_EQ(split.w, plain.w);
  EXPECT_EQ(split.hide_w, plain.hide_w);
  // Without sequence parallelism there is nothing to overlap: the option changes nothing.
  o.sequence_parallel = false;
  const StageCosts nosp = stage_costs_for(m, gpu, o, 1, 0, false, false);
  o.tp_comm_overlap = false;
  EXPECT_EQ(nosp.f, stage_costs_for(m, gpu, o, 1, 0, false, false).f);
}

TEST(ModernModels, MegatronModelStateIs18BytesPerParameterAnd6Plus12OverD) {
  // Megatron-LM's distributed-optimizer table (docs/source/api-guide/dist_optimizer.md), bf16
  // parameters with fp32 gradients: 18 bytes per parameter without the distributed optimizer,
  // 6 + 12/d with it; the ZeRO paper's convention (bf16 gradients) 16 and 4 + 12/d.
  ParallelConfig c;
  EXPECT_EQ(grad_bytes_per_param(c), 4.0);
  const double P = 1e9, d = 8;
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 0, 8, false, grad_bytes_per_param(c)).total().value,
                   18 * P);
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 1, 8, false, grad_bytes_per_param(c)).total().value,
                   (6 + 12 / d) * P);
  c.grad_reduce_in_fp32 = false;
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 0, 8, false, grad_bytes_per_param(c)).total().value,
                   16 * P);
  EXPECT_DOUBLE_EQ(model_state_bytes(P, 1, 8, false, grad_bytes_per_param(c)).total().value,
                   (4 + 12 / d) * P);
}

TEST(ModernModels, Fp8GemmsRunOnTheFp8PeakAtTheProfilesEfficiency) {
  GpuSpec g;
  g.peak_flops[static_cast<int>(DType::kBf16)] = 1000e12;
  g.peak_flops[static_cast<int>(DType::kFp8)] = 2000e12;
  g.gemm_max_efficiency = 0.8;
  g.gemm_max_efficiency_fp8 = 0.6;
  g.kernel_latency = 0;
  const GpuModel gpu(g);
  // Same shape: FP8 time / BF16 time = (1000 x 0.8) / (2000 x 0.6).
  const double bf = static_cast<double>(gpu.gemm_time(8192, 8192, 8192, DType::kBf16));
  const double f8 = static_cast<double>(gpu.gemm_time(8192, 8192, 8192, DType::kFp8));
  EXPECT_NEAR(f8 / bf, 800.0 / 1200.0, 1e-6);
  // The layer's linear GEMMs are FP8, the attention core is not.
  WorkloadOptions o;
  o.fp8 = true;
  o.flash_attention = true;
  for (const LayerOp& op : layer_ops(preset("llama3-8b"), o, Pass::kForward)) {
    const std::string n = op.name;
    if (n == "attn_scores" || n == "attn_context") {
      EXPECT_FALSE(op.fp8) << n;
    }
    if (n == "qkv" || n == "proj" || n == "mlp_up" || n == "mlp_down") {
      EXPECT_TRUE(op.fp8) << n;
    }
  }
}

TEST(ModernModels, DelayedScalingAllReducesEachStagePassAmaxesOnce) {
  // Transformer Engine keeps 3 forward scaling entries (input, weight, output) and 2 backward
  // ones (output gradient, input gradient) per FP8 GEMM, a float32 amax each; a dense layer has
  // 4 FP8 GEMMs (qkv, proj, mlp up, mlp down). Four Llama 3 8B layers: F 4 x 4 x 3 x 4 = 192
  // bytes, B 4 x 4 x 2 x 4 = 128 bytes, one all-reduce each over the amax group; W and the
  // recompute none.
  GpuSpec g;
  g.peak_flops[static_cast<int>(DType::kBf16)] = 1000e12;
  g.peak_flops[static_cast<int>(DType::kFp8)] = 2000e12;
  const GpuModel gpu(g);
  const ModelShape& m = preset("llama3-8b");
  ParallelConfig par;
  par.fp8 = "hybrid";
  par.recompute = "full";
  WorkloadOptions o = workload_options(par, true);
  EXPECT_TRUE(o.fp8_amax_reduction);  // Megatron's default recipe is delayed
  auto amax = [](const std::vector<TpComm>& comms) {
    std::vector<TpComm> out;
    for (const TpComm& c : comms)
      if (c.group == CommGroup::kAmax) out.push_back(c);
    return out;
  };
  const StageCosts c = stage_costs_for(m, gpu, o, 4, 0, false, false);
  const std::vector<TpComm> f = amax(c.comm_f), b = amax(c.comm_b);
  ASSERT_EQ(f.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(f[0].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(f[0].count, 1);
  EXPECT_EQ(f[0].bytes.value, 192.0);
  EXPECT_EQ(b[0].bytes.value, 128.0);
  EXPECT_TRUE(amax(c.comm_w).empty());
  EXPECT_TRUE(amax(c.comm_r).empty());
  EXPECT_STREQ(comm_group_name(CommGroup::kAmax), "fp8 amax");
  // Current scaling (tensorwise) and BF16 reduce no amaxes; neither does a stage without
  // transformer layers.
  par.fp8_recipe = "tensorwise";
  EXPECT_FALSE(workload_options(par, true).fp8_amax_reduction);
  EXPECT_TRUE(amax(stage_costs_for(m, gpu, workload_options(par, true), 4, 0, false, false).comm_f)
                  .empty());
  par.fp8 = "off";
  par.fp8_recipe = "delayed";
  EXPECT_FALSE(workload_options(par, true).fp8_amax_reduction);
  EXPECT_TRUE(amax(stage_costs_for(m, gpu, o, 0, 0, true, false).comm_f).empty());
  // An MoE layer of Qwen3-30B-A3B at ep = 8: qkv and proj, and the 128 / 8 = 16 local experts'
  // up and down GEMMs (a grouped GEMM is one GEMM per expert; the router stays 16-bit):
  // 2 + 2 x 16 = 34 GEMMs, F 34 x 3 x 4 = 408 bytes, B 34 x 2 x 4 = 272.
  WorkloadOptions e;
  e.fp8 = true;
  e.fp8_amax_reduction = true;
  e.ep = 8;
  const Fp8AmaxBytes q = fp8_amax_bytes(preset("qwen3-30b-a3b"), e, 0, 1);
  EXPECT_EQ(q.forward.value, 408.0);
  EXPECT_EQ(q.backward.value, 272.0);
}

TEST(ModernModels, CollectivesOfCpAndEpGoToTheirGroups) {
  // Context parallelism, a ring of cp - 1 steps: in each the forward sends the K and V a rank
  // holds, 2 x kv / t x s_local x 2 bytes (kv = 8 groups x 128 = 1024, s_local = 8192 / 2); the
  // backward sends them with their gradients (twice that); W makes none.
  const ModelShape& m = preset("llama3-70b");
  WorkloadOptions o;
  o.tp = 4;
  o.sequence_parallel = true;
  o.cp = 2;
  o.flash_attention = true;
  const double kv = 2.0 * (1024 / 4) * 4096 * 2;
  for (const Pass pass : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight}) {
    int cp = 0;
    for (const TpComm& c : layer_tp_comms(m, o, pass))
      if (c.group == CommGroup::kCp) {
        ++cp;
        EXPECT_EQ(c.kind, CollectiveKind::kSendRecv);
        EXPECT_EQ(c.count, 1);  // cp - 1
        EXPECT_EQ(c.bytes.value, pass == Pass::kForward ? kv : 2 * kv);
      }
    EXPECT_EQ(cp, pass == Pass::kBackwardWeight ? 0 : 1);
  }
  // At cp = 4, three steps.
  o.cp = 4;
  for (const TpComm& c : layer_tp_comms(m, o, Pass::kForward))
    if (c.group == CommGroup::kCp) {
      EXPECT_EQ(c.count, 3);
      EXPECT_EQ(c.bytes.value, kv / 2);  // s_local = 8192 / 4
    }
  // all_gather: the forward gathers every rank's keys and values (kv / 2 from each of 4), the
  // backward gathers them again and reduce-scatters their gradients.
  o.cp_comm = CpComm::kAllGather;
  auto cp_comms = [&](Pass pass) {
    std::vector<TpComm> out;
    for (const TpComm& c : layer_tp_comms(m, o, pass))
      if (c.group == CommGroup::kCp) out.push_back(c);
    return out;
  };
  std::vector<TpComm> f = cp_comms(Pass::kForward), b = cp_comms(Pass::kBackwardInput);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, CollectiveKind::kAllGather);
  EXPECT_EQ(f[0].bytes.value, 2 * kv);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].kind, CollectiveKind::kAllGather);
  EXPECT_EQ(b[1].kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(b[1].bytes.value, 2 * kv);
  // a2a (Ulysses): q, k, v of the rank's 2,048 tokens, (8192 + 1024 + 1024) / 4 columns, and
  // the attention output, 8192 / 4 columns, 2 bytes each, as all-to-alls in F and again in B.
  o.cp_comm = CpComm::kA2a;
  for (const Pass pass : {Pass::kForward, Pass::kBackwardInput}) {
    const std::vector<TpComm> u = cp_comms(pass);
    ASSERT_EQ(u.size(), 2u);
    EXPECT_EQ(u[0].kind, CollectiveKind::kAllToAll);
    EXPECT_EQ(u[0].bytes.value, 2.0 * (8192 + 1024 + 1024) / 4 * 2048);
    EXPECT_EQ(u[1].kind, CollectiveKind::kAllToAll);
    EXPECT_EQ(u[1].bytes.value, 2.0 * 8192 / 4 * 2048);
  }
  EXPECT_TRUE(cp_comms(Pass::kBackwardWeight).empty());
  // Expert parallelism: dispatch and combine, each s x k x h x 2 bytes per rank.
  const ModelShape& q = preset("qwen3-30b-a3b");
  WorkloadOptions e;
  e.ep = 8;
  int ep_f = 0;
  for (const TpComm& c : layer_tp_comms(q, e, Pass::kForward, true))
    if (c.group == CommGroup::kEp) {
      ++ep_f;
      EXPECT_EQ(c.kind, CollectiveKind::kAllToAll);
      EXPECT_EQ(c.count, 2);
      EXPECT_EQ(c.bytes.value, 2.0 * 4096 * 8 * 2048);
    }
  EXPECT_EQ(ep_f, 1);
}

constexpr const char* kLlama3_8b = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256})";

TEST(ModernModels, HuggingFaceConfigGivesThePresetsShape) {
  ModelShape m = parse_hf_config(kLlama3_8b, "llama3/config.json");
  m.seq_length = 8192;
  EXPECT_EQ(parameter_count(m), 8'030'261'248.0);
  m.name = "llama3-8b";
  EXPECT_EQ(m, preset("llama3-8b"));
}

using testing::expect_hf_config_error;

TEST(ModernModels, HuggingFaceConfigErrorsNameTheField) {
  std::string t = kLlama3_8b;
  expect_hf_config_error(R"({"model_type": "gpt_neox", "hidden_size": 8})", "model_type");
  expect_hf_config_error(R"({"model_type": "gemma3", "hidden_size": 8})", "model_type");
  std::string extra = t;
  extra.insert(1, R"("sliding_windoww": 4096, )");
  expect_hf_config_error(extra, "sliding_windoww");
  std::string groups = t;
  groups.replace(groups.find(R"("num_key_value_heads": 8)"), 24, R"("num_key_value_heads": 7)");
  expect_hf_config_error(groups, "num_key_value_heads");
  expect_hf_config_error("{not json", "");
}

using testing::expect_scenario_error;
using testing::scenario;

TEST(ModernModels, BadShapesAndLayoutsAreOneLineErrorsNamingTheKey) {
  const std::string dense = "{micro_batch_size: 1, global_batch_size: 8}";
  expect_scenario_error(
      "{num_layers: 2, hidden_size: 64, num_attention_heads: 8, num_query_groups: 3, "
      "seq_length: 64, vocab_size: 128}",
      dense, "model.num_query_groups");
  expect_scenario_error(
      "{num_layers: 2, hidden_size: 64, num_attention_heads: 8, num_experts: 4, "
      "moe_router_topk: 5, seq_length: 64, vocab_size: 128}",
      dense, "model.moe_router_topk");
  expect_scenario_error("{preset: qwen3-30b-a3b, use_flash_attn: true}",
                        "{expert_model_parallel_size: 3, micro_batch_size: 1, "
                        "global_batch_size: 8}",
                        "parallel.expert_model_parallel_size");
  expect_scenario_error("{preset: llama3-8b, use_flash_attn: true, seq_length: 8190}",
                        "{context_parallel_size: 2, micro_batch_size: 1, global_batch_size: 8}",
                        "parallel.context_parallel_size");
  for (const char* unfused : {"unfused", "local"})
    expect_scenario_error(std::string("{preset: llama3-8b, attention_backend: ") + unfused + "}",
                          "{context_parallel_size: 2, micro_batch_size: 1, global_batch_size: 8}",
                          "parallel.context_parallel_size");
  expect_scenario_error("{preset: llama3-8b, use_flash_attn: false}",
                        "{context_parallel_size: 2, micro_batch_size: 1, global_batch_size: 8}",
                        "parallel.context_parallel_size");
  // Megatron-core's attention backends (megatron/core/transformer/enums.py AttnBackend).
  expect_scenario_error("{preset: llama3-8b, attention_backend: sdpa}", dense,
                        "model.attention_backend");
  expect_scenario_error("{preset: llama3-8b, attention_backend: unfused, use_flash_attn: true}",
                        dense, "model.use_flash_attn");
  expect_scenario_error("{preset: llama3-8b, attention_backend: auto, use_flash_attn: false}",
                        dense, "model.use_flash_attn");
  expect_scenario_error("{preset: llama3-8b, use_flash_attn: true}",
                        "{tensor_model_parallel_size: 8, context_parallel_size: 2, "
                        "micro_batch_size: 1, global_batch_size: 8}",
                        "parallel.context_parallel_size");
  expect_scenario_error("{preset: llama3-8b}",
                        "{fp8: e5m2, micro_batch_size: 1, global_batch_size: 8}", "parallel.fp8");
  // Megatron's FP8 recipes: delayed and tensorwise are modelled; a recipe without FP8 would be
  // ignored by Megatron and is refused here.
  expect_scenario_error("{preset: llama3-8b}",
                        "{fp8: hybrid, fp8_recipe: mxfp8, micro_batch_size: 1, "
                        "global_batch_size: 8}",
                        "parallel.fp8_recipe");
  expect_scenario_error("{preset: llama3-8b}",
                        "{fp8_recipe: tensorwise, micro_batch_size: 1, global_batch_size: 8}",
                        "parallel.fp8_recipe");
  // Megatron's cp_comm_type: its hierarchical a2a+p2p is not modelled; a2a needs each TP
  // rank's heads and key/value heads (6 here) to split over the CP group (4).
  for (const char* form : {"ring", "a2a+p2p"})
    expect_scenario_error("{preset: llama3-8b, use_flash_attn: true}",
                          std::string("{context_parallel_size: 2, cp_comm_type: ") + form +
                              ", micro_batch_size: 1, global_batch_size: 8}",
                          "parallel.cp_comm_type");
  expect_scenario_error(
      "{num_layers: 2, hidden_size: 768, num_attention_heads: 6, "
      "seq_length: 2048, vocab_size: 32000, use_flash_attn: true}",
      "{context_parallel_size: 4, cp_comm_type: a2a, micro_batch_size: 1, "
      "global_batch_size: 8}",
      "parallel.cp_comm_type");
  // Megatron's token dispatchers: alltoall is the one the model prices (and `export` writes);
  // allgather and flex (DeepEP, HybridEP) are refused by name, as is a misspelling, in a
  // configuration and in a batch-only section alike.
  const std::string moe = "{preset: qwen3-30b-a3b, use_flash_attn: true}";
  for (const char* d : {"flex", "allgather", "all_to_all"}) {
    expect_scenario_error(moe,
                          std::string("{expert_model_parallel_size: 8, micro_batch_size: 1, "
                                      "global_batch_size: 8, moe_token_dispatcher_type: ") +
                              d + "}",
                          "parallel.moe_token_dispatcher_type");
    expect_scenario_error(
        moe, std::string("{global_batch_size: 8, moe_token_dispatcher_type: ") + d + "}",
        "parallel.moe_token_dispatcher_type");
  }
  EXPECT_NO_THROW(scenario(moe,
                           "{expert_model_parallel_size: 8, micro_batch_size: 1, "
                           "global_batch_size: 8, moe_token_dispatcher_type: alltoall}"));
}

TEST(ModernModels, AttentionIsFusedUnlessTheScenarioSaysOtherwise) {
  // Megatron-core's attention_backend defaults to auto (Transformer Engine picks a fused
  // kernel); unfused and local store the s x s scores; the older use_flash_attn agrees with it.
  const std::string par = "{micro_batch_size: 1, global_batch_size: 8}";
  struct Case {
    const char* model;
    bool fused;
  };
  for (const Case& c : {Case{"{preset: llama3-8b}", true},
                        Case{"{preset: llama3-8b, attention_backend: auto}", true},
                        Case{"{preset: llama3-8b, attention_backend: flash}", true},
                        Case{"{preset: llama3-8b, attention_backend: fused}", true},
                        Case{"{preset: llama3-8b, attention_backend: unfused}", false},
                        Case{"{preset: llama3-8b, attention_backend: local}", false},
                        Case{"{preset: llama3-8b, use_flash_attn: true}", true},
                        Case{"{preset: llama3-8b, use_flash_attn: false}", false},
                        Case{"{preset: llama3-8b, use_flash_attn: false, "
                             "attention_backend: unfused}",
                             false}})
    EXPECT_EQ(scenario(c.model, par).flash_attention, c.fused) << c.model;
  // What the flag changes: one layer's stored activations at b = 1, s = 8192, t = 1, no
  // recompute lose the 5 a s^2 bytes of the unfused core (scores and softmax in bf16, 1-byte
  // dropout mask; Korthikanti et al. 2022, eq. 1) and keep the rest.
  const Scenario fused = scenario("{preset: llama3-8b}", par);
  const Scenario unfused = scenario("{preset: llama3-8b, attention_backend: unfused}", par);
  const double a = fused.model.num_attention_heads, s = fused.model.seq_length;
  const double drop =
      layer_activation_bytes(unfused.model, workload_options(unfused.parallel, false), false)
          .value -
      layer_activation_bytes(fused.model, workload_options(fused.parallel, true), false).value;
  EXPECT_NEAR(drop, 5.0 * a * s * s, 0.01 * 5.0 * a * s * s);
}

TEST(ModernModels, ContextParallelSplitsTheDataParallelSize) {
  // 16 GPUs, t = 2, cp = 2, p = 1: d = 16 / 4 = 4.
  const Scenario s = scenario("{preset: llama3-8b, use_flash_attn: true}",
                              "{tensor_model_parallel_size: 2, context_parallel_size: 2, "
                              "sequence_parallel: true, micro_batch_size: 1, "
                              "global_batch_size: 32}",
                              2);
  EXPECT_EQ(s.parallel.data_parallel, 4);
  EXPECT_EQ(s.num_microbatches(), 8);
}

}  // namespace
}  // namespace pw::hw
