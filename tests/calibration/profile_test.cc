// Profiles written from synthetic fits load in hwmodels and reproduce the known parameters.
#include "hwmodels/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <tuple>

#include "calibration/calibrate.h"
#include "calibration/gemm_shapes.h"
#include "calibration/profile_writer.h"
#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/optimizer.h"

namespace pw::calibration {
namespace {

Timing exact(double t) { return {t, t, t, 1}; }

/// A CPU run with known parameters: GEMM rate 20 GFLOP/s + 0.3 us per call; element-wise mix
/// 5 GB/s (model bytes) + 1 us; copy 40 GB/s + 0.2 us; MPI ping-pong 0.8 us + 8 GB/s; MPI
/// all-reduce x2 3 us + 4 GB/s.
RawResults synthetic_cpu(double shape_skew) {
  RawResults raw;
  raw.provenance.backend = "cpu";
  raw.provenance.device = "Synthetic CPU";
  raw.provenance.date = "2026-01-01T00:00:00Z";
  raw.provenance.memory_bytes = 64e9;
  raw.provenance.mpi = "Open MPI v4.1.4";
  int i = 0;
  for (const auto& s : gemm_sweep({32, 64, 128}, {16, 64}, 16, true)) {
    double skew = (i++ % 3 == 0) ? shape_skew : 1.0;  // some shapes slower than the formula
    double t = (3e-7 + 2.0 * s.m * s.n * s.k * s.batch / 20e9) * skew;
    raw.gemms.push_back({s.op, "fp64", s.m, s.n, s.k, s.batch, exact(t)});
  }
  for (double b = 1e4; b <= 1e8; b *= 10) {
    raw.memory.push_back({"layer_mix", "fp64", b, exact(1e-6 + b / 5e9)});
    raw.memory.push_back({"copy", "fp64", b, exact(2e-7 + b / 40e9)});
  }
  for (double b = 8; b <= 1e8; b *= 8) {
    raw.transfers.push_back({"mpi_p2p", b, exact(0.8e-6 + b / 8e9)});
    raw.collectives.push_back({"mpi", "all_reduce", 2, b, exact(3e-6 + b / 4e9), 0});
  }
  return raw;
}

hw::GpuSpec cpu_base() {
  hw::GpuSpec g;
  g.sm_count = 1;
  g.tiles = {{1, 1, 1.0}};
  return g;
}

hw::HardwareProfile write_and_load(const RawResults& raw, const hw::GpuSpec& base,
                                   ProfileOptions po, FitResult* fit_out = nullptr) {
  FitResult fit = fit_all(
      raw, base, [](const std::string&) { return 0.0; }, "synthetic");
  if (fit_out != nullptr) *fit_out = fit;
  return hw::parse_profile(profile_yaml(fit, po), "calibrated.yaml");
}

TEST(CpuProfile, LoadsInHwmodelsWithTheKnownParameters) {
  ProfileOptions po;
  po.name = "calibrated-cpu";
  hw::HardwareProfile p = write_and_load(synthetic_cpu(1.0), cpu_base(), po);
  EXPECT_EQ(p.name, "calibrated-cpu");
  EXPECT_EQ(p.gpu.sm_count, 1);
  double bf16 = p.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)];
  EXPECT_NEAR(bf16 * p.gpu.gemm_max_efficiency, 20e9, 0.01 * 20e9);
  EXPECT_NEAR(ps_to_seconds(p.gpu.kernel_latency), 3e-7, 0.01 * 3e-7);
  // Streaming (hbm) = the copy kernel (memory_bytes_ratio 1 here); element-wise = layer_mix.
  EXPECT_NEAR(p.gpu.hbm_bandwidth.value * p.gpu.hbm_efficiency, 40e9, 0.01 * 40e9);
  EXPECT_NEAR(p.gpu.elementwise_bandwidth.value, 5e9, 0.01 * 5e9);
  EXPECT_TRUE(p.gpu.measured.empty());  // exact data: the formula needs no table
  // MPI link: a GPU-switch-GPU route has two hops, so each carries half the one-way latency.
  EXPECT_NEAR(ps_to_seconds(p.node.intra.latency), 0.4e-6, 0.01 * 0.4e-6);
  EXPECT_NEAR(p.node.intra.effective().value, 8e9, 0.01 * 8e9);  // link_bytes_ratio 1 here
  // Ring all-reduce over 2 ranks: 2 steps of (path latency 0.8 us + step latency) = 3 us.
  EXPECT_NEAR(ps_to_seconds(p.collective_step_latency), 0.7e-6, 0.01 * 0.7e-6);
}

