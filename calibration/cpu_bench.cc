#include "calibration/cpu_bench.h"

#include <fmt/format.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>

#include "calibration/gemm_shapes.h"
#include "executor/memory.h"
#include "executor/model.h"
#include "executor/probe.h"
#include "hwmodels/optimizer.h"

namespace pw::calibration {
namespace {

using Clock = std::chrono::steady_clock;

// Every sample is this thread's CPU time (exec::thread_cpu_s, the probe's clock too).
using exec::thread_cpu_s;

/// Cost of one empty thread_cpu_s() pair (a system call each), subtracted from every sample.
double clock_overhead_s() {
  static const double overhead = [] {
    std::vector<double> v;
    for (int i = 0; i < 2001; ++i) {
      double t0 = thread_cpu_s();
      v.push_back(thread_cpu_s() - t0);
    }
    std::nth_element(v.begin(), v.begin() + 1000, v.end());
    return v[1000];
  }();
  return overhead;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "unknown CPU";
}

std::string cpu_clock() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return line.substr(line.find(':') + 2) + " MHz (nominal)";
  return "";
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Keeps results observable so the compiler cannot drop the measured work.
volatile double g_sink = 0;

/// As time_calls, with `prepare` run untimed before every timed call of `fn`.
Timing time_prepared(const std::function<void()>& prepare, const std::function<void()>& fn,
                     double budget_s, int min_iterations) {
  prepare();
  fn();  // warm-up
  const double overhead = clock_overhead_s();
  std::vector<double> samples;
  double spent = 0;
  auto wall_start = Clock::now();
  while (samples.size() < 10000) {
    prepare();
    double t0 = thread_cpu_s();
    fn();
    double t1 = thread_cpu_s();
    samples.push_back(std::max(0.0, t1 - t0 - overhead));
    spent += t1 - t0;
    double wall = std::chrono::duration<double>(Clock::now() - wall_start).count();
    if (static_cast<int>(samples.size()) >= min_iterations &&
        (spent >= budget_s || wall >= 20 * budget_s))
      break;
  }
  return summarize(std::move(samples));
}

std::vector<int> sweep_hiddens(const CpuBenchOptions& o) {
  if (!o.hiddens.empty()) return o.hiddens;
  return o.quick ? std::vector<int>{32, 64, 128, 256} : std::vector<int>{32, 64, 128, 256, 512};
}

std::vector<int> sweep_tokens(const CpuBenchOptions& o) {
  if (!o.tokens.empty()) return o.tokens;
  return o.quick ? std::vector<int>{16, 64, 128} : std::vector<int>{16, 64, 128, 256, 512};
}

std::vector<GemmSample> bench_gemms(const CpuBenchOptions& o, double budget) {
  std::vector<int> hiddens = sweep_hiddens(o), tokens = sweep_tokens(o);
  auto shapes = gemm_sweep(hiddens, tokens, o.head_dim, /*backward=*/true);
  std::vector<GemmSample> out;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& s = shapes[i];
    if (o.progress)
      o.progress(fmt::format("gemm {}/{} {} {}x{}x{} batch {}", i + 1, shapes.size(), s.op, s.m,
                             s.n, s.k, s.batch));
    std::vector<Eigen::MatrixXd> a(s.batch), b(s.batch), c(s.batch);
    for (std::int64_t j = 0; j < s.batch; ++j) {
      a[j] = Eigen::MatrixXd::Random(s.m, s.k);
      b[j] = Eigen::MatrixXd::Random(s.k, s.n);
      c[j] = Eigen::MatrixXd::Zero(s.m, s.n);
    }
    Timing t = time_calls(
        [&] {
          for (std::int64_t j = 0; j < s.batch; ++j) c[j].noalias() = a[j] * b[j];
          g_sink = g_sink + c[0](0, 0);
        },
        budget, o.min_iterations);
    out.push_back({s.op, "fp64", s.m, s.n, s.k, s.batch, t});
  }
  return out;
}

/// One memory-bound kernel over n doubles; returns bytes moved per call.
double run_kernel(const std::string& kernel, Eigen::ArrayXd& x, Eigen::ArrayXd& y,
                  const Eigen::ArrayXd& z, bool measure_only_bytes) {
  auto n = static_cast<double>(x.size()) * sizeof(double);
  if (kernel == "copy") {
    if (!measure_only_bytes) y = x;
    return 2 * n;
  }
  if (kernel == "scale") {
    if (!measure_only_bytes) y = 1.0001 * x;
    return 2 * n;
  }
  if (kernel == "read") {
    if (!measure_only_bytes) g_sink = g_sink + x.sum();
    return n;
  }
  if (kernel == "add") {
    if (!measure_only_bytes) y = x + z;
    return 3 * n;
  }
  // gelu, tanh form (as Megatron and the executor use it)
  if (!measure_only_bytes)
    y = 0.5 * x * (1.0 + (0.7978845608028654 * (x + 0.044715 * x.cube())).tanh());
  return 2 * n;
}

std::vector<MemorySample> bench_memory(const CpuBenchOptions& o, double budget) {
  const std::vector<std::string> kernels = {"copy", "scale", "read", "add", "gelu"};
  std::vector<std::int64_t> counts;  // doubles per array: 4 KiB .. 64 MiB (quick: 16 MiB)
  for (std::int64_t n = 512; n <= (o.quick ? (2 << 20) : (8 << 20)); n *= 4) counts.push_back(n);
  std::vector<MemorySample> out;
  int step = 0, total = static_cast<int>(kernels.size() * counts.size());
  for (const auto& kernel : kernels) {
    for (std::int64_t n : counts) {
      if (o.progress)
        o.progress(fmt::format("memory {}/{} {} {} KiB", ++step, total, kernel, n * 8 / 1024));
      Eigen::ArrayXd x = Eigen::ArrayXd::Random(n), y = Eigen::ArrayXd::Zero(n);
      Eigen::ArrayXd z = Eigen::ArrayXd::Random(n);
      double bytes = run_kernel(kernel, x, y, z, true);
      Timing t = time_calls(
          [&] {
            run_kernel(kernel, x, y, z, false);
            g_sink = g_sink + y(0);
          },
          budget, o.min_iterations);
      out.push_back({kernel, "fp64", bytes, t});
    }
  }
  return out;
}

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void layer_norm_rows(const RowMat& x, RowMat& y) {
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    double mean = x.row(i).mean();
    double var = (x.row(i).array() - mean).square().mean();
    y.row(i) = (x.row(i).array() - mean) / std::sqrt(var + 1e-5);
  }
}

