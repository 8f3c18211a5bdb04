#include "calibration/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "calibration/kineto_trace.h"
#include "calibration/profile_writer.h"
#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/profile.h"

namespace pw::calibration {
namespace {

RawResults measure(const CalibrateOptions& o) {
  if (o.backend == "cuda") {
    if (!o.measure_cuda)
      throw ConfigError("--backend", "",
                        "cuda: this pipewright was built without CUDA (nvcc, cuBLAS and NCCL are "
                        "needed at build time); use --backend cpu");
    return o.measure_cuda(o.quick, o.progress, o.command);
  }
  CpuBenchOptions cpu = o.cpu;
  cpu.quick = o.quick;
  cpu.progress = o.progress;
  RawResults raw = run_cpu_benchmarks(cpu, o.command);
  if (!o.skip_mpi) {
    if (o.progress) o.progress("mpi: launching a 2-rank job for ping-pong and collectives");
    MpiLaunch launch = o.mpi;
    launch.quick = o.quick;
    measure_mpi(launch, raw);
  }
  return raw;
}

/// Picks the shipped profile whose GPU has the same designator as the measured device.
std::string default_base(const std::string& device) {
  std::string want = gpu_designator(device);
  if (!want.empty()) {
    for (const auto& name : hw::shipped_profile_names()) {
      try {
        auto p = hw::resolve_profile(name, "", "", "");
        if (gpu_designator(p.gpu.name) == want) return name;
      } catch (const ConfigError&) {
      }
    }
  }
  throw ConfigError("--base", "",
                    fmt::format("no shipped profile describes a {} GPU; give --base PROFILE (a "
                                "shipped name or a YAML file) for the node and fabric",
                                device));
}

std::string default_name(const RawProvenance& p) {
  std::string d = gpu_designator(p.device);
  std::transform(d.begin(), d.end(), d.begin(), [](unsigned char c) { return std::tolower(c); });
  return p.backend == "cpu" ? "calibrated-cpu" : "calibrated-" + (d.empty() ? "gpu" : d);
}

/// The unit a CPU measurement is fitted on: one compute unit, one 1x1 tile.
hw::GpuSpec cpu_unit() {
  hw::GpuSpec g;
  g.sm_count = 1;
  g.tiles = {{1, 1, 1.0}};
  return g;
}

double peak_for(const RawProvenance& p, const std::string& dtype) {
  auto it = p.peak_flops.find(dtype);
  return it == p.peak_flops.end() ? 0.0 : it->second;
}

}  // namespace

std::string gpu_designator(const std::string& device) {
  static const std::regex re("\\b([A-Z]{1,2}[0-9]{2,4})[A-Z]?\\b");
  std::smatch m;
  return std::regex_search(device, m, re) ? m[1].str() : "";
}

CalibrateOutcome calibrate(const CalibrateOptions& o) {
  if (o.skip_mpi) {  // the CPU alone: kept as raw data, since a profile needs the MPI link
    if (o.backend != "cpu" || !o.from_raw.empty() || !o.from_trace.empty())
      throw ConfigError("--skip-mpi", "", "applies to a measurement with the cpu backend");
    if (!o.out.empty() || o.raw_out.empty())
      throw ConfigError("--skip-mpi", "",
                        "a CPU profile needs the MPI link, so --skip-mpi writes only the raw "
                        "measurements: expected --raw FILE and no --out");
    CalibrateOutcome out;
    const RawResults raw = measure(o);
    out.fit = fit_all(
        raw, cpu_unit(), [&](const std::string& d) { return peak_for(raw.provenance, d); },
        o.raw_out);
    out.report = fit_report(out.fit);
    write_file_atomic(o.raw_out, raw_to_json(raw));
    return out;
  }
  if (o.out.empty()) throw ConfigError("--out", "", "missing: the profile YAML to write");
  if (o.backend != "cpu" && o.backend != "cuda" && !(o.backend.empty() && !o.from_raw.empty()))
    throw ConfigError("--backend", "", "expected cpu or cuda, got '" + o.backend + "'");
  std::string source =
      o.from_raw.empty() ? (o.raw_out.empty() ? "measured" : o.raw_out) : o.from_raw;
  RawResults raw;
  std::string trace_line;
  if (!o.from_trace.empty()) {
    if (o.base.empty())
      throw ConfigError("--base", "",
                        "--from-trace needs the profile of the traced machine (node, fabric, "
                        "peaks), e.g. --base dgx-h100");
    source = o.from_trace;
    KinetoSummary sum;
    raw = raw_from_kineto(read_file(o.from_trace), o.from_trace,
                          hw::resolve_profile(o.base, "", "--base", ""), &sum);
    trace_line = fmt::format(
        "trace {}: {} kernels: {} GEMM, {} element-wise, {} NCCL, {} fused attention; {} of "
        "other ops skipped\n",
        o.from_trace, sum.kernels, sum.gemm, sum.elementwise, sum.nccl, sum.attention, sum.skipped);
    if (!o.raw_out.empty()) write_file_atomic(o.raw_out, raw_to_json(raw));
  } else if (o.from_raw.empty()) {
    raw = measure(o);
    if (!o.raw_out.empty()) write_file_atomic(o.raw_out, raw_to_json(raw));
  } else {
    raw = raw_from_json(read_file(o.from_raw), o.from_raw);
    if (!o.backend.empty() && raw.provenance.backend != o.backend)
      throw ConfigError(o.from_raw, "provenance.backend",
                        fmt::format("the raw file was measured with the {} backend, but --backend "
                                    "{} was asked",
                                    raw.provenance.backend, o.backend));
    if (raw.provenance.backend == "cpu" && !o.base.empty())
      throw ConfigError(o.from_raw, "--base",
                        "applies to a cuda measurement (the node and fabric a calibrated GPU "
                        "joins); this raw file was measured with the cpu backend");
    if (raw.provenance.backend == "cuda" && o.ranks_per_node > 0)
      throw ConfigError(o.from_raw, "--ranks",
                        "applies to a cpu measurement (executor ranks per host); this raw file "
                        "was measured with the cuda backend");
  }
  if (o.ranks_per_node < 0)
    throw ConfigError("--ranks", "", "expected a positive number of executor ranks per host");
  ProfileOptions po;
  po.name = o.name.empty() ? default_name(raw.provenance) : o.name;
  po.ranks_per_node = o.ranks_per_node;
  po.raw_source = source;
  hw::GpuSpec base_gpu = cpu_unit();
  if (raw.provenance.backend == "cuda") {
    std::string base = o.base.empty() ? default_base(raw.provenance.device) : o.base;
    hw::HardwareProfile bp = hw::resolve_profile(base, "", "--base", "");
    std::string want = gpu_designator(raw.provenance.device), have = gpu_designator(bp.gpu.name);
    if (!want.empty() && !have.empty() && want != have)
      throw ConfigError(source, "provenance.device",
                        fmt::format("measured on '{}' but the base profile {} describes '{}'",
                                    raw.provenance.device, bp.file, bp.gpu.name));
    po.base_text = read_file(bp.file);
    po.base_file = bp.file;
    base_gpu = bp.gpu;
    base_gpu.sm_count = raw.provenance.compute_units;
  } else {
    po.memory_bytes_ratio = kCpuMemoryBytesRatio;
    po.elementwise_bytes_ratio = kCpuElementwiseBytesRatio;
    po.link_bytes_ratio = kCpuLinkBytesRatio;
  }
  CalibrateOutcome out;
  out.fit = fit_all(
      raw, base_gpu, [&](const std::string& d) { return peak_for(raw.provenance, d); }, source);
  out.report = trace_line + fit_report(out.fit);
  out.profile_text = profile_yaml(out.fit, po);
  try {  // the profile must load exactly as a shipped one does
    hw::parse_profile(out.profile_text, o.out);
  } catch (const ConfigError& e) {
    throw InternalError(std::string("calibration produced a profile hwmodels rejects: ") +
                        e.what());
  }
  write_file_atomic(o.out, out.profile_text);
  return out;
}

}  // namespace pw::calibration
