#include "calibration/fit.h"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "calibration/profile_writer.h"
#include "core/error.h"
#include "executor/probe.h"
#include "hwmodels/transformer.h"

namespace pw::calibration {
namespace {

/// Minimises sum_i ((x_i . p) / t_i - 1)^2: least squares on relative residuals.
Eigen::VectorXd relative_least_squares(const Eigen::MatrixXd& x, const Eigen::VectorXd& t) {
  Eigen::MatrixXd a = x;
  for (Eigen::Index i = 0; i < a.rows(); ++i) a.row(i) /= t(i);
  Eigen::VectorXd ones = Eigen::VectorXd::Ones(a.rows());
  return a.colPivHouseholderQr().solve(ones);
}

/// Scores predictions against measurements; `label(i)` describes point i.
template <typename Label>
FitQuality score(const std::vector<double>& pred, const std::vector<double>& meas, Label label) {
  FitQuality q;
  q.points = static_cast<int>(meas.size());
  if (meas.empty()) return q;
  double mean_log = 0;
  for (double m : meas) mean_log += std::log(m);
  mean_log /= static_cast<double>(meas.size());
  double ss_res = 0, ss_tot = 0;
  std::vector<double> rel(meas.size());
  for (std::size_t i = 0; i < meas.size(); ++i) {
    double lp = std::log(std::max(pred[i], 1e-300));
    double lm = std::log(meas[i]);
    ss_res += (lp - lm) * (lp - lm);
    ss_tot += (lm - mean_log) * (lm - mean_log);
    rel[i] = std::abs(pred[i] - meas[i]) / meas[i];
    if (rel[i] > q.worst_residual || i == 0) {
      q.worst_residual = rel[i];
      q.worst_at = label(i);
    }
  }
  q.r2_log = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  std::vector<double> sorted = rel;
  std::sort(sorted.begin(), sorted.end());
  std::size_t n = sorted.size();
  q.median_residual = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return q;
}

/// Fits t = a + b * x (relative residuals), a >= 0 and b > 0. Returns {a, b}; false if the
/// data cannot determine b.
bool fit_affine(const std::vector<double>& x, const std::vector<double>& t, double* a, double* b) {
  auto n = static_cast<Eigen::Index>(x.size());
  Eigen::MatrixXd design(n, 2);
  Eigen::VectorXd tv(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    design(i, 0) = 1.0;
    design(i, 1) = x[static_cast<std::size_t>(i)];
    tv(i) = t[static_cast<std::size_t>(i)];
  }
  Eigen::VectorXd p = relative_least_squares(design, tv);
  if (p(0) < 0) {  // latency below zero is noise: refit the slope alone
    p(0) = 0;
    p(1) = relative_least_squares(design.col(1), tv)(0);
  }
  *a = p(0);
  *b = p(1);
  return std::isfinite(*a) && std::isfinite(*b) && *b > 0;
}

}  // namespace

AlphaBetaFit fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds,
                            const std::string& source, const std::string& key) {
  PW_ASSERT(bytes.size() == seconds.size(), "bytes and seconds differ in length");
  std::vector<double> distinct = bytes;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() < 2)
    throw ConfigError(source, key, "need measurements at 2 or more sizes to fit alpha-beta");
  AlphaBetaFit f;
  if (!fit_affine(bytes, seconds, &f.alpha_s, &f.beta_s_per_byte))
    throw ConfigError(source, key, "times do not grow with size: cannot fit a bandwidth");
  std::vector<double> pred(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) pred[i] = f.predict(bytes[i]);
  f.quality =
      score(pred, seconds, [&](std::size_t i) { return fmt::format("bytes={}", bytes[i]); });
  return f;
}

double GemmFit::predict(const GemmSample& g) const {
  hw::GpuModel model(spec);
  double eff = model.fitted_gemm_efficiency(g.m, g.n, g.k, g.batch);
  return kernel_latency_s + g.flops() / (peak_flops * eff);
}

