// PyTorch profiler (Kineto) trace import: a trace written from known constants (three GEMM
// shapes, NCCL all-reduces, element-wise kernels) fits back to those constants, and traces the
// importer cannot use are one-line errors naming the file and what to turn on.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "calibration/calibrate.h"
#include "calibration/kineto_trace.h"
#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/profile.h"

namespace pw::calibration {
namespace {

// One CPU op and the kernel it launched, in Kineto's Chrome-trace layout (times in us).
struct TraceWriter {
  std::string events;
  long long id = 0;
  double ts = 0;
  void add(const std::string& op, const std::string& op_args, const std::string& kernel,
           double seconds) {
    ++id;
    const double us = seconds * 1e6;
    events += fmt::format(
        "{}{{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"{}\", \"pid\": 1, \"tid\": 1, "
        "\"ts\": {:.3f}, \"dur\": 5.0, \"args\": {{\"External id\": {}{}}}}}",
        events.empty() ? "" : ",\n", op, ts, id, op_args);
    events += fmt::format(
        ",\n{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{}\", \"pid\": 0, \"tid\": 7, "
        "\"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {{\"External id\": {}, \"device\": 0, "
        "\"stream\": 7}}}}",
        kernel, ts + 6, us, id);
    ts += us + 20;
  }
  std::string text() const {
    return "{\"schemaVersion\": 1, \"traceEvents\": [\n" + events + "\n]}\n";
  }
};

TEST(Kineto, TraceWrittenFromKnownConstantsFitsBackToThem) {
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  // The traced GPU: GEMMs at max efficiency 0.62 with k_half 128 and 4 us of kernel latency;
  // element-wise kernels 3 us + bytes / 2.8 TB/s; NCCL all-reduce over 8 GPUs 12 us + S / 180 GB/s.
  hw::GpuSpec truth = base.gpu;
  truth.gemm_max_efficiency = 0.62;
  truth.gemm_k_half = 128;
  truth.kernel_latency = seconds_to_ps(4e-6);
  const hw::GpuModel gpu(truth);
  TraceWriter w;
  const long long shapes[3][3] = {{4096, 4096, 4096}, {8192, 1024, 512}, {2048, 6144, 1024}};
  for (int rep = 0; rep < 2; ++rep)
    for (const auto& s : shapes)
      w.add("aten::mm",
            fmt::format(", \"Input Dims\": [[{}, {}], [{}, {}]], \"Input type\": "
                        "[\"c10::BFloat16\", \"c10::BFloat16\"]",
                        s[0], s[2], s[2], s[1]),
            "sm90_xmma_gemm_bf16bf16_bf16f32",
            ps_to_seconds(gpu.gemm_time(s[0], s[1], s[2], hw::DType::kBf16)));
  for (long long n : {1ll << 20, 1ll << 24}) {
    const double bytes = 3.0 * n * 2;  // two inputs and the output, bf16
    w.add("aten::add",
          fmt::format(", \"Input Dims\": [[{}], [{}], []], \"Input type\": [\"c10::BFloat16\", "
                      "\"c10::BFloat16\", \"Scalar\"]",
                      n, n),
          "vectorized_elementwise_kernel", 3e-6 + bytes / 2.8e12);
  }
  for (long long n : {1ll << 20, 1ll << 26}) {
    const double bytes = 2.0 * n;
    w.add("record_param_comms",
          fmt::format(", \"Collective name\": \"allreduce\", \"In msg nelems\": {0}, \"Out msg "
                      "nelems\": {0}, \"dtype\": \"BFloat16\", \"Group size\": 8",
                      n),
          "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 12e-6 + bytes / 180e9);
  }
  // A kernel of an op the importer does not use is counted and skipped.
  w.add("aten::_softmax", ", \"Input Dims\": [[8, 2048]], \"Input type\": [\"c10::BFloat16\"]",
        "softmax_warp_forward", 20e-6);
  KinetoSummary sum;
  const RawResults raw = raw_from_kineto(w.text(), "step.json", base, &sum);
  EXPECT_EQ(sum.kernels, 11);
  EXPECT_EQ(sum.gemm, 6);
  EXPECT_EQ(sum.elementwise, 2);
  EXPECT_EQ(sum.nccl, 2);
  EXPECT_EQ(sum.skipped, 1);
  ASSERT_EQ(raw.gemms.size(), 3u);  // repeats of a shape are one sample (their median)

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pw-kineto-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string trace = (dir / "step.json").string(), out = (dir / "fitted.yaml").string();
  write_file_atomic(trace, w.text());
  CalibrateOptions o;
  o.backend = "cuda";
  o.from_trace = trace;
  o.base = "dgx-h100";
  o.out = out;
  const CalibrateOutcome r = calibrate(o);
  ASSERT_EQ(r.fit.gemms.size(), 1u) << r.report;
  const GemmFit& g = r.fit.gemms[0];
  EXPECT_EQ(g.dtype, "bf16");
  EXPECT_NEAR(g.max_efficiency, 0.62, 0.01 * 0.62) << r.report;
  EXPECT_DOUBLE_EQ(g.k_half, 128) << r.report;
  EXPECT_NEAR(g.kernel_latency_s, 4e-6, 0.05e-6) << r.report;
  EXPECT_NEAR(r.fit.memory_pooled.bandwidth(), 2.8e12, 0.01 * 2.8e12) << r.report;
  ASSERT_EQ(r.fit.collectives.size(), 1u) << r.report;
  EXPECT_NEAR(r.fit.collectives[0].fit.alpha_s, 12e-6, 0.01 * 12e-6) << r.report;
  EXPECT_NEAR(r.fit.collectives[0].fit.bandwidth(), 180e9, 0.01 * 180e9) << r.report;
  // The profile loads and times the traced GEMM shapes as the trace says.
  const hw::HardwareProfile fitted = hw::load_profile(out);
  const hw::GpuModel fm(fitted.gpu);
  for (const auto& s : shapes) {
    const double want = ps_to_seconds(gpu.gemm_time(s[0], s[1], s[2], hw::DType::kBf16));
    EXPECT_NEAR(ps_to_seconds(fm.gemm_time(s[0], s[1], s[2], hw::DType::kBf16)), want, 0.01 * want);
  }
  EXPECT_NE(r.report.find("11 kernels: 6 GEMM, 2 element-wise, 2 NCCL; 1 of other ops skipped"),
            std::string::npos)
      << r.report;
  std::filesystem::remove_all(dir);
}

std::string error_of(const std::string& text) {
  try {
    raw_from_kineto(text, "t.json", hw::resolve_profile("dgx-h100", "", "", ""));
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    return e.what();
  }
  return "";
}

TEST(Kineto, TracesItCannotUseAreOneLineErrors) {
  EXPECT_NE(error_of("{\"a\": 1}").find("t.json: traceEvents: expected a Chrome trace"),
            std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
                     "\"aten::mm\", \"args\": {\"External id\": 1}}]}")
                .find("no GPU kernel events"),
            std::string::npos);
  // Kernels but no shapes: the profiler option to turn on is named.
  EXPECT_NE(error_of("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
                     "\"aten::mm\", \"args\": {\"External id\": 1}}, {\"ph\": \"X\", \"cat\": "
                     "\"kernel\", \"name\": \"gemm\", \"dur\": 10.0, \"args\": {\"External id\": "
                     "1}}]}")
                .find("record_shapes=True"),
            std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": [").find("JSON syntax error"), std::string::npos);
}

}  // namespace
}  // namespace pw::calibration