/// The element-wise work of one executor layer forward (t = 1): layer norm, causal softmax per
/// head, residual add, layer norm, GELU over the MLP width, residual add.
struct LayerMix {
  int tokens, hidden, heads;
  RowMat x, y, x1, u, scores;
  LayerMix(int t, int h, int a)
      : tokens(t),
        hidden(h),
        heads(a),
        x(RowMat::Random(t, h)),
        y(t, h),
        x1(t, h),
        u(RowMat::Random(t, 4 * h)),
        scores(RowMat::Random(t, t)) {}
  void run() {
    layer_norm_rows(x, y);
    for (int head = 0; head < heads; ++head) {
      for (int i = 0; i < tokens; ++i) {  // causal softmax over keys 0..i
        auto row = scores.row(i).head(i + 1);
        double mx = row.maxCoeff();
        row = (row.array() - mx).exp();
        row /= row.sum();
      }
    }
    x1 = x + y;
    layer_norm_rows(x1, y);
    u = 0.5 * u.array() *
        (1.0 + (0.7978845608028654 * (u.array() + 0.044715 * u.array().cube())).tanh());
    x1 += y;
    g_sink = g_sink + u(0, 0) + x1(0, 0) + scores(0, 0);
  }
  /// Bytes hwmodels' workload model counts for these ops (16-bit activations, transformer.cc):
  /// layernorms 2 x 4th, residuals 2 x 7th, gelu 4 t f (f = 4h), softmax + dropout 9 a s^2.
  double model_bytes() const {
    double th = double(tokens) * hidden;
    return 38.0 * th + 9.0 * heads * double(tokens) * tokens;
  }
};

std::vector<MemorySample> bench_layer_mix(const CpuBenchOptions& o, double budget,
                                          const std::vector<int>& hiddens,
                                          const std::vector<int>& tokens) {
  std::vector<MemorySample> out;
  int step = 0, total = static_cast<int>(hiddens.size() * tokens.size());
  for (int h : hiddens) {
    for (int t : tokens) {
      if (o.progress)
        o.progress(fmt::format("layer element-wise {}/{} h={} tokens={}", ++step, total, h, t));
      LayerMix mix(t, h, std::max(1, h / o.head_dim));
      Timing time = time_calls([&] { mix.run(); }, budget, o.min_iterations);
      out.push_back({"layer_mix", "fp64", mix.model_bytes(), time});
    }
  }
  return out;
}

/// The executor's stage of `layers` layers of hidden size h (h / head_dim heads, ffn = 4h) over
/// `tokens` tokens at micro batch 1: what the layer passes, the Adam step and the core probe time.
exec::StageModel bench_stage(const CpuBenchOptions& o, int layers, int h, int tokens) {
  ModelShape shape{"calibration", layers, h, std::max(1, h / o.head_dim), 4 * h, tokens, 64};
  ParallelConfig pc;
  pc.micro_batch_size = 1;
  const exec::ModelDims dims = exec::make_model_dims(shape, pc, 1, "calibration");
  return exec::StageModel(dims, 0, layers, false, false, 0, 1, 1.0, nullptr);
}