namespace {

/// k_half candidates: 0, then 2^(i/2) from 2 to 8192.
std::vector<double> k_half_grid() {
  std::vector<double> out{0.0};
  for (int i = 2; i <= 26; ++i) out.push_back(std::round(std::pow(2.0, i / 2.0)));
  return out;
}

GemmFit fit_one_dtype(const std::string& dtype, const std::vector<const GemmSample*>& samples,
                      const hw::GpuSpec& base, double peak, const std::string& source) {
  std::vector<double> t(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) t[i] = samples[i]->time.median_s;
  auto label = [&](std::size_t i) {
    const auto& g = *samples[i];
    return fmt::format("{} m={} n={} k={} batch={}", g.op, g.m, g.n, g.k, g.batch);
  };
  double ref_peak = peak > 0 ? peak : 1e12;  // CPU: fit against 1 TFLOP/s, rescale below
  GemmFit best;
  bool have = false;
  for (double k_half : k_half_grid()) {
    hw::GpuSpec spec = base;
    spec.gemm_max_efficiency = 1.0;
    spec.gemm_k_half = k_half;
    hw::GpuModel model(spec);
    std::vector<double> x(samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const auto& g = *samples[i];
      x[i] = g.flops() / (ref_peak * model.fitted_gemm_efficiency(g.m, g.n, g.k, g.batch));
    }
    double latency = 0, inv_eff = 0;
    if (!fit_affine(x, t, &latency, &inv_eff)) continue;
    GemmFit f;
    f.dtype = dtype;
    f.peak_flops = peak > 0 ? peak : ref_peak / inv_eff;
    f.max_efficiency = peak > 0 ? std::min(1.0, 1.0 / inv_eff) : 1.0;
    f.k_half = k_half;
    f.kernel_latency_s = latency;
    f.spec = model.spec();
    f.spec.gemm_max_efficiency = f.max_efficiency;
    std::vector<double> pred(samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) pred[i] = f.predict(*samples[i]);
    f.quality = score(pred, t, label);
    if (!have || f.quality.r2_log > best.quality.r2_log) best = f;
    have = true;
  }
  if (!have)
    throw ConfigError(source, "gemm", "GEMM times of dtype " + dtype + " do not grow with work");
  // The measured table scales the formula; hwmodels caps efficiency at 1, so the peak must not
  // be below any measured (latency-free) rate. Raising it and lowering max_efficiency by the same
  // factor leaves every prediction unchanged.
  double need = 0;
  for (const GemmSample* g : samples) {
    double compute = std::max(g->time.median_s - best.kernel_latency_s, 0.05 * g->time.median_s);
    need = std::max(need, g->flops() / compute);
  }
  if (peak <= 0 && need > best.peak_flops) {
    best.max_efficiency = best.peak_flops / need;
    best.peak_flops = need;
    best.spec.gemm_max_efficiency = best.max_efficiency;
  }
  return best;
}

}  // namespace

std::vector<GemmFit> fit_gemms(const std::vector<GemmSample>& gemms, const hw::GpuSpec& base,
                               const std::function<double(const std::string&)>& peak_flops,
                               const std::string& source) {
  std::map<std::string, std::vector<const GemmSample*>> by_dtype;
  for (const auto& g : gemms) by_dtype[g.dtype].push_back(&g);
  std::vector<GemmFit> out;
  for (const auto& [dtype, samples] : by_dtype) {
    if (samples.size() < 2)
      throw ConfigError(source, "gemm", "need 2 or more GEMM shapes to fit dtype " + dtype);
    out.push_back(fit_one_dtype(dtype, samples, base, peak_flops(dtype), source));
  }
  return out;
}

