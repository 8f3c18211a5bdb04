#include "planner/search_space.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"

namespace pw {
namespace {

struct NamedModel {
  const char* name;
  int layers, hidden, heads, seq, vocab;
};

// Shapes hwmodels does not ship (hwmodels/model_presets.h holds GPT-3, the Megatron weak-scaling
// and Korthikanti tables and the zero-bubble models): the controllable-memory paper's 98.5B
// model (78 layers, 80 heads, h = 10240, sequence 1024), and the planner's older name of
// Megatron's 1T row (hwmodels: megatron-1t).
constexpr NamedModel kModels[] = {
    {"megatron-1008b", 128, 25600, 160, 2048, 51200},
    {"cm-98.5b", 78, 10240, 80, 1024, 51200},
};

// A planner preset: the datasheet figures (BF16 peak, HBM capacity and bandwidth, NVLink and NIC
// bandwidth per GPU, NIC efficiency, PCIe, GPUs per node) from the shipped hwmodels profile,
// and the planner's own calibration of what its closed forms need, which the profile models
// differently (a flat large-GEMM efficiency, 228/312 measured, where hwmodels has a size curve;
// streaming efficiency; the measured 8-GPU all-reduce bus bandwidth; per-step and per-kernel
// latencies). False when the profile cannot be loaded.
bool from_profile(const char* profile, const char* name, double intra_allreduce_bw,
                  GpuNodeSpec* out) {
  try {
    GpuNodeSpec g = gpu_node_from_profile(hw::resolve_profile(profile, "", "", ""));
    g.name = name;
    g.gemm_efficiency = 0.73;
    g.hbm_efficiency = 0.8;
    g.intra_allreduce_bw = intra_allreduce_bw;
    g.intra_latency = 3e-6;
    g.inter_latency = 8e-6;
    g.kernel_latency = 4e-6;
    *out = g;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

GpuNodeSpec gpu_node_from_profile(const hw::HardwareProfile& profile) {
  GpuNodeSpec g;
  g.name = profile.name;
  g.peak_flops = profile.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)];
  g.gemm_efficiency = profile.gpu.gemm_max_efficiency;
  g.memory_bytes = profile.gpu.hbm_capacity.value;
  g.hbm_bw = profile.gpu.hbm_bandwidth.value;
  g.hbm_efficiency = profile.gpu.hbm_efficiency;
  g.intra_bw = profile.node.intra.bandwidth.value;
  g.intra_allreduce_bw = profile.node.intra.effective().value;
  g.inter_bw =
      profile.node.nic.bandwidth.value * profile.node.nics_per_node / profile.node.gpus_per_node;
  g.inter_efficiency = profile.node.nic.efficiency;
  g.pcie_bw = profile.node.pcie.bandwidth.value;
  g.intra_latency = ps_to_seconds(profile.node.intra.latency + profile.collective_step_latency);
  g.inter_latency = ps_to_seconds(profile.node.nic.latency + profile.collective_step_latency);
  g.kernel_latency = ps_to_seconds(profile.gpu.kernel_latency);
  g.gpus_per_node = profile.node.gpus_per_node;
  return g;
}

bool gpu_node_preset(const std::string& name, GpuNodeSpec* out) {
  if (name == "dgx-a100-80gb" || name == "a100")
    return from_profile("dgx-a100-80gb", "dgx-a100-80gb", 230e9, out);
  if (name == "dgx-h100" || name == "h100") return from_profile("dgx-h100", "dgx-h100", 370e9, out);
  if (name == "dgx-h200" || name == "h200") return from_profile("h200", "dgx-h200", 370e9, out);
  return false;
}

std::vector<std::string> gpu_node_preset_names() {
  return {"dgx-a100-80gb", "dgx-h100", "dgx-h200"};
}

bool model_preset(const std::string& name, ModelShape* out) {
  if (const hw::ModelPreset* p = hw::find_model_preset(name)) {
    *out = p->shape;
    return true;
  }
  for (const NamedModel& m : kModels) {
    if (name != m.name) continue;
    *out = ModelShape{m.name, m.layers, m.hidden, m.heads, 4 * m.hidden, m.seq, m.vocab};
    return true;
  }
  return false;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out = hw::model_preset_names();
  for (const NamedModel& m : kModels) out.emplace_back(m.name);
  return out;
}

double layer_params(const ModelShape& m) {
  const double h = m.hidden_size;
  const double f = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4.0 * h;
  return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
}

double total_params(const ModelShape& m) { return hw::parameter_count(m); }

std::vector<ScheduleOption> probe_schedules(const GeneratorRegistry& registry,
                                            const std::vector<int>& v_values,
                                            std::vector<std::string>* skipped) {
  std::vector<ScheduleOption> out;
  for (const GeneratorInfo& g : registry.all()) {
    GeneratorParams gp;
    gp.p = 4;
    gp.m = 8;
    gp.num_layers = 48;
    ScheduleOption o;
    o.name = g.name;
    Schedule s;
    try {
      s = generate_schedule(registry, g.name, gp);
    } catch (const std::exception&) {
      if (skipped) skipped->push_back(g.name);
      continue;
    }
    o.pipelines = std::max(1, s.placement.num_pipelines());
    o.v = std::max(1, s.placement.num_stages() / (gp.p * o.pipelines));
    o.v_shape = s.placement.kind == PlacementKind::kV;
    o.split_backward = s.split_backward();
    for (const auto& row : s.actions)
      for (const Action& a : row) {
        o.explicit_recompute |= a.kind == ActionKind::kR;
        o.overlap |= a.kind == ActionKind::kOverlapFB;
      }
    o.overlaps_dp =
        g.name.find("breadth") != std::string::npos || g.name.find("bfs") != std::string::npos;
    try {
      GeneratorParams gv = gp;
      gv.v = 3;
      Schedule s3 = generate_schedule(registry, g.name, gv);
      o.takes_v = s3.placement.num_stages() == 3 * gp.p * o.pipelines && o.v != 3;
    } catch (const std::exception&) {
      o.takes_v = false;
    }
    try {
      GeneratorParams gm = gp;
      gm.memory_limit = 2.0;
      o.memory_aware = !(generate_schedule(registry, g.name, gm) == s);
    } catch (const std::exception&) {
      o.memory_aware = true;  // refused a tight limit: it reads the limit
    }
    if (!o.takes_v) {
      out.push_back(o);
      continue;
    }
    for (int v : v_values) {
      if (v < 2) continue;
      o.v = v;
      out.push_back(o);
    }
  }
  return out;
}

std::vector<Tpd> factorisations(int n, const ModelShape& model, int max_t) {
  std::vector<Tpd> out;
  for (int t = 1; t <= std::min(n, max_t); ++t) {
    if (n % t || model.num_attention_heads % t) continue;
    for (int p = 1; p <= n / t; ++p) {
      if ((n / t) % p || p > model.num_layers) continue;
      out.push_back({t, p, n / t / p});
    }
  }
  return out;
}

std::uint64_t space_size(const SearchSpace& s, const ModelShape& model) {
  std::uint64_t per = s.micro_batches.size() * s.global_batches.size() * s.schedules.size() *
                      s.recompute.size() * s.sequence_parallel.size() * s.zero.size() *
                      s.offload.size() * s.end_trim.size();
  std::uint64_t tpd = 0;
  for (int n : s.gpu_counts) tpd += factorisations(n, model, s.max_tensor_parallel).size();
  return per * tpd;
}

}  // namespace pw
