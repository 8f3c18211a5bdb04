// The shipped real measurement (calibration/profiles/cpu-epyc-2core-raw.json, measured on the
// project's 2-core AMD EPYC build machine with `pipewright calibrate --backend cpu --quick`)
// fits, and its profile loads in hwmodels.
#include <gtest/gtest.h>

#include "calibration/fit.h"
#include "calibration/profile_writer.h"
#include "core/file_io.h"
#include "hwmodels/profile.h"

namespace pw::calibration {
namespace {

const std::string kDir = std::string(PW_SOURCE_DIR) + "/calibration/profiles/";

TEST(ShippedCpuMeasurement, FitsAndItsProfileLoads) {
  RawResults raw = raw_from_json(read_file(kDir + "cpu-epyc-2core-raw.json"), "shipped");
  EXPECT_EQ(raw.provenance.backend, "cpu");
  hw::GpuSpec cpu;
  cpu.sm_count = 1;
  cpu.tiles = {{1, 1, 1.0}};
  FitResult fit = fit_all(
      raw, cpu, [](const std::string&) { return 0.0; }, "shipped");
  ASSERT_EQ(fit.gemms.size(), 1u);
  // Single-thread fp64 Eigen on a 2.6 GHz core with AVX2 FMA: 41.6 GFLOP/s peak
  // (2 FMA units x 4 doubles x 2 flops x 2.6e9); the asymptote must lie below it and be sane.
  double rate = fit.gemms[0].peak_flops * fit.gemms[0].max_efficiency;
  EXPECT_GT(rate, 5e9);
  EXPECT_LT(rate, 41.6e9);
  EXPECT_GT(fit.gemms[0].quality.r2_log, 0.9);
  // The element-wise bandwidth comes from the executor's own layer passes, far below any memory
  // bandwidth of the machine (tanh/exp bound), and hwmodels' layer model then follows every pass
  // kind: F, B and W of 12 shapes each, median within 20% (one bandwidth cannot split F and B
  // the way the executor does: see docs/calibration.md).
  EXPECT_EQ(fit.memory_source, "executor layer passes");
  EXPECT_GT(fit.memory_pooled.bandwidth(), 0.1e9);
  EXPECT_LT(fit.memory_pooled.bandwidth(), 20e9);
  ASSERT_EQ(fit.layer_checks.size(), 3u);
  for (const auto& [pass, q] : fit.layer_checks) {
    EXPECT_EQ(q.points, 12) << pass;
    EXPECT_LT(q.median_residual, 0.20) << pass;
  }
  ProfileOptions po;
  po.name = "cpu-epyc-2core";
  po.link_bytes_ratio = 0.25;
  hw::HardwareProfile p = hw::parse_profile(profile_yaml(fit, po), "regenerated");
  EXPECT_EQ(p.gpu.sm_count, 1);
  hw::HardwareProfile shipped = hw::load_profile(kDir + "cpu-epyc-2core.yaml");
  EXPECT_EQ(shipped.name, "calibrated-cpu");
  ASSERT_TRUE(shipped.compute_dtype.has_value());
  EXPECT_EQ(*shipped.compute_dtype, hw::DType::kFp64);
  EXPECT_EQ(shipped.node.gpus_per_node, 2);
  EXPECT_NEAR(shipped.gpu.gemm_max_efficiency, p.gpu.gemm_max_efficiency, 1e-5);
}

}  // namespace
}  // namespace pw::calibration