namespace {

template <typename Sample, typename Key, typename Bytes>
std::vector<SeriesFit> fit_series(const std::vector<Sample>& samples, const std::string& kind,
                                  const std::string& source, Key key_of, Bytes bytes_of) {
  std::map<std::tuple<std::string, std::string, int>, std::vector<const Sample*>> groups;
  for (const auto& s : samples) groups[key_of(s)].push_back(&s);
  std::vector<SeriesFit> out;
  for (const auto& [key, group] : groups) {
    const auto& [library, op, ranks] = key;
    SeriesFit sf;
    sf.kind = kind;
    sf.op = op;
    sf.library = library;
    sf.ranks = ranks;
    sf.name = library.empty() ? op : fmt::format("{} {} x{}", library, op, ranks);
    std::vector<double> b, t;
    for (const Sample* s : group) {
      b.push_back(bytes_of(*s));
      t.push_back(s->time.median_s);
      sf.peak_measured_bw = std::max(sf.peak_measured_bw, b.back() / t.back());
    }
    sf.fit = fit_alpha_beta(b, t, source, kind + "[" + sf.name + "]");
    out.push_back(sf);
  }
  return out;
}

/// hwmodels' pass of one layer sample, split into what the element-wise bandwidth does not
/// change (GEMMs, kernel latencies) and the memory-bound bytes it divides.
struct PassModel {
  double fixed_s = 0;
  double bytes = 0;
};

PassModel pass_model(const LayerSample& l, const hw::GpuModel& gpu) {
  ModelShape shape{"layer",
                   1,
                   static_cast<int>(l.hidden),
                   static_cast<int>(l.heads),
                   static_cast<int>(4 * l.hidden),
                   static_cast<int>(l.seq),
                   64};
  hw::WorkloadOptions wo;
  hw::Pass pass = l.pass == "forward"          ? hw::Pass::kForward
                  : l.pass == "backward_input" ? hw::Pass::kBackwardInput
                                               : hw::Pass::kBackwardWeight;
  PassModel pm;
  for (const hw::LayerOp& op : hw::layer_ops(shape, wo, pass)) {
    if (op.gemm) {
      pm.fixed_s += ps_to_seconds(gpu.gemm_time(op.m, op.n, op.k, wo.dtype, op.batch));
    } else {
      pm.fixed_s += ps_to_seconds(gpu.spec().kernel_latency);
      pm.bytes += op.bytes.value;
    }
  }
  return pm;
}

/// Fits the element-wise throughput from the executor's layer passes (see
/// FitResult::elementwise) and fills layer_checks. Returns false (nothing set) when the passes
/// leave no element-wise time to fit (the modelled GEMMs alone reach the measured times).
bool fit_layer_passes(FitResult& r, const std::string& source) {
  const GemmFit* g = &r.gemms.front();
  for (const auto& f : r.gemms)
    if (f.dtype == "bf16") g = &f;
  hw::GpuModel gpu(fitted_gpu(*g, r.raw.gemms, r.table_threshold));
  // Minimise sum ((fixed_i + bytes_i * x) / T_i - 1)^2 over the passes of `pass`, x = 1 /
  // throughput: F gives the forward's figure, B the backward's (W's element-wise work, bias and
  // norm reductions, is priced at the backward's; its passes check the fit).
  auto fit_pass = [&](const char* pass) {
    double num = 0, den = 0;
    for (const LayerSample& l : r.raw.layers) {
      if (l.pass != pass || l.time.median_s <= 0) continue;
      PassModel pm = pass_model(l, gpu);
      double a = pm.bytes / l.time.median_s, y = 1.0 - pm.fixed_s / l.time.median_s;
      num += a * y;
      den += a * a;
    }
    return den > 0 && num > 0 ? num / den : 0.0;
  };
  const double x = fit_pass("forward"), x_bwd = fit_pass("backward_input");
  if (x <= 0) return false;
  r.elementwise = AlphaBetaFit{0.0, x, {}};
  r.elementwise_source = "executor layer passes";
  r.has_elementwise = true;
  r.has_elementwise_bwd = x_bwd > 0;
  if (r.has_elementwise_bwd) r.elementwise_bwd = AlphaBetaFit{0.0, x_bwd, {}};
  auto x_of = [&](const std::string& pass) {
    return pass != "forward" && r.has_elementwise_bwd ? x_bwd : x;
  };
  std::vector<double> pred_fb, meas_fb;
  std::vector<std::string> label_fb;
  for (const char* pass : {"forward", "backward_input", "backward_weight"}) {
    std::vector<double> pred, meas;
    std::vector<std::string> labels;
    for (const LayerSample& l : r.raw.layers) {
      if (l.pass != pass || l.time.median_s <= 0) continue;
      PassModel pm = pass_model(l, gpu);
      pred.push_back(pm.fixed_s + pm.bytes * x_of(l.pass));
      meas.push_back(l.time.median_s);
      labels.push_back(fmt::format("{} h={} a={} s={}", l.pass, l.hidden, l.heads, l.seq));
      if (l.pass != std::string("backward_weight")) {
        pred_fb.push_back(pred.back());
        meas_fb.push_back(meas.back());
        label_fb.push_back(labels.back());
      }
    }
    if (!pred.empty())
      r.layer_checks.emplace_back(pass,
                                  score(pred, meas, [&](std::size_t i) { return labels[i]; }));
  }
  r.elementwise.quality = score(pred_fb, meas_fb, [&](std::size_t i) { return label_fb[i]; });
  (void)source;
  return true;
}

// One efficiency per (pass, dtype): minimises sum_i ((L + f_i x - t_i) / t_i)^2 over
// x = 1 / (peak * efficiency), i.e. x = sum (f/t)(1 - L/t) / sum (f/t)^2.
std::vector<AttentionFit> fit_attention(const std::vector<AttentionSample>& samples,
                                        const std::vector<GemmFit>& gemms,
                                        const std::function<double(const std::string&)>& peak_flops,
                                        const std::string& source) {
  std::map<std::pair<std::string, std::string>, std::vector<const AttentionSample*>> groups;
  for (const auto& a : samples) groups[{a.pass, a.dtype}].push_back(&a);
  std::vector<AttentionFit> out;
  for (const auto& [key, calls] : groups) {
    const std::vector<const AttentionSample*>& v = calls;  // a lambda below reads it (clang 14)
    AttentionFit f;
    f.pass = key.first;
    f.dtype = key.second;
    const std::string where = fmt::format("attention[{} {}]", f.pass, f.dtype);
    f.peak_flops = peak_flops(f.dtype);
    if (f.peak_flops <= 0)
      throw ConfigError(source, where, "no peak FLOP/s for this dtype in the provenance");
    f.kernel_latency_s = gemms.empty() ? 0.0 : gemms.front().kernel_latency_s;
    for (const auto& g : gemms)
      if (g.dtype == f.dtype) f.kernel_latency_s = g.kernel_latency_s;
    double num = 0, den = 0;
    for (const AttentionSample* a : v) {
      const double t = a->time.median_s, ft = a->flops() / t;
      num += ft * (1.0 - f.kernel_latency_s / t);
      den += ft * ft;
    }
    if (num <= 0 || den <= 0)
      throw ConfigError(source, where,
                        "the calls take no longer than the kernel latency; cannot fit");
    f.efficiency = den / (num * f.peak_flops);
    if (f.efficiency > 1.0)
      throw ConfigError(
          source, where,
          fmt::format("the calls run at {:.0f}% of the peak; is --base the traced GPU?",
                      100 * f.efficiency));
    std::vector<double> pred, meas;
    for (const AttentionSample* a : v) {
      pred.push_back(f.predict(*a));
      meas.push_back(a->time.median_s);
    }
    f.quality = score(pred, meas, [&](std::size_t i) {
      const AttentionSample& a = *v[i];
      return fmt::format("heads={},s={}x{},d={}{}", a.heads, a.seq_q, a.seq_k, a.head_dim,
                         a.causal ? ",causal" : "");
    });
    out.push_back(f);
  }
  return out;
}

}  // namespace