TEST(CpuProfile, ItsSourceNamesTheCoreTheBenchmarksRanOn) {
  ProfileOptions po;
  po.name = "pinned";
  RawResults raw = synthetic_cpu(1.0);
  const std::string unpinned =
      profile_yaml(fit_all(
                       raw, cpu_base(), [](const std::string&) { return 0.0; }, "s"),
                   po);
  EXPECT_EQ(unpinned.find("probed"), std::string::npos) << unpinned;
  raw.core_probes = {{0, exact(2.33e-3)}, {1, exact(1.87e-3)}};
  raw.pinned_core = 0;
  const std::string text =
      profile_yaml(fit_all(
                       raw, cpu_base(), [](const std::string&) { return 0.0; }, "s"),
                   po);
  EXPECT_NE(text.find("Synthetic CPU (core 0, the slowest of 2 probed)"), std::string::npos)
      << text;
  // The pinned core's probe is the profile's calibration_probe (what compare sets a run's
  // ranks' probes against); a profile without it reads 0.
  EXPECT_EQ(hw::parse_profile(unpinned, "u.yaml").calibration_probe_ms, 0.0);
  const hw::HardwareProfile p = hw::parse_profile(text, "p.yaml");
  EXPECT_DOUBLE_EQ(p.calibration_probe_ms, 2.33);
  for (const auto& [bad, key] :
       {std::pair<std::string, std::string>{"forward_ms: -1", "calibration_probe.forward_ms"},
        {"forward_ms: 2\n  speed: 3", "calibration_probe"}}) {
    std::string t = text;
    const std::size_t at = t.find("forward_ms: 2.33");
    ASSERT_NE(at, std::string::npos) << t;
    t.replace(at, std::string("forward_ms: 2.33").size(), bad);
    try {
      hw::parse_profile(t, "bad.yaml");
      FAIL() << "expected a ConfigError for " << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

TEST(CpuProfile, LabelsItsFiguresFp64AndAnswersEveryDtypeWithThem) {
  ProfileOptions po;
  po.name = "fp64";
  po.ranks_per_node = 3;
  FitResult fit = fit_all(
      synthetic_cpu(1.4), cpu_base(), [](const std::string&) { return 0.0; }, "s");
  const std::string text = profile_yaml(fit, po);
  EXPECT_NE(text.find("compute_dtype: fp64"), std::string::npos) << text;
  EXPECT_EQ(text.find("bf16"), std::string::npos) << "fp64 figures written under bf16:\n" << text;
  hw::HardwareProfile p = hw::parse_profile(text, "fp64.yaml");
  ASSERT_TRUE(p.compute_dtype.has_value());
  EXPECT_EQ(*p.compute_dtype, hw::DType::kFp64);
  EXPECT_EQ(p.node.gpus_per_node, 3);
  const double fp64 = p.gpu.peak_flops[static_cast<int>(hw::DType::kFp64)];
  EXPECT_GT(fp64, 0);
  hw::GpuModel model(p.gpu);
  for (int d = 0; d < hw::kNumDTypes; ++d) {
    EXPECT_EQ(p.gpu.peak_flops[d], fp64) << hw::dtype_name(static_cast<hw::DType>(d));
    // The measured fp64 table corrects every dtype's GEMMs alike (a shape 40% off the formula).
    EXPECT_EQ(model.gemm_time(64, 192, 16, static_cast<hw::DType>(d)),
              model.gemm_time(64, 192, 16, hw::DType::kFp64));
  }
}

/// A minimal profile with `gpu_extra` spliced into its gpu section.
std::string tiny_profile(const std::string& peaks, const std::string& gpu_extra) {
  return "name: t\ngpu:\n  name: x\n  sm_count: 1\n  peak_tflops: " + peaks +
         "\n  hbm_capacity_gb: 1\n  hbm_bandwidth_gb_per_s: 1\n  hbm_efficiency: 1\n"
         "  gemm: {max_efficiency: 1, k_half: 0}\n" +
         gpu_extra +
         "node:\n  gpus_per_node: 2\n"
         "  intra: {type: nvswitch, bandwidth_gb_per_s: 1, latency_us: 1, efficiency: 1}\n"
         "  pcie: {type: pcie, bandwidth_gb_per_s: 1, latency_us: 1, efficiency: 1}\n"
         "  nic: {type: ethernet, bandwidth_gb_per_s: 1, latency_us: 1, efficiency: 1}\n"
         "  nics_per_node: 1\n"
         "fabric:\n  switch_link: {type: ethernet, bandwidth_gb_per_s: 1, latency_us: 1, "
         "efficiency: 1}\n";
}

std::string load_error(const std::string& text) {
  try {
    hw::parse_profile(text, "p.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ComputeDtype, BadProfilesNameTheField) {
  // Sanity: the tiny profile loads as it is, with and without compute_dtype.
  EXPECT_EQ(load_error(tiny_profile("{bf16: 1}", "")), "");
  EXPECT_EQ(load_error(tiny_profile("{fp64: 1}", "  compute_dtype: fp64\n")), "");
  // fp64 alone is not a GPU profile: bf16 is still required without compute_dtype.
  EXPECT_NE(load_error(tiny_profile("{fp64: 1}", "")).find("bf16"), std::string::npos);
  std::string e = load_error(tiny_profile("{fp64: 1}", "  compute_dtype: fp46\n"));
  EXPECT_NE(e.find("gpu.compute_dtype"), std::string::npos) << e;
  EXPECT_NE(e.find("fp64"), std::string::npos) << e;  // did you mean
  e = load_error(tiny_profile("{bf16: 1}", "  compute_dtype: fp64\n"));
  EXPECT_NE(e.find("peak_tflops.fp64"), std::string::npos) << e;
  e = load_error(tiny_profile("{fp64: 1, bf16: 2}", "  compute_dtype: fp64\n"));
  EXPECT_NE(e.find("peak_tflops.bf16"), std::string::npos) << e;
  e = load_error(tiny_profile("{fp64: 1}",
                              "  compute_dtype: fp64\n  gemm_measured:\n"
                              "    - {m: 1, n: 1, k: 1, dtype: bf16, tflops: 1}\n"));
  EXPECT_NE(e.find("gemm_measured[0].dtype"), std::string::npos) << e;
}

TEST(CpuProfile, MeasuredTableReproducesEveryMeasuredGemm) {
  ProfileOptions po;
  po.name = "skewed";
  RawResults raw = synthetic_cpu(1.4);  // a third of the shapes 40% slower: the fit is poor
  FitResult fit;
  hw::HardwareProfile p = write_and_load(raw, cpu_base(), po, &fit);
  ASSERT_GT(fit.gemms[0].quality.worst_residual, fit.table_threshold);
  ASSERT_FALSE(p.gpu.measured.empty());
  hw::GpuModel model(p.gpu);
  // The table is keyed by (m, n, k) without the batch count, so a shape measured both plain and
  // batched keeps its first measurement; those later duplicates are not expected to match.
  std::set<std::tuple<long long, long long, long long>> seen;
  for (const auto& g : raw.gemms) {
    if (!seen.insert({g.m, g.n, g.k}).second) continue;
    double t = ps_to_seconds(model.gemm_time(g.m, g.n, g.k, hw::DType::kBf16, g.batch));
    EXPECT_NEAR(t, g.time.median_s, 0.01 * g.time.median_s)
        << g.op << " " << g.m << "x" << g.n << "x" << g.k;
  }
}

TEST(CpuProfile, IsByteIdenticalForTheSameInput) {
  ProfileOptions po;
  po.name = "same";
  auto fit = fit_all(
      synthetic_cpu(1.2), cpu_base(), [](const std::string&) { return 0.0; }, "s");
  EXPECT_EQ(profile_yaml(fit, po), profile_yaml(fit, po));
}

TEST(CpuProfile, BytesRatiosScaleTheirOwnFigureOnly) {
  ProfileOptions po;
  po.name = "ratios";
  po.memory_bytes_ratio = 0.5;
  po.elementwise_bytes_ratio = 2.0;
  hw::HardwareProfile p = write_and_load(synthetic_cpu(1.0), cpu_base(), po);
  EXPECT_NEAR(p.gpu.hbm_bandwidth.value, 0.5 * 40e9, 0.01 * 20e9);
  EXPECT_NEAR(p.gpu.elementwise_bandwidth.value, 2.0 * 5e9, 0.01 * 10e9);
}

TEST(CpuProfile, TheExecutorsAdamStepSetsTheStreamingFigureSoHwmodelsAdamTakesItsTime) {
  // The executor's Adam step measured (calibration/cpu_bench.cc: `adam_step`, recorded in the
  // model's 28 bytes per parameter): here it takes 2 us + 4 ns per parameter, far slower than
  // the copy kernel's 40 GB/s would say (its divisions and square roots, three passes).
  RawResults raw = synthetic_cpu(1.0);
  for (double params : {0.8e6, 1.6e6, 3.2e6, 6.4e6})
    raw.memory.push_back(
        {"adam_step", "fp64", params * hw::kAdamBytesPerParam, exact(2e-6 + params * 4e-9)});
  ProfileOptions po;
  po.name = "adam";
  po.memory_bytes_ratio = 0.5;  // calibrate's ratio for the copy kernel: not applied to this fit
  FitResult fit;
  const hw::HardwareProfile p = write_and_load(raw, cpu_base(), po, &fit);
  EXPECT_EQ(fit.memory_source, "executor Adam step");
  EXPECT_TRUE(fit.memory_in_model_bytes);
  // 28 model bytes per 4 ns = 7 GB/s, whatever the ratio.
  EXPECT_NEAR(p.gpu.hbm_bandwidth.value * p.gpu.hbm_efficiency, 28.0 / 4e-9, 0.01 * 7e9);
  // hwmodels' Adam of 1.3 M parameters then takes the executor's time (the fitted 2 us alpha
  // aside, which the profile's one kernel latency replaces): 4 ns x 1.3e6 = 5.2 ms.
  const double t = ps_to_seconds(hw::adam_step_time(hw::GpuModel(p.gpu), 1.3e6));
  EXPECT_NEAR(t, 1.3e6 * 4e-9, 0.01 * 5.2e-3);
  // Without it (older raw files) the copy kernel x the ratio: 0.5 x 40 GB/s.
  EXPECT_NEAR(write_and_load(synthetic_cpu(1.0), cpu_base(), po).gpu.hbm_bandwidth.value,
              0.5 * 40e9, 0.01 * 20e9);
}

TEST(CpuProfile, ElementwiseWithoutACopyKernelIsBadInput) {
  RawResults raw = synthetic_cpu(1.0);
  std::erase_if(raw.memory, [](const MemorySample& m) { return m.kernel == "copy"; });
  try {
    fit_all(
        raw, cpu_base(), [](const std::string&) { return 0.0; }, "raw.json");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("raw.json: memory: no 'copy' kernel"), std::string::npos)
        << e.what();
  }
}

TEST(CpuProfile, NeedsTheMpiLink) {
  RawResults raw = synthetic_cpu(1.0);
  raw.transfers.clear();
  auto fit = fit_all(
      raw, cpu_base(), [](const std::string&) { return 0.0; }, "s");
  EXPECT_THROW(profile_yaml(fit, ProfileOptions{}), ConfigError);
}

std::string h100_base_path() {
  return std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/dgx-h100.yaml";
}

RawResults synthetic_h100() {
  RawResults raw;
  raw.provenance.backend = "cuda";
  raw.provenance.device = "NVIDIA H100 80GB HBM3";
  raw.provenance.date = "2026-01-01T00:00:00Z";
  raw.provenance.compute_units = 132;
  raw.provenance.memory_bytes = 80e9;
  raw.provenance.memory_bandwidth = 3.35e12;
  raw.provenance.peak_flops = {{"bf16", 989e12}, {"fp16", 989e12}};
  raw.provenance.device_count = 8;
  hw::GpuSpec spec = hw::load_profile(h100_base_path()).gpu;
  spec.gemm_max_efficiency = 0.72;
  spec.gemm_k_half = 128;
  hw::GpuModel model(spec);
  for (const auto& s : gemm_sweep({1024, 4096, 8192}, {2048, 4096}, 128, true)) {
    double t = 5e-6 + 2.0 * s.m * s.n * s.k * s.batch /
                          (989e12 * model.fitted_gemm_efficiency(s.m, s.n, s.k, s.batch));
    raw.gemms.push_back({s.op, "bf16", s.m, s.n, s.k, s.batch, exact(t)});
  }
  for (double b = 1e5; b <= 1e9; b *= 10)
    raw.memory.push_back({"copy", "fp32", b, exact(3e-6 + b / 3.0e12)});
  for (double b = 8; b <= 4e9; b *= 8) {
    raw.collectives.push_back({"nccl", "send_recv", 8, b, exact(6e-6 + b / 360e9), 0});
    raw.collectives.push_back({"nccl", "all_reduce", 8, b, exact(30e-6 + b / 200e9), 0});
  }
  return raw;
}

TEST(CudaProfile, OverridesTheBaseWithTheFittedGpu) {
  RawResults raw = synthetic_h100();
  hw::HardwareProfile base = hw::load_profile(h100_base_path());
  FitResult fit = fit_all(
      raw, base.gpu,
      [&](const std::string& d) {
        return raw.provenance.peak_flops.count(d) ? raw.provenance.peak_flops.at(d) : 0.0;
      },
      "synthetic");
  ProfileOptions po;
  po.name = "calibrated-h100";
  po.base_text = read_file(h100_base_path());
  po.base_file = h100_base_path();
  hw::HardwareProfile p = hw::parse_profile(profile_yaml(fit, po), "out.yaml");
  EXPECT_EQ(p.gpu.name, "NVIDIA H100 80GB HBM3");
  EXPECT_NEAR(p.gpu.gemm_max_efficiency, 0.72, 0.0072);
  EXPECT_EQ(p.gpu.gemm_k_half, 128);
  EXPECT_NEAR(ps_to_seconds(p.gpu.kernel_latency), 5e-6, 0.05e-6);
  EXPECT_NEAR(p.gpu.hbm_efficiency, 3.0 / 3.35, 0.01 * 3.0 / 3.35);
  // No element-wise measurement on the GPU: the layer model keeps the streaming figure.
  EXPECT_FALSE(fit.has_elementwise);
  EXPECT_EQ(p.gpu.elementwise_bandwidth.value, 0.0);
  // send/recv 360 GB/s over a 450 GB/s NVSwitch port; latency split over two hops.
  EXPECT_NEAR(p.node.intra.efficiency, 0.8, 0.008);
  EXPECT_NEAR(ps_to_seconds(p.node.intra.latency), 3e-6, 0.03e-6);
  // Ring all-reduce x8: 14 steps of (6 us path + step) = 30 us -> step = 30/14 - 6 < 0 -> 0.
  EXPECT_EQ(p.collective_step_latency, 0);
  EXPECT_EQ(p.node.gpus_per_node, base.node.gpus_per_node);  // node kept from the base
  EXPECT_EQ(p.fabric.leaf_ports, base.fabric.leaf_ports);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("pw-calib-test-" + std::to_string(getpid()) + "-" + name))
      .string();
}

TEST(Calibrate, RawFromAnotherGpuThanTheBaseIsRejectedAndNothingIsWritten) {
  RawResults raw = synthetic_h100();
  raw.provenance.device = "NVIDIA A100-SXM4-80GB";
  std::string in = temp_path("a100.json"), out = temp_path("never.yaml");
  write_file_atomic(in, raw_to_json(raw));
  CalibrateOptions o;
  o.backend = "cuda";
  o.from_raw = in;
  o.base = h100_base_path();
  o.out = out;
  try {
    calibrate(o);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("A100"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  std::remove(in.c_str());
}

TEST(Calibrate, RawOfTheOtherBackendIsRejected) {
  std::string in = temp_path("cpu.json"), out = temp_path("never2.yaml");
  write_file_atomic(in, raw_to_json(synthetic_cpu(1.0)));
  CalibrateOptions o;
  o.backend = "cuda";
  o.from_raw = in;
  o.out = out;
  EXPECT_THROW(calibrate(o), ConfigError);
  EXPECT_FALSE(std::filesystem::exists(out));
  std::remove(in.c_str());
}

TEST(Calibrate, FromRawWritesALoadableProfile) {
  std::string in = temp_path("cpu-ok.json"), out = temp_path("cpu-ok.yaml");
  write_file_atomic(in, raw_to_json(synthetic_cpu(1.0)));
  CalibrateOptions o;
  o.backend = "";  // as the file says
  o.from_raw = in;
  o.out = out;
  CalibrateOutcome r = calibrate(o);
  EXPECT_EQ(hw::load_profile(out).name, "calibrated-cpu");
  EXPECT_NE(r.report.find("gemm fp64"), std::string::npos);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(Calibrate, GpuDesignator) {
  EXPECT_EQ(gpu_designator("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(gpu_designator("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(gpu_designator("H100-SXM5-80GB"), "H100");
  EXPECT_EQ(gpu_designator("NVIDIA H200"), "H200");
  EXPECT_EQ(gpu_designator("AMD EPYC"), "");
}

}  // namespace
}  // namespace pw::calibration