/// The executor's own layer passes (exec::StageModel, one layer, micro batch 1, ffn = 4h): F,
/// B (input gradient) and W (weight gradient), each timed alone. What the GEMM benchmarks miss
/// (layer norms, causal softmax, GELU with scalar tanh, bias and residual adds, copies and the
/// temporaries the executor allocates) is in here; the fit subtracts the modelled GEMM time.
std::vector<LayerSample> bench_layer_passes(const CpuBenchOptions& o, double budget,
                                            const std::vector<int>& hiddens,
                                            const std::vector<int>& tokens) {
  std::vector<LayerSample> out;
  int step = 0, total = static_cast<int>(hiddens.size() * tokens.size());
  for (int h : hiddens) {
    for (int t : tokens) {
      if (o.progress)
        o.progress(fmt::format("executor layer passes {}/{} h={} tokens={}", ++step, total, h, t));
      const int heads = std::max(1, h / o.head_dim);
      exec::StageModel m = bench_stage(o, 1, h, t);
      exec::Mat in = exec::Mat::Random(t, h), d_out = exec::Mat::Random(t, h);
      // B needs F's saved state and W needs B's; each pass is timed with its prerequisites run
      // untimed just before, so every timed call does exactly the executor's work.
      auto fwd = [&] { m.forward(0, &in, 0, true); };
      auto bwd = [&] { m.backward_input(0, &d_out); };
      auto wgt = [&] {
        m.backward_weight(0);
        g_sink = g_sink + m.tensors()[0].grad(0, 0);
      };
      Timing f = time_calls(fwd, budget, o.min_iterations);
      Timing b = time_prepared([&] { fwd(); }, bwd, budget, o.min_iterations);
      Timing w = time_prepared(
          [&] {
            fwd();
            bwd();
          },
          wgt, budget, o.min_iterations);
      out.push_back({"forward", h, heads, t, f});
      out.push_back({"backward_input", h, heads, t, b});
      out.push_back({"backward_weight", h, heads, t, w});
    }
  }
  return out;
}

/// The executor's own optimizer step (exec::StageModel::adam_step over a stage of 1, 2, 4 and 8
/// layers of h = 256: 0.8 M to 6.3 M parameters, beyond the caches as an executor rank's stage
/// is). Recorded in the workload model's bytes (hw::kAdamBytesPerParam per parameter, as
/// layer_mix records model bytes), so the fitted rate is the profile's streaming figure that
/// makes hwmodels' Adam (hw::adam_step_time) take the executor's measured time: the float64
/// step makes three passes over its state and divides and takes square roots, which a copy
/// kernel's bandwidth does not show (copy x 0.5 made it 7x too fast on the 2-core EPYC).
std::vector<MemorySample> bench_adam_step(const CpuBenchOptions& o, double budget) {
  std::vector<MemorySample> out;
  constexpr int kHidden = 256;
  const std::vector<int> layers{1, 2, 4, 8};
  int step = 0;
  for (int n : layers) {
    if (o.progress)
      o.progress(fmt::format("executor Adam step {}/{} layers={}", ++step, layers.size(), n));
    exec::StageModel m = bench_stage(o, n, kHidden, 64);
    int t = 0;
    Timing time = time_calls(
        [&] {
          m.adam_step(1e-9, ++t);
          g_sink = g_sink + m.tensors()[0].value(0, 0);
        },
        budget, o.min_iterations);
    out.push_back({"adam_step", "fp64",
                   static_cast<double>(m.num_parameters()) * hw::kAdamBytesPerParam, time});
  }
  return out;
}

/// Each core this process may run on, timed pinned to it (CoreProbe: exec::probe_forward_samples,
/// the probe the executor also runs), one after the other. Empty when the affinity mask cannot
/// be read or a core cannot be pinned to: the benchmarks then run where the scheduler puts them.
std::vector<CoreProbe> probe_cores(const CpuBenchOptions& o) {
  std::vector<CoreProbe> out;
  const std::vector<int> cores = allowed_cores();
  for (std::size_t i = 0; i < cores.size(); ++i) {
    if (o.progress)
      o.progress(fmt::format("core {}/{} (core {}): executor layer forward h={} tokens={}", i + 1,
                             cores.size(), cores[i], exec::kProbeHidden, exec::kProbeTokens));
    CorePin pin(cores[i]);
    if (!pin.ok()) return {};
    out.push_back(
        {cores[i], summarize(exec::probe_forward_samples(std::max(o.min_iterations, 5)))});
  }
  return out;
}