FitResult fit_all(const RawResults& raw, const hw::GpuSpec& base,
                  const std::function<double(const std::string&)>& peak_flops,
                  const std::string& source) {
  FitResult r;
  r.provenance = raw.provenance;
  r.launch_latency_s = raw.launch_latency_s;
  r.core_probes = raw.core_probes;
  r.pinned_core = raw.pinned_core;
  if (raw.gemms.empty()) throw ConfigError(source, "gemm", "no GEMM measurements to fit");
  if (raw.memory.empty()) throw ConfigError(source, "memory", "no memory measurements to fit");
  r.gemms = fit_gemms(raw.gemms, base, peak_flops, source);
  r.attention = fit_attention(raw.attention, r.gemms, peak_flops, source);
  r.memory = fit_series(
      raw.memory, "memory", source,
      [](const MemorySample& m) { return std::make_tuple(std::string(), m.kernel, 0); },
      [](const MemorySample& m) { return m.bytes; });
  r.transfers = fit_series(
      raw.transfers, "transfer", source,
      [](const TransferSample& t) { return std::make_tuple(std::string(), t.link, 0); },
      [](const TransferSample& t) { return t.bytes; });
  r.collectives = fit_series(
      raw.collectives, "collective", source,
      [](const CollectiveSample& c) { return std::make_tuple(c.library, c.op, c.ranks); },
      [](const CollectiveSample& c) { return c.bytes; });
  for (auto& c : r.collectives) c.bus_factor = busbw_factor(c.op, c.ranks);
  r.raw = raw;
  // Element-wise throughput: the executor's layer passes, else (older raw files) its
  // element-wise mix when measured; GPUs have neither.
  if (raw.layers.empty() || !fit_layer_passes(r, source)) {
    std::vector<double> b, t;
    for (const auto& m : raw.memory) {
      if (m.kernel != "layer_mix") continue;
      b.push_back(m.bytes);
      t.push_back(m.time.median_s);
    }
    if (!b.empty()) {
      r.elementwise = fit_alpha_beta(b, t, source, "memory[layer_mix]");
      r.elementwise_source = "layer_mix";
      r.has_elementwise = true;
    }
  }
  // The streaming figure: the executor's own Adam step where measured (CPU), in model bytes.
  for (const auto& m : r.memory)
    if (m.op == "adam_step") {
      r.memory_pooled = m.fit;
      r.memory_source = "executor Adam step";
      r.memory_in_model_bytes = true;
      return r;
    }
  if (r.has_elementwise) {
    // The streaming figure apart from it: the copy kernel (reads and writes in equal parts, as
    // the optimizer step and the offload copies stream their state).
    const SeriesFit* copy = nullptr;
    for (const auto& m : r.memory)
      if (m.op == "copy") copy = &m;
    if (copy == nullptr)
      throw ConfigError(source, "memory",
                        "no 'copy' kernel measured: the profile's streaming bandwidth "
                        "(gpu.hbm_bandwidth_gb_per_s) is fitted from it");
    r.memory_pooled = copy->fit;
    r.memory_source = "copy kernel";
    return r;
  }
  std::vector<double> b, t;
  for (const auto& m : raw.memory) {
    b.push_back(m.bytes);
    t.push_back(m.time.median_s);
  }
  r.memory_pooled = fit_alpha_beta(b, t, source, "memory");
  r.memory_source = "all memory kernels";
  return r;
}

