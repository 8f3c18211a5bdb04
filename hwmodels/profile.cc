#include "hwmodels/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/config_map.h"

#ifndef PW_PROFILE_DIR
#define PW_PROFILE_DIR "hwmodels/profiles"
#endif
#ifndef PW_SCENARIO_DIR
#define PW_SCENARIO_DIR "scenarios"
#endif

namespace pw::hw {
namespace {

namespace fs = std::filesystem;

LinkSpec parse_link(const ConfigMap& m) {
  m.check_keys(
      {"type", "bandwidth_gb_per_s", "bandwidth_gbit_per_s", "latency_us", "efficiency", "source"});
  LinkSpec l;
  std::string type = m.text("type");
  if (!parse_link_type(type, &l.type)) {
    auto names = link_type_names();
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    m.fail("type", fmt::format("unknown link type '{}'; expected one of {} (did you mean '{}'?)",
                               type, all, nearest_name(type, names)));
  }
  bool gb = m.has("bandwidth_gb_per_s");
  bool gbit = m.has("bandwidth_gbit_per_s");
  if (gb == gbit) {
    m.fail("bandwidth_gb_per_s",
           gb ? "give bandwidth_gb_per_s or bandwidth_gbit_per_s, not both"
              : "missing; expected a number > 0 (GB/s per direction) or bandwidth_gbit_per_s");
  }
  l.bandwidth = gb ? gigabytes_per_sec(m.positive("bandwidth_gb_per_s"))
                   : gigabits_per_sec(m.positive("bandwidth_gbit_per_s"));
  l.latency = seconds_to_ps(m.positive("latency_us", true) * 1e-6);
  l.efficiency = m.positive("efficiency");
  if (l.efficiency > 1.0) m.fail("efficiency", "expected a number in (0, 1]");
  return l;
}

std::string dtype_list() {
  std::string all;
  for (int i = 0; i < kNumDTypes; ++i) {
    all += i == 0 ? "" : i + 1 == kNumDTypes ? " or " : ", ";
    all += dtype_name(static_cast<DType>(i));
  }
  return all;
}

void parse_gemm(const ConfigMap& m, GpuSpec* g) {
  m.check_keys({"max_efficiency", "fp8_max_efficiency", "k_half", "tiles", "source"});
  g->gemm_max_efficiency = m.positive("max_efficiency");
  if (g->gemm_max_efficiency > 1.0) m.fail("max_efficiency", "expected a number in (0, 1]");
  g->gemm_max_efficiency_fp8 = m.positive_or("fp8_max_efficiency", 0, true);
  if (g->gemm_max_efficiency_fp8 > 1.0) m.fail("fp8_max_efficiency", "expected a number in (0, 1]");
  g->gemm_k_half = m.positive("k_half", true);
  YAML::Node tiles = m.raw("tiles");
  if (!tiles.IsDefined() || tiles.IsNull()) return;
  if (!tiles.IsSequence()) m.fail("tiles", "expected a list of {m, n, efficiency}");
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    ConfigMap t(tiles[i], m.file(), m.key_path(fmt::format("tiles[{}]", i)));
    t.check_keys({"m", "n", "efficiency"});
    GemmTile tile{static_cast<int>(t.integer("m")), static_cast<int>(t.integer("n")),
                  t.positive("efficiency")};
    if (tile.efficiency > 1.0) t.fail("efficiency", "expected a number in (0, 1]");
    g->tiles.push_back(tile);
  }
}

void parse_measured(const ConfigMap& gpu, GpuSpec* g) {
  YAML::Node list = gpu.raw("gemm_measured");
  if (!list.IsDefined() || list.IsNull()) return;
  if (!list.IsSequence()) gpu.fail("gemm_measured", "expected a list of {m, n, k, dtype, tflops}");
  for (std::size_t i = 0; i < list.size(); ++i) {
    ConfigMap s(list[i], gpu.file(), gpu.key_path(fmt::format("gemm_measured[{}]", i)));
    s.check_keys({"m", "n", "k", "dtype", "tflops"});
    GemmSample sample{s.integer("m"), s.integer("n"), s.integer("k"), DType::kBf16,
                      s.positive("tflops")};
    std::string d = s.text("dtype");
    if (!parse_dtype(d, &sample.dtype)) {
      s.fail("dtype", "unknown dtype '" + d + "'; expected " + dtype_list());
    }
    g->measured.push_back(sample);
  }
}

/// `compute_dtype`: only that dtype's peak and measured GEMMs may be given; they are copied to
/// every other dtype (the device runs all of them as this one).
void apply_compute_dtype(const ConfigMap& gpu, DType cd, GpuSpec* g) {
  const int c = static_cast<int>(cd);
  ConfigMap peaks = gpu.child("peak_tflops");
  if (g->peak_flops[c] <= 0) {
    peaks.fail(dtype_name(cd), fmt::format("missing; compute_dtype is {}, so its peak in TFLOP/s "
                                           "(> 0) is required",
                                           dtype_name(cd)));
  }
  for (int i = 0; i < kNumDTypes; ++i) {
    if (i != c && g->peak_flops[i] > 0) {
      peaks.fail(dtype_name(static_cast<DType>(i)),
                 fmt::format("not allowed with compute_dtype {}: every dtype runs as {} on this "
                             "device; give only peak_tflops.{}",
                             dtype_name(cd), dtype_name(cd), dtype_name(cd)));
    }
  }
  std::vector<GemmSample> own;
  for (std::size_t k = 0; k < g->measured.size(); ++k) {
    if (g->measured[k].dtype != cd) {
      gpu.fail(fmt::format("gemm_measured[{}].dtype", k),
               fmt::format("expected {} (the compute_dtype)", dtype_name(cd)));
    }
    own.push_back(g->measured[k]);
  }
  for (int i = 0; i < kNumDTypes; ++i) {
    if (i == c) continue;
    g->peak_flops[i] = g->peak_flops[c];
    for (GemmSample s : own) {
      s.dtype = static_cast<DType>(i);
      g->measured.push_back(s);
    }
  }
}

GpuSpec parse_gpu(const ConfigMap& m, std::optional<DType>* compute_dtype) {
  m.check_keys({"name", "sm_count", "peak_tflops", "compute_dtype", "hbm_capacity_gb",
                "hbm_bandwidth_gb_per_s", "hbm_efficiency", "elementwise_gb_per_s",
                "elementwise_bwd_gb_per_s", "reserved_memory_gb", "kernel_latency_us", "gemm",
                "gemm_measured", "attention", "source"});
  GpuSpec g;
  g.name = m.text("name");
  g.sm_count = static_cast<int>(m.integer("sm_count"));
  ConfigMap peaks = m.child("peak_tflops");
  std::vector<std::string> names;
  for (int i = 0; i < kNumDTypes; ++i) names.push_back(dtype_name(static_cast<DType>(i)));
  peaks.check_keys(names);
  for (int i = 0; i < kNumDTypes; ++i) {
    g.peak_flops[i] = peaks.positive_or(names[i], 0.0, true) * 1e12;
  }
  compute_dtype->reset();
  if (m.has("compute_dtype")) {
    std::string d = m.text("compute_dtype");
    DType cd{};
    if (!parse_dtype(d, &cd)) {
      m.fail("compute_dtype", fmt::format("unknown dtype '{}'; expected {} (did you mean '{}'?)", d,
                                          dtype_list(), nearest_name(d, names)));
    }
    *compute_dtype = cd;
  } else if (g.peak_flops[static_cast<int>(DType::kBf16)] <= 0) {
    peaks.fail("bf16", "missing; expected the dense BF16 peak in TFLOP/s (> 0)");
  }
  g.hbm_capacity = gigabytes(m.positive("hbm_capacity_gb"));
  g.reserved_memory = gigabytes(m.positive_or("reserved_memory_gb", 0.0, true));
  if (g.reserved_memory.value >= g.hbm_capacity.value)
    m.fail("reserved_memory_gb", "expected less than hbm_capacity_gb");
  g.hbm_bandwidth = gigabytes_per_sec(m.positive("hbm_bandwidth_gb_per_s"));
  g.hbm_efficiency = m.positive("hbm_efficiency");
  if (g.hbm_efficiency > 1.0) m.fail("hbm_efficiency", "expected a number in (0, 1]");
  // Optional: absent keeps elementwise_bandwidth 0, i.e. hbm_bandwidth x hbm_efficiency.
  if (m.has("elementwise_gb_per_s"))
    g.elementwise_bandwidth = gigabytes_per_sec(m.positive("elementwise_gb_per_s"));
  // Optional: absent keeps the backward's element-wise kernels at the forward's figure.
  if (m.has("elementwise_bwd_gb_per_s"))
    g.elementwise_bwd_bandwidth = gigabytes_per_sec(m.positive("elementwise_bwd_gb_per_s"));
  g.kernel_latency = seconds_to_ps(m.positive_or("kernel_latency_us", 3.0, true) * 1e-6);
  parse_gemm(m.child("gemm"), &g);
  if (m.has("attention")) {
    const ConfigMap a = m.child("attention");
    a.check_keys({"fwd_efficiency", "bwd_efficiency", "source"});
    g.attention_fwd_efficiency = a.positive("fwd_efficiency");
    g.attention_bwd_efficiency = a.positive("bwd_efficiency");
    if (g.attention_fwd_efficiency > 1.0) a.fail("fwd_efficiency", "expected a number in (0, 1]");
    if (g.attention_bwd_efficiency > 1.0) a.fail("bwd_efficiency", "expected a number in (0, 1]");
  }
  parse_measured(m, &g);
  if (compute_dtype->has_value()) apply_compute_dtype(m, **compute_dtype, &g);
  return g;
}

NodeSpec parse_node(const ConfigMap& m) {
  m.check_keys({"gpus_per_node", "intra", "nvls", "nvls_efficiency", "pcie", "nic", "nics_per_node",
                "host_memory_bandwidth_gb_per_s", "host_memory_efficiency", "source"});
  NodeSpec n;
  n.gpus_per_node = static_cast<int>(m.integer("gpus_per_node"));
  n.intra = parse_link(m.child("intra"));
  if (n.intra.type != LinkType::kNvlink && n.intra.type != LinkType::kNvswitch &&
      n.intra.type != LinkType::kPcie) {
    m.fail("intra.type", "expected nvlink, nvswitch or pcie inside a node");
  }
  n.nvls = m.boolean_or("nvls", false);
  n.nvls_efficiency = n.nvls ? m.positive("nvls_efficiency") : 0.0;
  n.pcie = parse_link(m.child("pcie"));
  n.nic = parse_link(m.child("nic"));
  n.nics_per_node = static_cast<int>(m.integer("nics_per_node"));
  // Optional together: a profile without them cannot price optimizer offload.
  if (m.has("host_memory_bandwidth_gb_per_s") || m.has("host_memory_efficiency")) {
    n.host_memory_bandwidth = BytesPerSec{m.positive("host_memory_bandwidth_gb_per_s") * 1e9};
    n.host_memory_efficiency = m.positive("host_memory_efficiency");
    if (n.host_memory_efficiency > 1.0)
      m.fail("host_memory_efficiency", "expected a number in (0, 1]");
  }
  return n;
}

FabricSpec parse_fabric(const ConfigMap& m) {
  m.check_keys({"kind", "oversubscription", "leaf_ports", "switch_link", "source"});
  FabricSpec f;
  std::string kind = m.choice_or("kind", "rail-optimized", {"fat-tree", "rail-optimized"});
  f.kind = kind == "fat-tree" ? FabricKind::kFatTree : FabricKind::kRailOptimized;
  f.oversubscription = m.positive_or("oversubscription", 1.0);
  if (f.oversubscription < 1.0) m.fail("oversubscription", "expected a number >= 1");
  f.leaf_ports = static_cast<int>(m.integer_or("leaf_ports", 32, 1, kMaxLeafPorts));
  f.switch_link = parse_link(m.child("switch_link"));
  return f;
}

// `collectives.size_corrections`: a list of {collective, scope, points: [[bytes, factor], ...],
// source, ranks, nodes}, at most one per (collective, scope), sizes ascending, factors
// positive; source, ranks and nodes (the log's group) are provenance.
std::vector<CollectiveSizeCorrection> parse_size_corrections(const ConfigMap& coll) {
  const YAML::Node list = coll.raw("size_corrections");
  if (!list.IsSequence())
    coll.fail("size_corrections", "expected a list of {collective, scope, points, source}");
  std::vector<CollectiveSizeCorrection> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ConfigMap e(list[i], coll.file(), coll.key_path(fmt::format("size_corrections[{}]", i)));
    e.check_keys({"collective", "scope", "points", "source", "ranks", "nodes"});
    CollectiveSizeCorrection c;
    const std::string name = e.text("collective");
    if (name.find("_perf") != std::string::npos || !parse_nccl_tests_name(name, &c.kind))
      e.fail("collective", fmt::format("'{}' is not one of {}", name, nccl_tests_names()));
    const std::string scope = e.text("scope");
    if (scope != "single_node" && scope != "multi_node")
      e.fail("scope", fmt::format("'{}' is not single_node or multi_node", scope));
    c.multi_node = scope == "multi_node";
    c.source = e.text_or("source", "");
    c.ranks = static_cast<int>(e.integer_or("ranks", 0, 0));
    c.nodes = static_cast<int>(e.integer_or("nodes", 0, 0));
    const YAML::Node pts = e.raw("points");
    if (!pts.IsSequence() || pts.size() == 0)
      e.fail("points", "expected a non-empty list of [bytes, measured/modelled time] pairs");
    for (std::size_t k = 0; k < pts.size(); ++k) {
      const std::string key = fmt::format("points[{}]", k);
      double b = 0, f = 0;
      bool ok =
          pts[k].IsSequence() && pts[k].size() == 2 && pts[k][0].IsScalar() && pts[k][1].IsScalar();
      if (ok) {
        try {
          b = pts[k][0].as<double>();
          f = pts[k][1].as<double>();
        } catch (const YAML::Exception&) {
          ok = false;
        }
      }
      // Sizes past 2^44 B (16 TiB) and factors outside [1e-3, 1e3] are no measurement.
      if (!ok || !std::isfinite(b) || !std::isfinite(f) || b <= 0 || b > 17592186044416.0 ||
          f < 1e-3 || f > 1e3)
        e.fail(key,
               "expected [bytes, factor]: a size in (0, 2^44] B and a factor in [0.001, 1000]");
      if (!c.table.bytes.empty() && b <= c.table.bytes.back())
        e.fail(key, fmt::format("size {} is not above the previous {}", b, c.table.bytes.back()));
      c.table.bytes.push_back(b);
      c.table.factor.push_back(f);
    }
    for (const CollectiveSizeCorrection& o : out)
      if (o.kind == c.kind && o.multi_node == c.multi_node)
        coll.fail(fmt::format("size_corrections[{}]", i),
                  fmt::format("a second entry for {} {}; expected one per collective and scope",
                              name, scope));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

HardwareProfile parse_profile(const std::string& text, const std::string& file) {
  ConfigMap root(parse_yaml(text, file), file, "");
  root.check_keys({"name", "description", "gpu", "node", "fabric", "collectives",
                   "calibration_probe", "source"});
  HardwareProfile p;
  p.name = root.text("name");
  p.description = root.text_or("description", "");
  p.file = file;
  p.gpu = parse_gpu(root.child("gpu"), &p.compute_dtype);
  p.node = parse_node(root.child("node"));
  p.fabric = parse_fabric(root.child("fabric"));
  if (root.has("calibration_probe")) {
    ConfigMap probe = root.child("calibration_probe");
    probe.check_keys({"forward_ms", "core", "source"});
    p.calibration_probe_ms = probe.positive("forward_ms");
    if (probe.has("core")) probe.integer("core", 0);
  }
  // Optional section. Only looked up when present: ConfigMap::child(key, optional) on a missing
  // key throws yaml-cpp's InvalidNode (it assigns to the zombie node operator[] returned).
  if (root.has("collectives")) {
    ConfigMap coll = root.child("collectives");
    coll.check_keys({"step_latency_us", "protocols", "size_corrections", "source"});
    p.collective_step_latency =
        seconds_to_ps(coll.positive_or("step_latency_us", 2.0, true) * 1e-6);
    if (coll.has("protocols")) {
      YAML::Node list = coll.raw("protocols");
      if (!list.IsSequence() || list.size() == 0 || list.size() > kMaxCollectiveProtocols)
        coll.fail("protocols", fmt::format("expected a list of 1 to {} {{name, step_latency_us, "
                                           "bandwidth_efficiency}}",
                                           kMaxCollectiveProtocols));
      for (std::size_t i = 0; i < list.size(); ++i) {
        ConfigMap e(list[i], coll.file(), coll.key_path(fmt::format("protocols[{}]", i)));
        e.check_keys({"name", "step_latency_us", "bandwidth_efficiency"});
        CollectiveProtocol pr;
        pr.name = e.text("name");
        pr.step_latency = seconds_to_ps(e.positive("step_latency_us", true) * 1e-6);
        pr.bandwidth_efficiency = e.positive("bandwidth_efficiency");
        if (pr.bandwidth_efficiency > 1)
          e.fail("bandwidth_efficiency",
                 fmt::format("{} is out of range; expected a share in (0, 1]",
                             pr.bandwidth_efficiency));
        p.collective_protocols.push_back(pr);
      }
    }
    if (coll.has("size_corrections")) p.collective_size_corrections = parse_size_corrections(coll);
  }
  return p;
}

HardwareProfile load_profile(const std::string& path) {
  return parse_profile(read_file(path), path);
}

namespace {

// Shipped data: the environment's directory, else the source tree's while it exists, else the
// copy installed beside the running binary (PREFIX/bin/pipewright -> PREFIX/share/pipewright/...,
// so a moved install still finds its data), else the configured install location.
std::string shipped_dir(const char* env_name, const char* source, const char* installed) {
  if (const char* env = std::getenv(env_name)) return env;
  std::error_code ec;
  if (fs::is_directory(source, ec)) return source;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside =
        exe.parent_path().parent_path() / "share" / "pipewright" / fs::path(installed).filename();
    if (fs::is_directory(beside, ec)) return beside.string();
  }
  return installed;
}

}  // namespace

std::string shipped_profile_dir() {
  return shipped_dir("PIPEWRIGHT_PROFILE_DIR", PW_PROFILE_DIR, PW_INSTALLED_PROFILE_DIR);
}

std::string shipped_scenario_dir() {
  return shipped_dir("PIPEWRIGHT_SCENARIO_DIR", PW_SCENARIO_DIR, PW_INSTALLED_SCENARIO_DIR);
}

std::vector<std::string> shipped_profile_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(shipped_profile_dir(), ec)) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

HardwareProfile resolve_profile(const std::string& name_or_path, const std::string& base_dir,
                                const std::string& err_file, const std::string& err_key) {
  bool is_path =
      name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".yaml";
  if (is_path) {
    fs::path p(name_or_path);
    if (p.is_relative() && !base_dir.empty()) p = fs::path(base_dir) / p;
    // exists() without an error_code throws on a name too long or a folder it may not search;
    // those reach read_file, which names the reason.
    std::error_code ec;
    if (!fs::exists(p, ec) && !ec) {
      throw ConfigError(err_file, err_key, fmt::format("profile file '{}' not found", p.string()));
    }
    return load_profile(p.string());
  }
  auto names = shipped_profile_names();
  if (std::find(names.begin(), names.end(), name_or_path) == names.end()) {
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    throw ConfigError(err_file, err_key,
                      fmt::format("unknown profile '{}'; expected one of {} or a path to a YAML "
                                  "file (did you mean '{}'?)",
                                  name_or_path, all, nearest_name(name_or_path, names)));
  }
  return load_profile((fs::path(shipped_profile_dir()) / (name_or_path + ".yaml")).string());
}

}  // namespace pw::hw
