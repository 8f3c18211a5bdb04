#include "planner/search/screen.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pw {
namespace {

// Bounds are lowered by this share: the DES rounds each collective step to picoseconds, the
// screen's lines do not.
constexpr double kBoundMargin = 1e-7;

// Activation units rounded down to the generators' grid: fine where memory is scarce, coarse
// where it barely binds (each distinct limit is a schedule to generate).
double units_on_grid(double units) {
  const double step = units < 4 ? 0.5 : units < 8 ? 1 : units < 16 ? 2 : 4;
  return std::max(0.0, std::floor(units / step) * step);
}

}  // namespace

const char* objective_name(Objective o) {
  switch (o) {
    case Objective::kTime:
      return "time";
    case Objective::kCost:
      return "cost";
    case Objective::kTimeToLoss:
      return "time-to-loss";
  }
  return "time";
}

double CostModel::layer_activation(const SearchConfig& c) const {
  LayerEntry scratch;
  const LayerEntry& le = layer_entry(c, &scratch);
  const ModelShape& m = problem_.model;
  const int moe = hw::moe_layers_in(m, 0, m.num_layers);
  return ((m.num_layers - moe) * le.layer.m_b.value + moe * le.moe.m_b.value) / m.num_layers;
}

double CostModel::activation_unit(const SearchConfig& c) const {
  return layer_activation(c) * problem_.model.num_layers / c.p;
}

void CostModel::generator_caps(const SearchConfig& c, const StageCosts& sc,
                               std::vector<double>* out) const {
  const ScheduleOption& so = space_.schedules[c.schedule];
  const int S = sc.num_stages, P = c.p, L = problem_.model.num_layers;
  std::vector<double>& caps = *out;
  caps.clear();
  if (!so.per_device_limits || so.pipelines != 1 || S <= 0 || L <= 0 || P > 256 ||
      static_cast<int>(sc.device.size()) != S || sc.device[0] < 0)
    return;
  std::array<double, 256> per_unit{}, share{}, step{};  // per device (no allocation: the screen)
  for (int s = 0; s < S; ++s) {
    const int layers = even_split_begin(s + 1, S, L) - even_split_begin(s, S, L);
    const double w = static_cast<double>(layers) * P / L;
    const int d = sc.device[s];
    if (w <= 0 || d < 0 || d >= P) continue;
    share[d] += w;
    per_unit[d] = std::max(per_unit[d], sc.act[s] / w);
    step[d] = step[d] > 0 ? std::min(step[d], w) : w;
  }
  const double defined = defined_budget(so, P);
  caps.assign(P, 0.0);
  bool binds = false;
  for (int d = 0; d < P; ++d) {
    const double own = defined * share[d];
    const double room = per_unit[d] > 0 ? (problem_.limit() - sc.static_mem[d]) / per_unit[d] : own;
    if (room >= own) {
      caps[d] = own;
    } else {
      binds = true;
      // Whole microbatches of the device's smallest stage: what the generator can hold.
      caps[d] = step[d] > 0 ? std::max(0.0, std::floor(room / step[d] + 1e-9) * step[d]) : 0.0;
    }
  }
  if (!binds) caps.clear();
}

double CostModel::generator_units(const SearchConfig& c, const StageCosts& sc) const {
  double max_static = 0;
  for (double x : sc.static_mem) max_static = std::max(max_static, x);
  return (problem_.limit() - max_static) / activation_unit(c);
}

double CostModel::model_flops(int global_batch) const {
  hw::WorkloadOptions wo;
  wo.flash_attention = problem_.sim.flash_attention;
  return hw::iteration_flops(problem_.model, wo, global_batch).model;
}

double CostModel::hardware_flops(const SearchConfig& c) const {
  hw::WorkloadOptions wo;
  wo.flash_attention = problem_.sim.flash_attention;
  wo.recompute = static_cast<hw::Recompute>(c.recompute);
  return hw::iteration_flops(problem_.model, wo, c.global_batch()).hardware;
}