hw::GpuSpec fitted_gpu(const GemmFit& g, const std::vector<GemmSample>& samples,
                       double table_threshold) {
  hw::GpuSpec spec = g.spec;
  spec.peak_flops.fill(g.peak_flops);
  spec.kernel_latency = seconds_to_ps(g.kernel_latency_s);
  spec.measured.clear();
  if (g.quality.worst_residual > table_threshold) {
    std::vector<GemmSample> own;
    for (const auto& s : samples)
      if (s.dtype == g.dtype) own.push_back(s);
    for (const TableRow& row : measured_table(g, own))
      for (int d = 0; d < hw::kNumDTypes; ++d)
        spec.measured.push_back({row.m, row.n, row.k, static_cast<hw::DType>(d), row.tflops});
  }
  return spec;
}

std::string cores_line(const FitResult& fit) {
  if (fit.core_probes.empty() || fit.pinned_core < 0) return {};
  double fast = fit.core_probes.front().time.median_s, slow = fast;
  for (const CoreProbe& c : fit.core_probes) {
    fast = std::min(fast, c.time.median_s);
    slow = std::max(slow, c.time.median_s);
  }
  std::string each;
  if (fit.core_probes.size() <= 8) {
    for (const CoreProbe& c : fit.core_probes)
      each +=
          fmt::format("{} {}: {:.2f} ms", each.empty() ? "" : ",", c.core, c.time.median_s * 1e3);
  } else {
    each = fmt::format(" ({}) {:.2f} to {:.2f} ms", fit.core_probes.size(), fast * 1e3, slow * 1e3);
  }
  return fmt::format(
      "cores{} (executor layer forward h={}, {} tokens) -> benchmarks pinned to core {}, the "
      "slowest ({:.2f}x the fastest)",
      each, exec::kProbeHidden, exec::kProbeTokens, fit.pinned_core, fast > 0 ? slow / fast : 1.0);
}

