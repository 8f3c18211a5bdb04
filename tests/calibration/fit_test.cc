// Fitting on synthetic data with known parameters: every parameter must come back within 1%.
#include "calibration/fit.h"

#include <gtest/gtest.h>

#include <cmath>

#include "calibration/gemm_shapes.h"
#include "core/error.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/transformer.h"

namespace pw::calibration {
namespace {

/// Deterministic multiplicative noise in [-amp, +amp] (a fixed LCG, not the program's RNG).
double noise(int i, double amp) {
  unsigned x = 1103515245u * static_cast<unsigned>(i + 1) + 12345u;
  return 1.0 + amp * (2.0 * ((x >> 8) % 10000) / 9999.0 - 1.0);
}

std::vector<double> sizes_8b_to_1gib() {
  std::vector<double> out;
  for (double b = 8; b <= 1024.0 * 1024 * 1024; b *= 4) out.push_back(b);
  return out;
}

TEST(AlphaBeta, RecoversExactParameters) {
  const double alpha = 5e-6, bw = 100e9;  // 5 us, 100 GB/s
  std::vector<double> b = sizes_8b_to_1gib(), t;
  for (double x : b) t.push_back(alpha + x / bw);
  AlphaBetaFit f = fit_alpha_beta(b, t, "synthetic", "x");
  EXPECT_NEAR(f.alpha_s, alpha, 0.01 * alpha);
  EXPECT_NEAR(f.bandwidth(), bw, 0.01 * bw);
  EXPECT_NEAR(f.quality.r2_log, 1.0, 1e-9);
  EXPECT_LT(f.quality.worst_residual, 1e-9);
}

TEST(AlphaBeta, RecoversParametersUnderHalfPercentNoise) {
  const double alpha = 2e-6, bw = 25e9;
  std::vector<double> b = sizes_8b_to_1gib(), t;
  for (std::size_t i = 0; i < b.size(); ++i) t.push_back((alpha + b[i] / bw) * noise(i, 0.005));
  AlphaBetaFit f = fit_alpha_beta(b, t, "synthetic", "x");
  EXPECT_NEAR(f.alpha_s, alpha, 0.01 * alpha);
  EXPECT_NEAR(f.bandwidth(), bw, 0.01 * bw);
  EXPECT_LE(f.quality.worst_residual, 0.0101);  // cannot beat the noise by much
}

TEST(AlphaBeta, NegativeInterceptIsClampedToZero) {
  // Pure bandwidth, minus a constant that would make alpha negative.
  std::vector<double> b = {1e6, 2e6, 4e6, 8e6}, t;
  for (double x : b) t.push_back(x / 1e9 - 1e-5);
  AlphaBetaFit f = fit_alpha_beta(b, t, "synthetic", "x");
  EXPECT_EQ(f.alpha_s, 0.0);
  EXPECT_GT(f.bandwidth(), 0.0);
}

TEST(AlphaBeta, OneSizeIsBadInput) {
  EXPECT_THROW(fit_alpha_beta({64, 64}, {1e-6, 1.1e-6}, "f.json", "transfers"), ConfigError);
}

/// Synthetic GPU: hwmodels' own formula with known parameters generates the times.
hw::GpuSpec known_gpu() {
  hw::GpuSpec g;
  g.sm_count = 132;
  g.gemm_max_efficiency = 0.70;
  g.gemm_k_half = 181;  // on the fit's grid (2^7.5 rounded)
  g.tiles = hw::default_gemm_tiles();
  return g;
}

std::vector<GemmSample> synthetic_gemms(const hw::GpuSpec& spec, double peak, double latency,
                                        double amp) {
  hw::GpuModel model(spec);
  auto shapes = gemm_sweep({1024, 2048, 4096, 8192}, {512, 2048, 4096}, 128, true);
  std::vector<GemmSample> out;
  int i = 0;
  for (const auto& s : shapes) {
    double eff = model.fitted_gemm_efficiency(s.m, s.n, s.k, s.batch);
    double t = (latency + 2.0 * s.m * s.n * s.k * s.batch / (peak * eff)) * noise(i++, amp);
    out.push_back({s.op, "bf16", s.m, s.n, s.k, s.batch, {t, t, t, 1}});
  }
  return out;
}

TEST(GemmFit, RecoversEfficiencyKHalfAndLatencyOnAGpu) {
  const double peak = 989e12, latency = 4e-6;
  hw::GpuSpec base = known_gpu();
  auto samples = synthetic_gemms(base, peak, latency, 0.0);
  auto fits = fit_gemms(
      samples, base, [&](const std::string&) { return peak; }, "synthetic");
  ASSERT_EQ(fits.size(), 1u);
  const GemmFit& f = fits[0];
  EXPECT_EQ(f.dtype, "bf16");
  EXPECT_NEAR(f.max_efficiency, 0.70, 0.007);
  EXPECT_EQ(f.k_half, 181);
  EXPECT_NEAR(f.kernel_latency_s, latency, 0.01 * latency);
  EXPECT_GT(f.quality.r2_log, 0.9999);
}

TEST(GemmFit, NoisyGpuDataStillWithinOnePercent) {
  const double peak = 989e12, latency = 4e-6;
  hw::GpuSpec base = known_gpu();
  auto samples = synthetic_gemms(base, peak, latency, 0.003);
  auto fits = fit_gemms(
      samples, base, [&](const std::string&) { return peak; }, "synthetic");
  EXPECT_NEAR(fits[0].max_efficiency, 0.70, 0.007);
  EXPECT_NEAR(fits[0].kernel_latency_s, latency, 0.01 * latency);
}

TEST(GemmFit, CpuPeakIsTheFittedAsymptote) {
  // One compute unit, 1x1 tile: t = latency + flops / rate, with rate 20 GFLOP/s.
  hw::GpuSpec cpu;
  cpu.sm_count = 1;
  cpu.tiles = {{1, 1, 1.0}};
  const double rate = 20e9, latency = 3e-7;
  std::vector<GemmSample> samples;
  for (const auto& s : gemm_sweep({32, 64, 128}, {16, 64}, 16, false)) {
    double t = latency + 2.0 * s.m * s.n * s.k * s.batch / rate;
    samples.push_back({s.op, "fp64", s.m, s.n, s.k, s.batch, {t, t, t, 1}});
  }
  auto fits = fit_gemms(
      samples, cpu, [](const std::string&) { return 0.0; }, "synthetic");
  EXPECT_NEAR(fits[0].peak_flops * fits[0].max_efficiency, rate, 0.01 * rate);
  EXPECT_NEAR(fits[0].kernel_latency_s, latency, 0.01 * latency);
  EXPECT_EQ(fits[0].k_half, 0);
}

TEST(LayerPasses, ElementwiseBandwidthsAreRecoveredFromTheExecutorPasses) {
  // A CPU whose GEMMs run at 20 GFLOP/s + 0.3 us each and whose memory-bound ops stream the
  // workload model's bytes at 1.5 GB/s + 0.3 us each in the forward and 2.25 GB/s in the
  // backward passes (B and W: the executor's backward moves more model bytes per tanh); its
  // layer passes are the sums over hwmodels' op list (hand-written here: latency + flops / rate
  // or latency + bytes / bw).
  const double rate = 20e9, latency = 3e-7, bw = 1.5e9, bw_bwd = 2.25e9;
  RawResults raw;
  raw.provenance.backend = "cpu";
  for (const auto& s : gemm_sweep({32, 64, 128, 256}, {16, 64, 128}, 16, true)) {
    double t = latency + 2.0 * s.m * s.n * s.k * s.batch / rate;
    raw.gemms.push_back({s.op, "fp64", s.m, s.n, s.k, s.batch, {t, t, t, 1}});
  }
  raw.memory.push_back({"copy", "fp64", 1e6, {1e-4, 1e-4, 1e-4, 1}});
  raw.memory.push_back({"copy", "fp64", 1e7, {1e-3, 1e-3, 1e-3, 1}});
  const char* passes[] = {"forward", "backward_input", "backward_weight"};
  const hw::Pass kinds[] = {hw::Pass::kForward, hw::Pass::kBackwardInput,
                            hw::Pass::kBackwardWeight};
  for (int h : {64, 128, 256}) {
    for (int s : {64, 128}) {
      ModelShape shape{"x", 1, h, h / 16, 4 * h, s, 64};
      for (int p = 0; p < 3; ++p) {
        double t = 0;
        for (const hw::LayerOp& op : hw::layer_ops(shape, hw::WorkloadOptions{}, kinds[p]))
          t +=
              latency + (op.gemm ? op.flops.value / rate : op.bytes.value / (p == 0 ? bw : bw_bwd));
        raw.layers.push_back({passes[p], h, h / 16, s, {t, t, t, 1}});
      }
    }
  }
  hw::GpuSpec cpu;
  cpu.sm_count = 1;
  cpu.tiles = {{1, 1, 1.0}};
  FitResult fit = fit_all(
      raw, cpu, [](const std::string&) { return 0.0; }, "synthetic");
  EXPECT_TRUE(fit.has_elementwise);
  EXPECT_EQ(fit.elementwise_source, "executor layer passes");
  EXPECT_NEAR(fit.elementwise.bandwidth(), bw, 0.01 * bw);
  EXPECT_TRUE(fit.has_elementwise_bwd);
  EXPECT_NEAR(fit.elementwise_bwd.bandwidth(), bw_bwd, 0.01 * bw_bwd);
  // The streaming figure is the copy kernel's: 1e6 B in 100 us and 1e7 B in 1 ms = 10 GB/s.
  EXPECT_EQ(fit.memory_source, "copy kernel");
  EXPECT_NEAR(fit.memory_pooled.bandwidth(), 10e9, 0.01 * 10e9);
  ASSERT_EQ(fit.layer_checks.size(), 3u);
  for (const auto& [pass, q] : fit.layer_checks) {
    EXPECT_EQ(q.points, 6) << pass;
    EXPECT_LT(q.worst_residual, 0.01) << pass;
  }
}

TEST(GemmFit, OneShapeIsBadInput) {
  std::vector<GemmSample> one = {{"qkv", "bf16", 64, 64, 64, 1, {1e-6, 1e-6, 1e-6, 1}}};
  EXPECT_THROW(fit_gemms(
                   one, known_gpu(), [](const std::string&) { return 1e12; }, "f"),
               ConfigError);
}

TEST(BusBandwidth, NcclTestsFactors) {
  // nccl-tests: 2(n-1)/n all-reduce, (n-1)/n all-gather/reduce-scatter, 1 broadcast/send-recv.
  EXPECT_DOUBLE_EQ(busbw_factor("all_reduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor("all_gather", 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor("reduce_scatter", 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor("broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor("send_recv", 2), 1.0);
  CollectiveSample c{"nccl", "all_reduce", 8, 1e9, {0.01, 0.01, 0.01, 1}, 0};
  EXPECT_DOUBLE_EQ(c.algbw(), 1e11);
  EXPECT_DOUBLE_EQ(c.busbw(), 1.75e11);
}

TEST(GemmShapes, LayerGemmsFollowMegatron) {
  // h = 1024, a = 16, s = 2048, b = 1, t = 2: QKV 2048 x 1536 x 1024; scores 2048 x 2048 x 64
  // batched over 8 local heads; MLP up 2048 x 2048 x 1024.
  auto g = layer_gemms({1024, 16, 0, 2048, 1, 2}, false);
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g[0], (GemmShape{"qkv", 2048, 1536, 1024, 1}));
  EXPECT_EQ(g[2], (GemmShape{"mlp_up", 2048, 2048, 1024, 1}));
  EXPECT_EQ(g[4], (GemmShape{"attn_score", 2048, 2048, 64, 8}));
  auto b = layer_gemms({1024, 16, 0, 2048, 1, 2}, true);
  EXPECT_EQ(b.size(), 18u);
  EXPECT_EQ(b[1], (GemmShape{"qkv_dgrad", 2048, 1024, 1536, 1}));
  EXPECT_EQ(b[2], (GemmShape{"qkv_wgrad", 1024, 1536, 2048, 1}));
}

}  // namespace
}  // namespace pw::calibration