double CostModel::peak_flops() const {
  return problem_.profile.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)];
}

bool CostModel::layer_split(const SearchConfig& c, std::vector<int>* layers) const {
  const ScheduleOption& so = space_.schedules[c.schedule];
  if (c.end_trim == kOwnSplit) {
    const std::vector<int>& own = problem_.own_split;
    // Any stage may hold no transformer layer: a layout's "E|" or "|mL" ends, or an empty
    // middle stage that passes its activations on.
    const int n = static_cast<int>(own.size());
    bool ok =
        n == c.p * so.v && std::accumulate(own.begin(), own.end(), 0) == problem_.model.num_layers;
    for (int st = 0; ok && st < n; ++st) ok = own[st] >= 0;
    if (!ok) return false;
    *layers = own;
    return true;
  }
  if (is_mtp_standalone_code(c.end_trim) &&
      (problem_.model.mtp_num_layers == 0 || so.pipelines != 1))
    return false;
  const std::size_t S = static_cast<std::size_t>(c.p) * so.v;
  if (S < trim_duplicate_.size() && trim_duplicate_[S][c.end_trim]) return false;
  return split_for_trim_code(problem_.model.num_layers, c.p * so.v, c.end_trim, layers);
}

bool CostModel::stage_costs(const SearchConfig& c, StageCosts* out, bool filled) const {
  const ScheduleOption& so = space_.schedules[c.schedule];
  if (c.sequence_parallel && c.t == 1) return false;
  // Megatron runs MoE layers with TP only under sequence parallelism (as the scenario reader).
  if (problem_.model.num_experts > 0 && c.t > 1 && !c.sequence_parallel) return false;
  if (c.zero > 0 && c.d * c.cp == 1) return false;
  if (c.p == 1 && (so.v != 1 || so.v_shape || so.pipelines != 1 || c.schedule != 0)) return false;
  if (c.p > 1 && so.takes_v && c.p * so.v > problem_.model.num_layers) return false;
  if (so.explicit_recompute && static_cast<Recompute>(c.recompute) != Recompute::kFull)
    return false;
  if (so.pipelines > 1) {
    // A multi-pipeline placement runs as its generator lays the layers out (the plan keeps
    // it: apply_layer_split leaves it), so its stages are that split and no uneven one.
    if (c.end_trim > 0) return false;
    const auto& by_p = pipe_layers_[c.schedule];
    if (static_cast<std::size_t>(c.p) >= by_p.size() || by_p[c.p].empty()) {
      if (!layer_split(c, &out->layers)) return false;
    } else {
      out->layers = by_p[c.p];
      for (int l : out->layers)
        if (l < 1) return false;
    }
  } else if (!layer_split(c, &out->layers)) {
    return false;
  }
  if (space_.framework != Framework::kAny) {
    const ParallelConfig pc = parallel_from_config(space_, c);
    FrameworkQuery q;
    q.model = &problem_.model;
    q.config = &pc;
    q.stage_layers = &out->layers;
    q.pipelines = so.pipelines;
    q.v_shape = so.v_shape;
    if (!framework_problem(space_.framework, q).empty()) return false;
  }
  const int S = static_cast<int>(out->layers.size());
  out->num_stages = S;
  out->num_devices = c.p;
  out->device.resize(S);
  for (int s = 0; s < S; ++s) {
    if (so.pipelines > 1) {
      out->device[s] = -1;
    } else if (so.v_shape) {
      out->device[s] = s < c.p ? s : 2 * c.p - 1 - s;
    } else {
      out->device[s] = s % c.p;
    }
  }
  if (!filled) fill(c, out);
  return true;
}

void CostModel::costs_for_layers(const SearchConfig& c, const std::vector<int>& layers,
                                 StageCosts* out) const {
  out->layers = layers;
  out->num_stages = static_cast<int>(layers.size());
  out->num_devices = c.p;
  if (static_cast<int>(out->device.size()) != out->num_stages)
    out->device.assign(out->num_stages, -1);
  fill(c, out);
}

