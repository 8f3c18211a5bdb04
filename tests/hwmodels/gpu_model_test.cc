// GPU model: GEMM efficiency with wave quantisation, measured-table correction, memory-bound time.
#include "hwmodels/gpu_model.h"

#include <gtest/gtest.h>

#include "hwmodels/profile.h"

namespace pw::hw {
namespace {

std::string profile_path(const std::string& name) {
  return std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/" + name + ".yaml";
}

double tflops(const GpuModel& g, long long m, long long n, long long k) {
  return 2.0 * m * n * k / ps_to_seconds(g.gemm_time(m, n, k, DType::kBf16)) / 1e12;
}

TEST(GemmTime, A100MatchesPublishedCublasFigures) {
  GpuModel a100(load_profile(profile_path("dgx-a100-80gb")).gpu);
  // Reference: cuBLASLt FP16 on A100, 4096^3 -> 228 TFLOP/s, 1024^3 -> 119 TFLOP/s.
  EXPECT_NEAR(tflops(a100, 4096, 4096, 4096), 228.0, 0.10 * 228);
  EXPECT_NEAR(tflops(a100, 1024, 1024, 1024), 119.0, 0.15 * 119);
  EXPECT_LT(tflops(a100, 16384, 16384, 16384), 256.0 * 1.01);  // never above the measured peak
}

TEST(GemmEfficiency, WaveQuantisationPenalisesOneTileOverAFullWave) {
  GpuSpec spec;
  spec.sm_count = 108;
  spec.peak_flops[static_cast<int>(DType::kBf16)] = 312e12;
  spec.gemm_max_efficiency = 0.8;
  spec.gemm_k_half = 0;
  spec.tiles = {{128, 128, 1.0}};
  GpuModel g(spec);
  // 108 tiles fill one wave; 109 need two waves of which the second holds one tile.
  double full = g.gemm_efficiency(128 * 108, 128, 4096, DType::kBf16);
  double spill = g.gemm_efficiency(128 * 109, 128, 4096, DType::kBf16);
  EXPECT_DOUBLE_EQ(full, 0.8);
  EXPECT_DOUBLE_EQ(spill, 0.8 * 109.0 / 216.0);
}

TEST(GemmEfficiency, MeasuredTableIsExactAtSamplesAndInterpolatesBetween) {
  GpuSpec spec;
  spec.peak_flops[static_cast<int>(DType::kBf16)] = 312e12;
  spec.measured = {{4096, 4096, 4096, DType::kBf16, 250.0},
                   {1024, 1024, 1024, DType::kBf16, 100.0}};
  GpuModel g(spec);
  EXPECT_NEAR(g.gemm_efficiency(4096, 4096, 4096, DType::kBf16), 250.0 / 312.0, 1e-12);
  EXPECT_NEAR(g.gemm_efficiency(1024, 1024, 1024, DType::kBf16), 100.0 / 312.0, 1e-12);
  double fitted = g.fitted_gemm_efficiency(2048, 2048, 2048);
  double corr_hi = (250.0 / 312.0) / g.fitted_gemm_efficiency(4096, 4096, 4096);
  double corr_lo = (100.0 / 312.0) / g.fitted_gemm_efficiency(1024, 1024, 1024);
  // Equidistant in log space: the correction is the mean of the two.
  EXPECT_NEAR(g.gemm_efficiency(2048, 2048, 2048, DType::kBf16), fitted * (corr_hi + corr_lo) / 2,
              1e-12);
  // Another dtype has no samples: the fitted formula alone.
  spec.peak_flops[static_cast<int>(DType::kFp16)] = 312e12;
  GpuModel g2(spec);
  EXPECT_DOUBLE_EQ(g2.gemm_efficiency(2048, 2048, 2048, DType::kFp16), fitted);
}

TEST(MemoryBoundTime, StreamsAtEfficiencyTimesDatasheetBandwidth) {
  GpuSpec spec;
  spec.hbm_bandwidth = {2.039e12};
  spec.hbm_efficiency = 0.82;
  spec.kernel_latency = 3'000'000;
  GpuModel g(spec);
  EXPECT_EQ(g.memory_bound_time(Bytes{0}), 0);
  EXPECT_EQ(g.memory_bound_time(Bytes{1e9}), seconds_to_ps(1e9 / (2.039e12 * 0.82)) + 3'000'000);
}

// The memory roofline: a GEMM reads both operands and writes its result at least once, at the
// streaming rate (hbm_bandwidth x hbm_efficiency). One 128 x 128 tile at full efficiency,
// 108 SMs, no K penalty, a 1 PFLOP/s BF16 (2 PFLOP/s FP8) peak, 2 TB/s, no latency.
TEST(GemmTime, ThinGemmIsBoundByItsOperandTraffic) {
  GpuSpec spec;
  spec.sm_count = 108;
  spec.peak_flops[static_cast<int>(DType::kBf16)] = 1e15;
  spec.peak_flops[static_cast<int>(DType::kFp8)] = 2e15;
  spec.gemm_max_efficiency = 0.8;
  spec.gemm_k_half = 0;
  spec.tiles = {{128, 128, 1.0}};
  spec.hbm_bandwidth = {2e12};
  spec.hbm_efficiency = 1.0;
  spec.kernel_latency = 0;
  GpuModel g(spec);
  // m = 1, n = k = 8192: 64 tiles of one wave of 108 (64/108), each 1/128 full: efficiency
  // 0.8 x 64/108 / 128 = 0.0037, so 2 x 8192^2 FLOPs take 36.2 us of compute. Traffic: A is
  // 1 x 8192, B 8192 x 8192, C 1 x 8192, two bytes each: 134,250,496 B in 67.1 us.
  const double bf16_bytes = (8192.0 + 8192.0 * 8192.0) * 2 + 8192.0 * 2;
  EXPECT_EQ(g.gemm_time(1, 8192, 8192, DType::kBf16), seconds_to_ps(bf16_bytes / 2e12));
  // FP8 reads one byte per operand element and writes a 16-bit result: 67,133,440 B in
  // 33.6 us, against 18.1 us of compute at the doubled peak.
  const double fp8_bytes = (8192.0 + 8192.0 * 8192.0) * 1 + 8192.0 * 2;
  EXPECT_EQ(g.gemm_time(1, 8192, 8192, DType::kFp8), seconds_to_ps(fp8_bytes / 2e12));
  // A batch of them moves a batch of the traffic.
  EXPECT_EQ(g.gemm_time(1, 8192, 8192, DType::kBf16, 4), seconds_to_ps(4 * bf16_bytes / 2e12));
  // 4096^3: 1,024 tiles in 10 waves (1024/1080), 181 us of compute against 50 us of traffic
  // (3 x 4096^2 x 2 B): compute-bound, the FLOPs over the efficiency-scaled peak as before.
  const double flops = 2.0 * 4096 * 4096 * 4096;
  EXPECT_NEAR(static_cast<double>(g.gemm_time(4096, 4096, 4096, DType::kBf16)),
              static_cast<double>(seconds_to_ps(flops / (1e15 * 0.8 * 1024.0 / 1080.0))), 1.0);
}

TEST(GemmTime, ZeroSizedGemmIsFree) {
  GpuModel g(GpuSpec{});
  EXPECT_EQ(g.gemm_time(0, 10, 10, DType::kBf16), 0);
}

}  // namespace
}  // namespace pw::hw
