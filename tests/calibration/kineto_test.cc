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
  // One CPU op whose call launched several kernels (a fused attention backward runs three).
  void add_kernels(const std::string& op, const std::string& op_args,
                   const std::vector<std::pair<std::string, double>>& kernels) {
    ++id;
    events += fmt::format(
        "{}{{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"{}\", \"pid\": 1, \"tid\": 1, "
        "\"ts\": {:.3f}, \"dur\": 5.0, \"args\": {{\"External id\": {}{}}}}}",
        events.empty() ? "" : ",\n", op, ts, id, op_args);
    for (const auto& [kernel, seconds] : kernels) {
      events += fmt::format(
          ",\n{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{}\", \"pid\": 0, \"tid\": 7, "
          "\"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {{\"External id\": {}, \"device\": 0, "
          "\"stream\": 7}}}}",
          kernel, ts + 6, seconds * 1e6, id);
      ts += seconds * 1e6 + 2;
    }
    ts += 20;
  }
  std::string text() const {
    return "{\"schemaVersion\": 1, \"traceEvents\": [\n" + events + "\n]}\n";
  }
};

// A trace written to a temporary directory of its own, and the options that calibrate from it
// into a profile there; the directory goes with the object.
struct TraceRun {
  std::filesystem::path dir;
  std::string trace, out;
  CalibrateOptions options;
  TraceRun(const std::string& tag, const std::string& text, const std::string& base)
      : dir(std::filesystem::temp_directory_path() /
            ("pw-kineto-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir);
    trace = (dir / "step.json").string();
    out = (dir / "fitted.yaml").string();
    write_file_atomic(trace, text);
    options.backend = "cuda";
    options.from_trace = trace;
    options.base = base;
    options.out = out;
  }
  ~TraceRun() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// The traced GPU of these tests: GEMMs at max efficiency 0.62 with k_half 128 and 4 us of kernel
// latency on the base profile's peaks.
hw::GpuSpec traced_gpu(const hw::HardwareProfile& base) {
  hw::GpuSpec truth = base.gpu;
  truth.gemm_max_efficiency = 0.62;
  truth.gemm_k_half = 128;
  truth.kernel_latency = seconds_to_ps(4e-6);
  return truth;
}
constexpr long long kShapes[3][3] = {{4096, 4096, 4096}, {8192, 1024, 512}, {2048, 6144, 1024}};

// One aten::mm call per shape, timed by `gpu`.
void add_gemms(TraceWriter& w, const hw::GpuModel& gpu) {
  for (const auto& s : kShapes)
    w.add("aten::mm",
          fmt::format(", \"Input Dims\": [[{}, {}], [{}, {}]], \"Input type\": "
                      "[\"c10::BFloat16\", \"c10::BFloat16\"]",
                      s[0], s[2], s[2], s[1]),
          "sm90_xmma_gemm_bf16bf16_bf16f32",
          ps_to_seconds(gpu.gemm_time(s[0], s[1], s[2], hw::DType::kBf16)));
}

TEST(Kineto, TraceWrittenFromKnownConstantsFitsBackToThem) {
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  // The traced GPU (traced_gpu); element-wise kernels 3 us + bytes / 2.8 TB/s; NCCL all-reduce
  // over 8 GPUs 12 us + S / 180 GB/s.
  const hw::GpuModel gpu(traced_gpu(base));
  TraceWriter w;
  for (int rep = 0; rep < 2; ++rep) add_gemms(w, gpu);
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

  const TraceRun run("fit", w.text(), "dgx-h100");
  const CalibrateOutcome r = calibrate(run.options);
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
  const hw::HardwareProfile fitted = hw::load_profile(run.out);
  const hw::GpuModel fm(fitted.gpu);
  for (const auto& s : kShapes) {
    const double want = ps_to_seconds(gpu.gemm_time(s[0], s[1], s[2], hw::DType::kBf16));
    EXPECT_NEAR(ps_to_seconds(fm.gemm_time(s[0], s[1], s[2], hw::DType::kBf16)), want, 0.01 * want);
  }
  EXPECT_NE(r.report.find("11 kernels: 6 GEMM, 2 element-wise, 2 NCCL, 0 fused attention; 1 of "
                          "other ops skipped"),
            std::string::npos)
      << r.report;
}

TEST(Kineto, FusedAttentionCallsFitTheProfilesAttentionEfficiencies) {
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  const double peak = base.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)];  // 989 TFLOP/s
  // The traced GPU: GEMMs as in the test above (4 us kernel latency), fused attention at 55% of
  // the bf16 peak forward and 40% backward, each call taking 4 us + FLOPs / (peak x efficiency).
  const hw::GpuModel gpu(traced_gpu(base));
  TraceWriter w;
  add_gemms(w, gpu);
  for (long long n : {1ll << 20, 1ll << 24})
    w.add("aten::add",
          fmt::format(", \"Input Dims\": [[{}], [{}], []], \"Input type\": [\"c10::BFloat16\", "
                      "\"c10::BFloat16\", \"Scalar\"]",
                      n, n),
          "vectorized_elementwise_kernel", 3e-6 + 6.0 * n / 2.8e12);
  auto call = [&](double flops, double eff) { return 4e-6 + flops / (peak * eff); };
  // Forward, scaled_dot_product level ([b, heads, s, d]), GQA: 2 x 32 query heads, 8 KV heads,
  // s = 4096, d = 128, causal: 2 GEMMs x 2 x 4096 x 2048 x 128 x 64 = 2.75e12 FLOPs.
  const double fwd_causal = 2 * (2.0 * 4096 * 2048 * 128 * 64);
  const std::string sdpa_fwd =
      ", \"Input Dims\": [[2, 32, 4096, 128], [2, 8, 4096, 128], [2, 8, 4096, 128], [], [], [], "
      "[]], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", "
      "\"Scalar\", \"Scalar\", \"Scalar\", \"\"], \"Concrete Inputs\": [\"\", \"\", \"\", "
      "\"0.\", \"{}\", \"False\", \"\"]";
  for (int rep = 0; rep < 2; ++rep)
    w.add("aten::_scaled_dot_product_flash_attention", fmt::format(fmt::runtime(sdpa_fwd), "True"),
          "flash_fwd_kernel", call(fwd_causal, 0.55));
  // The same without a causal mask: every key, twice the FLOPs.
  w.add("aten::_scaled_dot_product_flash_attention", fmt::format(fmt::runtime(sdpa_fwd), "False"),
        "flash_fwd_kernel", call(2 * fwd_causal, 0.55));
  // Forward at the kernel level ([b, s, heads, d]), memory-efficient kernel, custom_mask_type 1
  // (causal): 1 x 16 heads, s = 2048, d = 64: 2 x 2 x 2048 x 1024 x 64 x 16 FLOPs.
  w.add("aten::_efficient_attention_forward",
        ", \"Input Dims\": [[1, 2048, 16, 64], [1, 2048, 16, 64], [1, 2048, 16, 64], [], [], [], "
        "[], [], [], [], [], []], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", "
        "\"c10::BFloat16\", \"\", \"\", \"\", \"Scalar\", \"Scalar\", \"Scalar\", \"Scalar\", "
        "\"Scalar\", \"\"], \"Concrete Inputs\": [\"\", \"\", \"\", \"\", \"\", \"\", \"\", \"\", "
        "\"0.\", \"1\", \"True\", \"\"]",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80", call(2 * (2.0 * 2048 * 1024 * 64 * 16), 0.55));
  // Backward of the causal call: 5 GEMMs, in three kernels (10%, 80%, 10% of the call).
  const double bwd = 2.5 * fwd_causal;
  const std::string bwd_args =
      ", \"Input Dims\": [[2, 32, 4096, 128], [2, 32, 4096, 128], [2, 8, 4096, 128], [2, 8, "
      "4096, 128], [2, 32, 4096, 128], [2, 32, 4096], [], [], [], [], [], [], [], [], []], \"Input "
      "type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", "
      "\"c10::BFloat16\", \"float\", \"\", \"\", \"Scalar\", \"Scalar\", \"Scalar\", \"Scalar\", "
      "\"\", \"\", \"\"], \"Concrete Inputs\": [\"\", \"\", \"\", \"\", \"\", \"\", \"\", \"\", "
      "\"4096\", \"4096\", \"0.\", \"True\", \"\", \"\", \"\"]";
  const double tb = call(bwd, 0.40);
  for (int rep = 0; rep < 2; ++rep)
    w.add_kernels("aten::_scaled_dot_product_flash_attention_backward", bwd_args,
                  {{"flash_bwd_dot_do_o_kernel", 0.1 * tb},
                   {"flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", 0.8 * tb},
                   {"flash_bwd_convert_dq_kernel", 0.1 * tb}});
  // A trace from before PyTorch 2.1 has no "Concrete Inputs": the causal flag, and so the FLOPs,
  // are unknown; the call is counted and skipped.
  w.add("aten::_scaled_dot_product_flash_attention",
        ", \"Input Dims\": [[2, 32, 4096, 128], [2, 8, 4096, 128], [2, 8, 4096, 128], [], [], "
        "[], []], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", "
        "\"Scalar\", \"Scalar\", \"Scalar\", \"\"]",
        "flash_fwd_kernel", call(fwd_causal, 0.55));
  KinetoSummary sum;
  const RawResults raw = raw_from_kineto(w.text(), "step.json", base, &sum);
  EXPECT_EQ(sum.attention, 4 + 6);  // four forward calls, two backward calls of three kernels
  EXPECT_EQ(sum.skipped, 1);
  ASSERT_EQ(raw.attention.size(), 4u);  // causal, full, efficient-kernel forward; backward
  for (const AttentionSample& a : raw.attention) {
    if (a.pass == "backward") {
      EXPECT_EQ(a.time.iterations, 2);
      EXPECT_NEAR(a.time.median_s, tb, 1e-9);  // the three kernels summed
      EXPECT_EQ(a.flops(), bwd);
    }
    if (a.head_dim == 128 && a.pass == "forward") {
      EXPECT_EQ(a.heads, 64);
    }
  }
  // --raw keeps them: the raw file reads back to the same samples (and a wrong pass is refused).
  const RawResults back = raw_from_json(raw_to_json(raw), "raw.json");
  ASSERT_EQ(back.attention.size(), raw.attention.size());
  for (std::size_t i = 0; i < raw.attention.size(); ++i) {
    EXPECT_EQ(back.attention[i].flops(), raw.attention[i].flops());
    EXPECT_EQ(back.attention[i].causal, raw.attention[i].causal);
    EXPECT_EQ(back.attention[i].time.median_s, raw.attention[i].time.median_s);
  }
  // The causal flag decides the FLOPs: a raw file without it is refused, not read as causal.
  std::string no_causal = raw_to_json(raw);
  no_causal.erase(no_causal.find("\"causal\": "), std::string("\"causal\": true,").size());
  try {
    raw_from_json(no_causal, "raw.json");
    ADD_FAILURE() << "an attention sample without its causal flag was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("raw.json: attention[0].causal: missing field"),
              std::string::npos)
        << e.what();
  }
  std::string bad = raw_to_json(raw);
  bad.replace(bad.find("\"pass\": \"backward\""), 18, "\"pass\": \"sideways\"");
  try {
    raw_from_json(bad, "raw.json");
    ADD_FAILURE() << "a wrong pass was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(
        std::string(e.what()).find("raw.json: attention[0].pass: expected forward or backward"),
        std::string::npos)
        << e.what();
  }

  const TraceRun run("att", w.text(), "dgx-h100");
  const CalibrateOutcome r = calibrate(run.options);
  ASSERT_EQ(r.fit.attention.size(), 2u) << r.report;
  EXPECT_EQ(r.fit.attention[0].pass, "backward");
  EXPECT_NEAR(r.fit.attention[0].efficiency, 0.40, 0.01 * 0.40) << r.report;
  EXPECT_NEAR(r.fit.attention[1].efficiency, 0.55, 0.01 * 0.55) << r.report;
  EXPECT_LT(r.fit.attention[1].quality.worst_residual, 0.01) << r.report;
  EXPECT_NE(r.report.find("attention forward"), std::string::npos) << r.report;
  // The profile carries them, and hwmodels times the traced calls as the trace says.
  const hw::HardwareProfile fitted = hw::load_profile(run.out);
  EXPECT_NEAR(fitted.gpu.attention_fwd_efficiency, 0.55, 0.01 * 0.55);
  EXPECT_NEAR(fitted.gpu.attention_bwd_efficiency, 0.40, 0.01 * 0.40);
  const hw::GpuModel fm(fitted.gpu);
  EXPECT_NEAR(ps_to_seconds(fm.fused_attention_time({fwd_causal}, hw::DType::kBf16, false)),
              call(fwd_causal, 0.55), 0.01 * call(fwd_causal, 0.55));
  EXPECT_NEAR(ps_to_seconds(fm.fused_attention_time({bwd}, hw::DType::kBf16, true)), tb, 0.01 * tb);
}