double defined_budget(const ScheduleOption& so, int p) {
  return so.own_budget ? so.own_budget(p) : 2.0 * p;
}

double generator_memory_limit(const ScheduleOption& so, double units, int p) {
  if (units >= defined_budget(so, p)) return 0;
  return units_on_grid(units);
}

namespace {

// Peak activations of device 0 that every schedule of this shape reaches, in microbatches of
// the device's own stages (closed forms of shared/reference/schedules.md, taken on the low side).
double device0_units(const ScheduleOption& so, int p, int m) {
  if (so.memory_aware || so.pipelines > 1 || so.explicit_recompute) return 1;
  double u = 1;
  if (so.holds_all_microbatches) {
    u = m;
  } else if (so.v_shape) {
    u = std::max(1, (p + 4) / 3 - 1);
  } else {
    u = p;
  }
  return std::min<double>(u, m);
}

}  // namespace

ScreenResult CostModel::screen(const SearchConfig& c, StageCosts* sc, bool filled) const {
  ScreenResult r;
  // overlap_param_gather without data parallelism gathers nothing: the row without it stands
  // for both when the space has it.
  if (c.param_gather && c.d * c.cp == 1 &&
      std::find(space_.param_gather.begin(), space_.param_gather.end(), 0) !=
          space_.param_gather.end())
    return r;
  if (!stage_costs(c, sc, filled)) return r;
  r.valid = r.costed = true;
  const ScheduleOption& so = space_.schedules[c.schedule];
  const int S = sc->num_stages, P = c.p, m = c.microbatches;
  double bound = 0;
  double mem = 0;
  for (double x : sc->state_mem) mem = std::max(mem, x);
  if (sc->device[0] < 0) {
    // Some device does at least the average work and ends with its tail.
    double work = 0;
    for (int i = 0; i < S; ++i) work += sc->f[i] + sc->b[i] + sc->w[i];
    bound = m * work / P + *std::min_element(sc->tail.begin(), sc->tail.end());
    for (double v : sc->net_volume) bound = std::max(bound, v);
  } else {
    // Per device: head (earliest start: microbatch 0's forward must reach it), busy time, and
    // the tail (after its last backward the upstream backward chain must still run).
    double head[256], tail[256], busy[256], fb[256], act1[256], act_all[256];
    const int D = std::min(P, 256);
    for (int d = 0; d < D; ++d) {
      head[d] = tail[d] = 1e300;
      busy[d] = fb[d] = act1[d] = act_all[d] = 0;
    }
    double pre_f = 0, pre_b = 0, act_min0 = 1e300;
    for (int i = 0; i < S; ++i) {
      const int d = sc->device[i];
      if (i > 0 && sc->device[i - 1] != d) {
        pre_f += sc->hop;
        pre_b += sc->hop;
      }
      // With explicit R actions the recomputation may run before the gradient arrives.
      const double b_crit = so.explicit_recompute ? sc->b[i] - sc->r[i] : sc->b[i];
      const double chain_b = so.split_backward ? b_crit : b_crit + sc->w[i];
      if (d < D) {
        head[d] = std::min(head[d], pre_f);
        tail[d] = std::min(tail[d], pre_b);
        busy[d] += m * (sc->f[i] + sc->b[i] + sc->w[i]);
        fb[d] += m * (sc->f[i] + chain_b);
        act1[d] = std::max(act1[d], sc->act[i]);
        act_all[d] += sc->act[i];
        if (d == 0) act_min0 = std::min(act_min0, sc->act[i]);
      }
      pre_f += sc->f[i];
      pre_b += chain_b;
    }
    // A device starts once microbatch 0 reaches it; after its last pass come its gradient
    // reduction, optimizer step and re-gathers.
    double gather_chain = 0;  // not aligned: the later devices' chunk gathers along the fill
    for (int d = 0; d < D; ++d) {
      // (The DES times the iteration from its first pass, after device 0's first ZeRO-3
      // gather, so gathers add nothing certain here.) overlap_param_gather: the first forward
      // waits for stage 0's first bucket; not aligned, each later device's for its own chunk
      // after its input arrives; aligned, for its first chunk's gather started with the step
      // (one bucket after stage 0; stage 0's first forward only ends after its whole chunk).
      double start = head[d];
      if (!sc->param_chunk.empty()) {
        if (sc->param_aligned) {
          const double chunk = std::max(0.0, sc->param_chunk[d]);
          start = std::max(start + sc->param_first_bucket,
                           d == sc->device[0] ? chunk - sc->f[0] : chunk);
        } else {
          if (d > 0) gather_chain += std::max(0.0, sc->param_chunk[d]);
          start += sc->param_first_bucket + gather_chain;
        }
      }
      // Its own passes, then its tail; or its forwards and critical backwards, then the
      // backward chain down to stage 0, whose device then runs its tail.
      const int d0 = sc->device[0];
      bound = std::max(bound, start + busy[d] + sc->tail[d]);
      // ZeRO-2/3: the reduction stream carries m - 1 per-microbatch reduce-scatters before the
      // tail's, none before the device's first backward.
      bound = std::max(bound, start + (m - 1) * sc->reduce_mb[d] + sc->tail[d]);
      bound = std::max(bound, start + fb[d] + tail[d] + sc->tail[d0]);
      bound = std::max(bound, sc->net_volume[d]);
      mem = std::max(mem, sc->state_mem[d] + act1[d]);
    }
    // A memory-reading generator's limit caps the microbatches in flight on stage 0's device:
    // microbatch j holds its stage-0 activation from the start of F(0, j) to the end of B(0, j),
    // at least the whole round trip through every stage (pre_f + pre_b), and the generated
    // order (the limit holds in its own memory units, where stage 0's forward allocates its
    // share of the layers) never holds more than k of them at once. So the m intervals, each
    // at least the round trip long and at most k at a time, span at least m * round trip / k
    // (Little's law; the DES runs the same order, no faster).
    if (so.memory_aware && so.pipelines == 1 && S > 0 && problem_.model.num_layers > 0) {
      // Generators that take a limit per device hold stage 0's device to its own.
      double limit = 0;
      if (so.per_device_limits) {
        thread_local std::vector<double> caps;
        generator_caps(c, *sc, &caps);
        limit = caps.empty() ? 0 : caps[0];
      } else {
        limit = generator_memory_limit(so, generator_units(c, *sc), P);
      }
      const int L = problem_.model.num_layers;
      // Stage 0's share in the generator's even split (Placement::activation_weight).
      const double w0 = static_cast<double>(even_split_begin(1, S, L)) * P / L;
      if (limit > 0 && w0 > 0) {
        const double k = std::floor(limit / w0 + 1e-9);
        if (k >= 1) bound = std::max(bound, m * (pre_f + pre_b) / k);
      }
    }
    // Device 0's peak in units of its own per-microbatch activations; V-shape units are two
    // chunks of unequal size (the last holds the logits), so count the smaller chunk twice.
    const double per_mb = so.v_shape ? 2 * act_min0 : act_all[0];
    mem = std::max(mem, sc->state_mem[0] + device0_units(so, P, m) * per_mb);
  }
  // The building-block searches (adaptive offsets; V-Half and V-Min) take seconds per schedule
  // beyond 16 devices: keep them to p <= 16.
  if (so.max_devices > 0 && P > so.max_devices) {
    r.valid = false;
    return r;
  }
  // Less a hair for the picosecond rounding of the DES's per-step collective times.
  r.time_lb = bound * (1 - kBoundMargin);
  r.mem_lb = mem;
  return r;
}

}  // namespace pw
