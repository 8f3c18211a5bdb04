#include "calibration/profile_writer.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "calibration/base_profile.h"
#include "core/error.h"
#include "executor/probe.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/optimizer.h"

namespace pw::calibration {
namespace {

/// Numbers are written as 6 significant digits so the output is byte-stable.
YAML::Node num(double v) { return YAML::Node(fmt::format("{:.6g}", v)); }

YAML::Node flow(YAML::Node n) {
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

const SeriesFit* find_series(const std::vector<SeriesFit>& v, const std::string& op,
                             const std::string& library = "") {
  for (const auto& s : v)
    if (s.op == op && (library.empty() || s.library == library)) return &s;
  return nullptr;
}

std::string provenance_line(const FitResult& fit, const ProfileOptions& o) {
  const RawProvenance& p = fit.provenance;
  std::string where = p.host;  // and the core the benchmarks ran pinned to, where they were
  if (fit.pinned_core >= 0)
    where += fmt::format("{}core {}, the slowest of {} probed", where.empty() ? "" : ", ",
                         fit.pinned_core, fit.core_probes.size());
  return fmt::format("pipewright calibrate ({}{}) on {} ({}), {}; raw data: {}", p.backend,
                     p.quick ? ", quick" : "", p.device, where, p.date,
                     o.raw_source.empty() ? "not kept" : o.raw_source);
}

YAML::Node link_node(const std::string& type, double bw, double latency_s, double eff,
                     const std::string& source) {
  YAML::Node l;
  l["type"] = type;
  l["bandwidth_gb_per_s"] = num(bw * 1e-9);
  l["latency_us"] = num(latency_s * 1e6);
  l["efficiency"] = num(std::clamp(eff, 1e-3, 1.0));
  l["source"] = source;
  return l;
}

YAML::Node table_node(const std::vector<TableRow>& rows, const std::string& dtype) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& r : rows) {
    YAML::Node e;
    e["m"] = r.m;
    e["n"] = r.n;
    e["k"] = r.k;
    e["dtype"] = dtype;
    e["tflops"] = num(r.tflops);
    list.push_back(flow(e));
  }
  return list;
}

const GemmFit& primary_gemm(const FitResult& fit) {
  PW_ASSERT(!fit.gemms.empty(), "no GEMM fit");
  for (const auto& g : fit.gemms)
    if (g.dtype == "bf16") return g;
  return fit.gemms.front();
}

YAML::Node gemm_node(const GemmFit& g, bool cpu, const std::string& source) {
  YAML::Node n;
  n["max_efficiency"] = num(g.max_efficiency);
  n["k_half"] = num(g.k_half);
  if (cpu) {
    YAML::Node tiles(YAML::NodeType::Sequence);
    YAML::Node t;
    t["m"] = 1;
    t["n"] = 1;
    t["efficiency"] = 1;
    tiles.push_back(flow(t));
    n["tiles"] = tiles;
  }
  n["source"] = fmt::format(
      "{} fit ({} shapes): R2(log time) {:.4f}, worst residual {:.1f}% at "
      "{}; {}",
      g.dtype, g.quality.points, g.quality.r2_log, 100 * g.quality.worst_residual,
      g.quality.worst_at, source);
  return n;
}

std::vector<GemmSample> samples_of(const FitResult& fit, const std::string& dtype) {
  std::vector<GemmSample> out;
  for (const auto& g : fit.raw.gemms)
    if (g.dtype == dtype) out.push_back(g);
  return out;
}

std::string render(const YAML::Node& doc, const std::string& header) {
  YAML::Emitter em;
  em.SetIndent(2);
  em << doc;
  return header + em.c_str() + "\n";
}

std::string cpu_profile(const FitResult& fit, const ProfileOptions& o) {
  const RawProvenance& p = fit.provenance;
  std::string src = provenance_line(fit, o);
  const SeriesFit* p2p = find_series(fit.transfers, "mpi_p2p");
  if (p2p == nullptr)
    throw ConfigError(o.raw_source, "transfers",
                      "no mpi_p2p measurements: the CPU profile needs the MPI link");
  const GemmFit& g = primary_gemm(fit);
  int ranks_per_node = o.ranks_per_node > 0
                           ? o.ranks_per_node
                           : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  YAML::Node doc;
  doc["name"] = o.name;
  doc["description"] = fmt::format(
      "CPU backend of the pipewright executor on {}: one MPI rank = one device (Eigen fp64, one "
      "thread); measured by pipewright calibrate",
      p.device);
  doc["source"] = src;
  YAML::Node gpu;
  gpu["name"] = fmt::format("{} (executor CPU backend, fp64, 1 thread)", p.device);
  gpu["sm_count"] = 1;
  // The CPU backend computes in float64 whatever dtype the workload model names: the fit is
  // written as fp64, and compute_dtype tells hwmodels to answer every dtype with it.
  YAML::Node peaks;
  peaks[g.dtype] = num(g.peak_flops * 1e-12);
  gpu["peak_tflops"] = flow(peaks);
  gpu["compute_dtype"] = g.dtype;
  gpu["hbm_capacity_gb"] = num(p.memory_bytes / ranks_per_node * 1e-9);
  const double memory_ratio = fit.memory_in_model_bytes ? 1.0 : o.memory_bytes_ratio;
  gpu["hbm_bandwidth_gb_per_s"] = num(fit.memory_pooled.bandwidth() * memory_ratio * 1e-9);
  gpu["hbm_efficiency"] = 1;
  if (fit.has_elementwise)
    gpu["elementwise_gb_per_s"] =
        num(fit.elementwise.bandwidth() * o.elementwise_bytes_ratio * 1e-9);
  if (fit.has_elementwise_bwd)
    gpu["elementwise_bwd_gb_per_s"] =
        num(fit.elementwise_bwd.bandwidth() * o.elementwise_bytes_ratio * 1e-9);
  gpu["kernel_latency_us"] = num(g.kernel_latency_s * 1e6);
  gpu["gemm"] = gemm_node(g, true, src);
  if (g.quality.worst_residual > fit.table_threshold) {
    gpu["gemm_measured"] = table_node(measured_table(g, samples_of(fit, g.dtype)), g.dtype);
  }
  gpu["source"] = fmt::format(
      "peak = fitted asymptotic {} GEMM rate (compute_dtype: the CPU backend computes every "
      "dtype in float64); hbm bandwidth = {}{}; {}",
      g.dtype,
      fit.memory_in_model_bytes
          ? fmt::format("{} fit (the model's {} bytes per parameter over the executor's step time)",
                        fit.memory_source, hw::kAdamBytesPerParam)
          : fmt::format("{} fit x {} (model bytes of the optimizer step per executor byte)",
                        fit.memory_source, o.memory_bytes_ratio),
      fit.has_elementwise
          ? fmt::format("; elementwise{} = fit to the {} x {} (model bytes)",
                        fit.has_elementwise_bwd ? " (forward; elementwise_bwd: backward)" : "",
                        fit.elementwise_source, o.elementwise_bytes_ratio)
          : std::string(),
      src);
  doc["gpu"] = gpu;
  std::string link_src = fmt::format(
      "MPI ping-pong alpha {:.2f} us, bandwidth {:.2f} GB/s, R2(log) {:.4f}; {}",
      p2p->fit.alpha_s * 1e6, p2p->fit.bandwidth() * 1e-9, p2p->fit.quality.r2_log, p.mpi);
  // GPU-switch-GPU: two hops; bandwidth in model bytes (see ProfileOptions::link_bytes_ratio).
  double bw = p2p->fit.bandwidth() * o.link_bytes_ratio, lat = p2p->fit.alpha_s / 2;
  YAML::Node node;
  node["gpus_per_node"] = ranks_per_node;
  node["intra"] = link_node("nvswitch", bw, lat, 1.0, link_src);
  node["pcie"] = link_node("pcie", bw, lat, 1.0, link_src);
  node["nic"] = link_node("ethernet", bw, lat, 1.0, "no network measured: one host; " + link_src);
  node["nics_per_node"] = 1;
  doc["node"] = node;
  YAML::Node fabric;
  fabric["kind"] = "fat-tree";
  fabric["switch_link"] = link_node("ethernet", bw, lat, 1.0, "no network measured: one host");
  doc["fabric"] = fabric;
  YAML::Node coll;
  coll["step_latency_us"] = 0;
  coll["source"] = "no MPI all-reduce measured";
  if (const SeriesFit* ar = find_series(fit.collectives, "all_reduce", "mpi")) {
    // Ring all-reduce: 2(n-1) steps, each costing the path latency plus the step latency.
    double step = ar->fit.alpha_s / (2.0 * (ar->ranks - 1)) - p2p->fit.alpha_s;
    coll["step_latency_us"] = num(std::max(0.0, step) * 1e6);
    coll["source"] =
        fmt::format("MPI all-reduce x{} alpha {:.2f} us, busbw {:.2f} GB/s; {}", ar->ranks,
                    ar->fit.alpha_s * 1e6, ar->fit.bandwidth() * ar->bus_factor * 1e-9, src);
  }
  doc["collectives"] = coll;
  // The core the benchmarks ran on, as the executor's probe timed it: `compare` sets a run's
  // own probe against it (a machine that changed speed since, or a model that is wrong).
  for (const CoreProbe& c : fit.core_probes)
    if (c.core == fit.pinned_core) {
      YAML::Node probe;
      probe["forward_ms"] = std::round(c.time.median_s * 1e7) / 1e4;  // 0.1 us
      probe["core"] = c.core;
      probe["source"] = fmt::format(
          "executor layer forward h={}, {} tokens (exec::probe_forward_samples), median of {} "
          "calls in thread CPU time, on the slowest of {} cores probed; {}",
          exec::kProbeHidden, exec::kProbeTokens, c.time.iterations, fit.core_probes.size(), src);
      doc["calibration_probe"] = probe;
    }
  return render(doc,
                "# Hardware profile measured by `pipewright calibrate --backend cpu`.\n"
                "# Regenerate rather than edit: pipewright calibrate --from-raw RAW.json\n");
}

// gpu.attention from the fused attention fits of the GEMMs' dtype (else the first fitted dtype);
// a pass the trace lacks keeps the base profile's figure, and with none there it is an error.
void write_attention(const FitResult& fit, const std::string& gemm_dtype, const ProfileOptions& o,
                     const std::string& src, YAML::Node gpu) {
  std::string dtype = fit.attention.front().dtype;
  for (const auto& a : fit.attention)
    if (a.dtype == gemm_dtype) dtype = gemm_dtype;
  std::string measured;
  for (const char* pass : {"forward", "backward"}) {
    const std::string key = pass[0] == 'f' ? "fwd_efficiency" : "bwd_efficiency";
    const AttentionFit* f = nullptr;
    for (const auto& a : fit.attention)
      if (a.pass == pass && a.dtype == dtype) f = &a;
    if (f != nullptr) {
      gpu["attention"][key] = num(f->efficiency);
      measured += std::string(measured.empty() ? "" : " and ") + pass;
    } else if (!gpu["attention"] || !gpu["attention"][key]) {
      throw ConfigError(o.raw_source, "attention",
                        fmt::format("{} fused attention calls were traced but no {} ones, and "
                                    "the base profile has no gpu.attention.{}; trace a training "
                                    "step",
                                    pass[0] == 'f' ? "backward" : "forward", pass, key));
    }
  }
  gpu["attention"]["source"] = fmt::format("{} {} fused attention calls; {}", measured, dtype, src);
}

std::string cuda_profile(const FitResult& fit, const ProfileOptions& o) {
  if (o.base_text.empty())
    throw ConfigError("--base", "",
                      "the CUDA profile needs a base profile for the node and fabric");
  YAML::Node doc = load_base_profile(o.base_text, o.base_file, true);
  const RawProvenance& p = fit.provenance;
  std::string src = provenance_line(fit, o);
  const GemmFit& g = primary_gemm(fit);
  doc["name"] = o.name;
  doc["description"] = fmt::format("{} calibrated on {} (base: {})", p.device, p.host, o.base_file);
  doc["source"] = src;
  YAML::Node gpu = doc["gpu"];
  gpu["name"] = p.device;
  gpu["sm_count"] = p.compute_units;
  for (const auto& [dtype, flops] : p.peak_flops) gpu["peak_tflops"][dtype] = num(flops * 1e-12);
  gpu["hbm_capacity_gb"] = num(p.memory_bytes * 1e-9);
  double datasheet = p.memory_bandwidth > 0 ? p.memory_bandwidth
                                            : gpu["hbm_bandwidth_gb_per_s"].as<double>() * 1e9;
  gpu["hbm_bandwidth_gb_per_s"] = num(datasheet * 1e-9);
  gpu["hbm_efficiency"] = num(std::min(1.0, fit.memory_pooled.bandwidth() / datasheet));
  if (fit.has_elementwise)
    gpu["elementwise_gb_per_s"] =
        num(fit.elementwise.bandwidth() * o.elementwise_bytes_ratio * 1e-9);
  else
    gpu.remove("elementwise_gb_per_s");    // a base profile's figure describes another device
  gpu.remove("elementwise_bwd_gb_per_s");  // no GPU measurement fits one
  gpu["kernel_latency_us"] = num(g.kernel_latency_s * 1e6);
  YAML::Node gemm = gemm_node(g, false, src);
  if (gpu["gemm"]["tiles"]) gemm["tiles"] = gpu["gemm"]["tiles"];
  gpu["gemm"] = gemm;
  YAML::Node table(YAML::NodeType::Sequence);
  for (const auto& f : fit.gemms) {  // other dtypes share the primary's formula: always tabled
    if (&f != &g || f.quality.worst_residual > fit.table_threshold)
      for (const auto& e : table_node(measured_table(f, samples_of(fit, f.dtype)), f.dtype))
        table.push_back(e);
  }
  if (table.size() > 0) gpu["gemm_measured"] = table;
  if (!fit.attention.empty()) write_attention(fit, g.dtype, o, src, gpu);
  gpu["source"] = src;
  YAML::Node node = doc["node"];
  const SeriesFit* p2p = find_series(fit.collectives, "send_recv", "nccl");
  if (p2p != nullptr && node["intra"]["bandwidth_gb_per_s"]) {
    double peak = node["intra"]["bandwidth_gb_per_s"].as<double>() * 1e9;
    node["intra"]["efficiency"] = num(std::clamp(p2p->fit.bandwidth() / peak, 1e-3, 1.0));
    node["intra"]["latency_us"] = num(p2p->fit.alpha_s / 2 * 1e6);
    node["intra"]["source"] = "NCCL send/recv alpha-beta fit; " + src;
  }
  const SeriesFit* h2d = find_series(fit.transfers, "h2d_pinned");
  if (h2d != nullptr && node["pcie"]["bandwidth_gb_per_s"]) {
    double peak = node["pcie"]["bandwidth_gb_per_s"].as<double>() * 1e9;
    node["pcie"]["efficiency"] = num(std::clamp(h2d->fit.bandwidth() / peak, 1e-3, 1.0));
    node["pcie"]["source"] = "pinned host-to-device copy alpha-beta fit; " + src;
  }
  if (const SeriesFit* ar = find_series(fit.collectives, "all_reduce", "nccl");
      ar != nullptr && ar->ranks > 1) {
    double path = p2p != nullptr ? p2p->fit.alpha_s : 0.0;
    double step = ar->fit.alpha_s / (2.0 * (ar->ranks - 1)) - path;
    doc["collectives"]["step_latency_us"] = num(std::max(0.0, step) * 1e6);
    doc["collectives"]["source"] = "NCCL all-reduce alpha-beta fit; " + src;
  }
  return render(doc,
                "# Hardware profile calibrated by `pipewright calibrate --backend cuda`.\n"
                "# Regenerate rather than edit: pipewright calibrate --from-raw RAW.json\n");
}

}  // namespace

std::vector<TableRow> measured_table(const GemmFit& fit, const std::vector<GemmSample>& samples) {
  hw::GpuModel model(fit.spec);
  std::vector<TableRow> rows;
  std::set<std::tuple<long long, long long, long long>> seen;
  for (const auto& s : samples) {
    if (!seen.insert({s.m, s.n, s.k}).second) continue;  // the table has no batch: first wins
    double t = s.time.median_s;
    double compute = std::max(t - fit.kernel_latency_s, 0.05 * t);
    double f1 = model.fitted_gemm_efficiency(s.m, s.n, s.k, 1);
    double fb = model.fitted_gemm_efficiency(s.m, s.n, s.k, s.batch);
    rows.push_back({s.m, s.n, s.k, s.flops() * f1 / (fb * compute) * 1e-12});
  }
  return rows;
}

std::string profile_yaml(const FitResult& fit, const ProfileOptions& options) {
  if (fit.provenance.backend == "cpu") return cpu_profile(fit, options);
  return cuda_profile(fit, options);
}

}  // namespace pw::calibration