TEST(Kineto, RealH100TraceOfCudnnAttentionReadsAsFusedAttention) {
  // An excerpt of a real trace (scripts/torch_step_trace.py on one H100 80GB HBM3, PyTorch
  // 2.11.0+cu130, 2026-11-27): scaled_dot_product_attention dispatches to cuDNN, whose
  // kernel-level ops (aten::_cudnn_attention_forward/_backward) launch the kernels; the
  // scaled_dot_product_cudnn ops above them launch none. Query and key [1, 32, 4096, 128],
  // causal ("True" at is_causal: position 10 forward, 14 backward).
  const std::string text = read_file(std::string(PW_SOURCE_DIR) +
                                     "/tests/calibration/data/h100-torch2.11-cudnn-attention.json");
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  KinetoSummary sum;
  const RawResults raw = raw_from_kineto(text, "step.json", base, &sum);
  EXPECT_EQ(sum.attention, 1 + 3);  // one forward kernel, a backward of three
  ASSERT_EQ(raw.attention.size(), 2u);
  // Causal FLOPs by hand: 2 GEMMs x 2 x 4096 queries x 2048 keys (half of 4096) x 128 x 32
  // heads = 1.374e11 forward, 5/2 of it backward.
  const double fwd = 2 * (2.0 * 4096 * 2048 * 128 * 32);
  for (const AttentionSample& a : raw.attention) {
    EXPECT_TRUE(a.causal);
    EXPECT_EQ(a.heads, 32);
    EXPECT_EQ(a.seq_q, 4096);
    EXPECT_EQ(a.head_dim, 128);
    if (a.pass == "forward") {
      EXPECT_EQ(a.flops(), fwd);
      EXPECT_NEAR(a.time.median_s, 272.453e-6, 1e-12);  // the fprop kernel's "dur"
    } else {
      EXPECT_EQ(a.flops(), 2.5 * fwd);
      EXPECT_NEAR(a.time.median_s, (45.249 + 733.296 + 40.288) * 1e-6, 1e-12);  // 3 kernels
    }
  }
}