std::string fit_report(const FitResult& fit) {
  std::string out = cores_line(fit);  // where everything below was measured
  if (!out.empty()) out += "\n";
  auto quality = [](const FitQuality& q) {
    return fmt::format("R2(log)={:.4f} worst={:.1f}% at {} median={:.1f}% n={}", q.r2_log,
                       100 * q.worst_residual, q.worst_at, 100 * q.median_residual, q.points);
  };
  for (const auto& g : fit.gemms)
    out += fmt::format(
        "gemm {:<5} peak={:.3f} TFLOP/s max_efficiency={:.3f} k_half={} latency={:.2f} us  {}\n",
        g.dtype, g.peak_flops * 1e-12, g.max_efficiency, g.k_half, g.kernel_latency_s * 1e6,
        quality(g.quality));
  for (const auto& a : fit.attention)
    out += fmt::format(
        "attention {:<8} {:<5} efficiency={:.3f} ({:.1f} TFLOP/s) latency={:.2f} us  {}\n", a.pass,
        a.dtype, a.efficiency, a.efficiency * a.peak_flops * 1e-12, a.kernel_latency_s * 1e6,
        quality(a.quality));
  auto series = [&](const std::vector<SeriesFit>& v) {
    for (const auto& s : v)
      out += fmt::format("{} {:<24} alpha={:.2f} us bw={:.2f} GB/s{}  {}\n", s.kind, s.name,
                         s.fit.alpha_s * 1e6, s.fit.bandwidth() * 1e-9,
                         s.bus_factor != 1 ? fmt::format(" busbw={:.2f} GB/s",
                                                         s.fit.bandwidth() * s.bus_factor * 1e-9)
                                           : std::string(),
                         quality(s.fit.quality));
  };
  series(fit.memory);
  out += fmt::format("memory {:<24} alpha={:.2f} us bw={:.2f} GB/s  {} (from {})\n",
                     "(streaming, hbm)", fit.memory_pooled.alpha_s * 1e6,
                     fit.memory_pooled.bandwidth() * 1e-9, quality(fit.memory_pooled.quality),
                     fit.memory_source);
  if (fit.has_elementwise)
    out += fmt::format("memory {:<24} alpha={:.2f} us bw={:.2f} GB/s  {} (from {})\n",
                       "(element-wise)", fit.elementwise.alpha_s * 1e6,
                       fit.elementwise.bandwidth() * 1e-9, quality(fit.elementwise.quality),
                       fit.elementwise_source);
  if (fit.has_elementwise_bwd)
    out += fmt::format("memory {:<24} alpha={:.2f} us bw={:.2f} GB/s  (from {}, B passes)\n",
                       "(element-wise backward)", fit.elementwise_bwd.alpha_s * 1e6,
                       fit.elementwise_bwd.bandwidth() * 1e-9, fit.elementwise_source);
  for (const auto& [pass, q] : fit.layer_checks)
    out += fmt::format("layer {:<25} hwmodels vs executor  {}\n", pass, quality(q));
  series(fit.transfers);
  series(fit.collectives);
  if (fit.launch_latency_s > 0)
    out += fmt::format("launch latency {:.2f} us\n", fit.launch_latency_s * 1e6);
  return out;
}

}  // namespace pw::calibration