double bench_call_overhead() {
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(1, 1), b = a, c = a;
  Timing t = time_calls(
      [&] {
        c.noalias() = a * b;
        g_sink = g_sink + c(0, 0);
      },
      0.005, 100);
  return t.median_s;
}

}  // namespace

Timing time_calls(const std::function<void()>& fn, double budget_s, int min_iterations) {
  fn();  // warm-up: caches, page faults, lazy allocation
  const double overhead = clock_overhead_s();
  // A call shorter than the clock resolves (an 8 KiB copy takes about as long as reading the
  // clock) would read 0 once the clock's own cost is taken off, and a zero time cannot be fitted:
  // such calls are timed in batches of `reps`, each batch lasting at least 50 clock costs.
  const double min_sample = std::max(50 * overhead, 5e-6);
  int reps = 1;
  for (;;) {
    const double t0 = thread_cpu_s();
    for (int r = 0; r < reps; ++r) fn();
    if (thread_cpu_s() - t0 >= min_sample || reps >= (1 << 20)) break;
    reps *= 2;
  }
  std::vector<double> samples;
  double start = thread_cpu_s();
  auto wall_start = Clock::now();
  while (samples.size() < 10000) {
    double t0 = thread_cpu_s();
    for (int r = 0; r < reps; ++r) fn();
    double t1 = thread_cpu_s();
    samples.push_back(std::max(0.0, t1 - t0 - overhead) / reps);
    // The budget counts this thread's CPU time (a loaded machine does not shorten the sample),
    // with a wall-clock cap of 20x so that a starved process still finishes.
    double wall = std::chrono::duration<double>(Clock::now() - wall_start).count();
    if (static_cast<int>(samples.size()) >= min_iterations &&
        (t1 - start >= budget_s || wall >= 20 * budget_s))
      break;
  }
  return summarize(std::move(samples));
}

std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

CorePin::CorePin(int core) {
  cpu_set_t old;
  CPU_ZERO(&old);
  if (core < 0 || core >= CPU_SETSIZE || sched_getaffinity(0, sizeof old, &old) != 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(core, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return;
  old_.resize(sizeof old);
  std::memcpy(old_.data(), &old, sizeof old);
  ok_ = true;
}

CorePin::~CorePin() {
  if (!ok_) return;
  cpu_set_t old;
  std::memcpy(&old, old_.data(), sizeof old);
  sched_setaffinity(0, sizeof old, &old);
}

int slowest_core(const std::vector<CoreProbe>& probes) {
  const CoreProbe* slow = nullptr;
  for (const CoreProbe& c : probes)
    if (!slow || c.time.median_s > slow->time.median_s ||
        (c.time.median_s == slow->time.median_s && c.core < slow->core))
      slow = &c;
  return slow ? slow->core : -1;
}

RawProvenance cpu_provenance(const std::string& command, bool quick) {
  RawProvenance p;
  p.backend = "cpu";
  p.device = cpu_model_name();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) p.host = host;
  p.eigen = fmt::format("{}.{}.{}", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
#ifdef __VERSION__
  p.compiler = __VERSION__;
#endif
  p.clocks = cpu_clock();
  p.date = utc_now();
  p.command = command;
  p.device_count = 1;
  p.compute_units = 1;  // one thread per executor rank: no wave quantisation
  p.memory_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  p.quick = quick;
  return p;
}

RawResults run_cpu_benchmarks(const CpuBenchOptions& options, const std::string& command) {
  double budget =
      options.seconds_per_point > 0 ? options.seconds_per_point : (options.quick ? 0.02 : 0.1);
  exec::keep_freed_memory();  // as the executor runs (executor/memory.h)
  RawResults raw;
  raw.provenance = cpu_provenance(command, options.quick);
  // The cores of one machine need not run alike (a VM's two "cores" read 2.33 and 1.87 ms on
  // the same probe, and which one a run landed on moved the fitted element-wise figure by a
  // third): every benchmark runs on the slowest, the core that paces a step of one rank per core.
  raw.core_probes = probe_cores(options);
  raw.pinned_core = slowest_core(raw.core_probes);
  CorePin pin(raw.pinned_core);
  if (!pin.ok()) raw.core_probes.clear(), raw.pinned_core = -1;
  raw.launch_latency_s = bench_call_overhead();
  raw.gemms = bench_gemms(options, budget);
  raw.memory = bench_memory(options, budget);
  auto mix = bench_layer_mix(options, budget, sweep_hiddens(options), sweep_tokens(options));
  raw.memory.insert(raw.memory.end(), mix.begin(), mix.end());
  auto adam = bench_adam_step(options, budget);
  raw.memory.insert(raw.memory.end(), adam.begin(), adam.end());
  raw.layers = bench_layer_passes(options, budget, sweep_hiddens(options), sweep_tokens(options));
  return raw;
}

}  // namespace pw::calibration