TEST(Kineto, AProfileWithoutAttentionFiguresNeedsBothPassesTraced) {
  // Forward calls only, on a base profile without gpu.attention (the DGX A100 one): the backward
  // figure would have to be invented, so the calibration stops and says what to trace.
  const hw::HardwareProfile base = hw::resolve_profile("dgx-a100-80gb", "", "", "");
  ASSERT_EQ(base.gpu.attention_bwd_efficiency, 0);
  TraceWriter w;
  for (long long n : {1024ll, 2048ll, 4096ll})
    w.add("aten::mm",
          fmt::format(", \"Input Dims\": [[{0}, {0}], [{0}, {0}]], \"Input type\": "
                      "[\"c10::BFloat16\", \"c10::BFloat16\"]",
                      n),
          "ampere_bf16_s16816gemm", 5e-6 + 2.0 * n * n * n / 200e12);
  w.add("aten::add",
        ", \"Input Dims\": [[1048576], [1048576], []], \"Input type\": [\"c10::BFloat16\", "
        "\"c10::BFloat16\", \"Scalar\"]",
        "vectorized_elementwise_kernel", 10e-6);
  w.add("aten::add",
        ", \"Input Dims\": [[16777216], [16777216], []], \"Input type\": [\"c10::BFloat16\", "
        "\"c10::BFloat16\", \"Scalar\"]",
        "vectorized_elementwise_kernel", 70e-6);
  w.add("aten::_scaled_dot_product_flash_attention",
        ", \"Input Dims\": [[1, 16, 2048, 128], [1, 16, 2048, 128], [1, 16, 2048, 128], [], [], "
        "[], []], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", "
        "\"Scalar\", \"Scalar\", \"Scalar\", \"\"], \"Concrete Inputs\": [\"\", \"\", \"\", "
        "\"0.\", \"True\", \"False\", \"\"]",
        "flash_fwd_kernel", 100e-6);
  const TraceRun run("fwd", w.text(), "dgx-a100-80gb");
  try {
    calibrate(run.options);
    ADD_FAILURE() << "a forward-only trace gave a profile";
  } catch (const ConfigError& e) {
    EXPECT_NE(
        std::string(e.what()).find(run.trace + ": attention: forward fused attention calls were "
                                               "traced but no backward ones"),
        std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(run.out));
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
