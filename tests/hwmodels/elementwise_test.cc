// Element-wise throughput apart from the streaming bandwidth: gpu.elementwise_gb_per_s loads and
// validates, its absence keeps every shipped profile's stage costs to the picosecond, and when
// given it (and only it) sets the layer model's memory-bound ops while memory_bound_time (the
// optimizer step, copies) keeps the HBM figure.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/profile.h"
#include "hwmodels/transformer.h"

namespace pw::hw {
namespace {

std::string a100_text() {
  return read_file(std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/dgx-a100-80gb.yaml");
}

/// The A100 profile with `line` inserted after its hbm_efficiency line.
std::string with_gpu_line(const std::string& line) {
  std::string text = a100_text();
  std::string::size_type pos = text.find("  hbm_efficiency:");
  EXPECT_NE(pos, std::string::npos);
  pos = text.find('\n', pos);
  return text.insert(pos + 1, "  " + line + "\n");
}

std::string profile_error(const std::string& text) {
  try {
    parse_profile(text, "p.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ElementwiseProfile, FieldLoadsInGigabytesPerSecond) {
  HardwareProfile p = parse_profile(with_gpu_line("elementwise_gb_per_s: 1.5"), "p.yaml");
  EXPECT_DOUBLE_EQ(p.gpu.elementwise_bandwidth.value, 1.5e9);
  EXPECT_DOUBLE_EQ(p.gpu.elementwise_bwd_bandwidth.value, 0.0);  // absent: the forward's
  EXPECT_DOUBLE_EQ(parse_profile(with_gpu_line("elementwise_bwd_gb_per_s: 2.25"), "p.yaml")
                       .gpu.elementwise_bwd_bandwidth.value,
                   2.25e9);
  // The streaming figure is untouched: A100 datasheet 2039 GB/s.
  EXPECT_DOUBLE_EQ(p.gpu.hbm_bandwidth.value, 2039e9);
}

TEST(ElementwiseProfile, BadValueNamesTheField) {
  EXPECT_EQ(profile_error(with_gpu_line("elementwise_bwd_gb_per_s: 0")),
            "p.yaml: gpu.elementwise_bwd_gb_per_s: 0 is out of range; expected a number > 0");
  EXPECT_EQ(profile_error(with_gpu_line("elementwise_gb_per_s: -2")),
            "p.yaml: gpu.elementwise_gb_per_s: -2 is out of range; expected a number > 0");
  EXPECT_EQ(profile_error(with_gpu_line("elementwise_gb_per_s: 0")),
            "p.yaml: gpu.elementwise_gb_per_s: 0 is out of range; expected a number > 0");
  EXPECT_NE(profile_error(with_gpu_line("elementwise_gb_per_s: fast"))
                .find("p.yaml: gpu.elementwise_gb_per_s:"),
            std::string::npos);
}

TEST(ElementwiseProfile, AbsentFieldMeansStreamingBandwidthTimesEfficiency) {
  for (const std::string& name : shipped_profile_names()) {
    HardwareProfile p = resolve_profile(name, "", "", "");
    EXPECT_EQ(p.gpu.elementwise_bandwidth.value, 0.0) << name;
    EXPECT_EQ(p.gpu.elementwise_bwd_bandwidth.value, 0.0) << name;
    GpuModel gpu(p.gpu);
    for (bool bwd : {false, true}) {
      EXPECT_EQ(gpu.elementwise_rate(bwd), p.gpu.hbm_bandwidth.value * p.gpu.hbm_efficiency)
          << name;
      for (double bytes : {0.0, 1.0, 4096.0, 3.7e6, 1.2e9})
        EXPECT_EQ(gpu.elementwise_time(Bytes{bytes}, bwd), gpu.memory_bound_time(Bytes{bytes}))
            << name;
    }
  }
}

/// ops_time as it was before the element-wise field: memory-bound ops at memory_bound_time.
TimePs streaming_ops_time(const std::vector<LayerOp>& ops, const GpuModel& gpu, DType d) {
  TimePs t = 0;
  for (const LayerOp& op : ops)
    t += op.gemm ? gpu.gemm_time(op.m, op.n, op.k, d, op.batch) : gpu.memory_bound_time(op.bytes);
  return t;
}

/// Stage times as stage_costs computed them before the field (same sums over the same op lists,
/// W's bias and layer-norm reductions included; streaming ops time).
std::array<TimePs, 4> streaming_stage_times(const ModelShape& m, const GpuModel& gpu,
                                            const WorkloadOptions& o, int layers, bool first,
                                            bool last) {
  const Pass passes[] = {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight,
                         Pass::kRecompute};
  std::array<TimePs, 4> out{};
  for (int i = 0; i < 4; ++i) {
    out[i] = layers * streaming_ops_time(layer_ops(m, o, passes[i]), gpu, o.dtype);
    if (first) out[i] += streaming_ops_time(embedding_ops(m, o, passes[i]), gpu, o.dtype);
    if (last && passes[i] != Pass::kRecompute)
      out[i] += streaming_ops_time(head_ops(m, o, passes[i]), gpu, o.dtype);
  }
  return out;
}

TEST(ElementwiseProfile, ShippedProfilesGiveTheSameStageCostsAsBefore) {
  const ModelShape gpt3 = find_model_preset("gpt3-175b")->shape;
  WorkloadOptions megatron;  // the paper's t8 run: SP, selective recompute
  megatron.tp = 8;
  megatron.sequence_parallel = true;
  megatron.recompute = Recompute::kSelective;
  WorkloadOptions full;  // t1, full recompute, fp16: every pass and the recompute pass non-empty
  full.recompute = Recompute::kFull;
  full.micro_batch = 2;
  full.dtype = DType::kFp16;
  int checked = 0;
  for (const std::string& name : shipped_profile_names()) {
    GpuModel gpu(resolve_profile(name, "", "", "").gpu);
    for (const WorkloadOptions& o : {megatron, full}) {
      for (auto [first, last] : {std::pair{true, false}, {false, false}, {false, true}}) {
        StageCosts c = stage_costs(gpt3, gpu, o, 0, 12, first, last);
        std::array<TimePs, 4> before = streaming_stage_times(gpt3, gpu, o, 12, first, last);
        EXPECT_EQ(c.f, before[0]) << name;
        EXPECT_EQ(c.b, before[1]) << name;
        EXPECT_EQ(c.w, before[2]) << name;
        EXPECT_EQ(c.r, before[3]) << name;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 6 * 2 * 3);  // six shipped profiles
}

TEST(ElementwiseTime, UsesTheFieldAndLeavesStreamingAlone) {
  GpuSpec spec;
  spec.hbm_bandwidth = {100e9};
  spec.hbm_efficiency = 1.0;
  spec.elementwise_bandwidth = {1.25e9};
  spec.kernel_latency = 200'000;  // 0.2 us
  GpuModel g(spec);
  // 1e6 bytes: element-wise 1e6 / 1.25e9 = 800 us; streaming 1e6 / 100e9 = 10 us; + 0.2 us each.
  EXPECT_EQ(g.elementwise_time(Bytes{1e6}, false), 800'000'000 + 200'000);
  EXPECT_EQ(g.memory_bound_time(Bytes{1e6}), 10'000'000 + 200'000);
  EXPECT_EQ(g.elementwise_time(Bytes{0}, false), 0);
  EXPECT_DOUBLE_EQ(g.elementwise_rate(false), 1.25e9);
  // No backward figure: the backward's kernels at the forward's.
  EXPECT_EQ(g.elementwise_time(Bytes{1e6}, true), 800'000'000 + 200'000);
  // With one (2.5e9): 1e6 / 2.5e9 = 400 us + 0.2 us; the forward's unchanged.
  spec.elementwise_bwd_bandwidth = {2.5e9};
  GpuModel b(spec);
  EXPECT_EQ(b.elementwise_time(Bytes{1e6}, true), 400'000'000 + 200'000);
  EXPECT_EQ(b.elementwise_time(Bytes{1e6}, false), 800'000'000 + 200'000);
  EXPECT_DOUBLE_EQ(b.elementwise_rate(true), 2.5e9);
}

TEST(ElementwiseTime, LayerModelMemoryBoundOpsUseTheField) {
  GpuSpec spec;
  spec.peak_flops[static_cast<int>(DType::kBf16)] = 312e12;
  spec.hbm_bandwidth = {2.0e12};
  spec.hbm_efficiency = 0.8;
  spec.kernel_latency = 0;
  GpuModel streaming(spec);
  spec.elementwise_bandwidth = {0.4e12};  // a quarter of 2.0e12 x 0.8 = 1.6e12
  GpuModel slow(spec);
  const ModelShape m{"test", 4, 1024, 16, 4096, 512, 32000};
  WorkloadOptions o;
  for (Pass pass : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight}) {
    double gemm_s = 0, bytes = 0;
    for (const LayerOp& op : layer_ops(m, o, pass)) {
      if (op.gemm) {
        gemm_s += ps_to_seconds(streaming.gemm_time(op.m, op.n, op.k, o.dtype, op.batch));
      } else {
        bytes += op.bytes.value;
      }
    }
    // W's memory-bound ops are the bias and layer-norm parameter reductions: 9h + f = 13312
    // parameters, each read over 512 tokens and written once, 2 bytes: 2 * 513 * 13312.
    if (pass == Pass::kBackwardWeight) {
      EXPECT_DOUBLE_EQ(bytes, 2.0 * 513 * (9 * 1024 + 4096));
    }
    // Pass time = GEMMs + memory-bound bytes / throughput (no kernel latency here); the GEMMs
    // are the same on both, the bytes go at 1.6e12 B/s without the field and 0.4e12 with it.
    const auto ops = layer_ops(m, o, pass);
    EXPECT_NEAR(ps_to_seconds(ops_time(ops, streaming, o.dtype, pass)), gemm_s + bytes / 1.6e12,
                1e-9);
    EXPECT_NEAR(ps_to_seconds(ops_time(ops, slow, o.dtype, pass)), gemm_s + bytes / 0.4e12, 1e-9);
    StageCosts c = stage_costs(m, slow, o, 0, 2, false, false);
    const TimePs t = pass == Pass::kForward ? c.f : pass == Pass::kBackwardInput ? c.b : c.w;
    EXPECT_NEAR(ps_to_seconds(t), 2 * (gemm_s + bytes / 0.4e12), 2e-9);
    // A backward figure (0.8e12) moves B's and W's bytes at it, F's stay at 0.4e12.
    GpuSpec split = spec;
    split.elementwise_bwd_bandwidth = {0.8e12};
    const StageCosts cs = stage_costs(m, GpuModel(split), o, 0, 2, false, false);
    const TimePs ts = pass == Pass::kForward ? cs.f : pass == Pass::kBackwardInput ? cs.b : cs.w;
    const double rate = pass == Pass::kForward ? 0.4e12 : 0.8e12;
    EXPECT_NEAR(ps_to_seconds(ts), 2 * (gemm_s + bytes / rate), 2e-9);
  }
  // The streaming work (e.g. Adam's 28 bytes per parameter) is the same on both.
  EXPECT_EQ(slow.memory_bound_time(Bytes{28e6}), streaming.memory_bound_time(Bytes{28e6}));
}

}  // namespace
}  // namespace pw::hw
