#include "planner/screen.h"

#include <algorithm>
#include <cmath>

namespace pw {
namespace {

double log2_ceil(int n) { return n > 1 ? std::ceil(std::log2(static_cast<double>(n))) : 0.0; }

// Per-layer figures of one configuration (seconds per microbatch, bytes).
struct LayerCosts {
  double f = 0, b = 0, w = 0;
  double act = 0, act_w = 0, act_full = 0;
  double tp = 0;  // collective time inside f + b
  double r = 0;   // recomputation inside b
};

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

bool split_layers(int layers, int stages, int trim, std::vector<int>* out) {
  out->assign(stages, 0);
  if (stages <= 0 || layers < stages) return false;
  if (stages < 3 && trim > 0) return false;
  const int q = layers / stages;
  const int ends = trim > 0 ? q - trim : 0;
  if (trim > 0 && ends < 1) return false;
  const int first_mid = trim > 0 ? 1 : 0;
  const int mids = stages - 2 * first_mid;
  const int rest = layers - 2 * ends;
  const int mq = rest / mids, mr = rest % mids;
  if (mq < 1) return false;
  for (int i = 0; i < mids; ++i) (*out)[first_mid + i] = mq + (i < mr ? 1 : 0);
  if (trim > 0) (*out)[0] = (*out)[stages - 1] = ends;
  return true;
}

CostModel::CostModel(const PlanProblem& problem, const SearchSpace& space)
    : problem_(problem), space_(space) {}

double CostModel::layer_activation(const SearchConfig& c) const {
  const ModelShape& m = problem_.model;
  const double s = m.seq_length, b = c.micro_batch, h = m.hidden_size, a = m.num_attention_heads;
  const double t = c.t, sbh = s * b * h;
  const bool sp = c.sequence_parallel != 0;
  switch (static_cast<Recompute>(c.recompute)) {
    case Recompute::kFull:
      return sp ? 2 * sbh / t : 2 * sbh;
    case Recompute::kSelective:
      return sp ? 34 * sbh / t : sbh * (10 + 24 / t);
    case Recompute::kNone:
      break;
  }
  const double attn = 5 * a * s / (h * t);
  return sp ? sbh * (34 / t + attn) : sbh * (10 + 24 / t + attn);
}

double CostModel::activation_unit(const SearchConfig& c) const {
  return layer_activation(c) * problem_.model.num_layers / c.p;
}

double CostModel::model_flops(int global_batch) const {
  const ModelShape& m = problem_.model;
  const double B = global_batch, s = m.seq_length, L = m.num_layers, h = m.hidden_size,
               V = m.vocab_size;
  return 72.0 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
}

namespace {

// The data-parallel group of a configuration in Megatron's rank order (tensor ranks fastest):
// `r` ranks on each of `nodes` nodes. Its reduce-scatter (= all-gather) time is hierarchical
// across nodes: a ring inside the node at the measured all-reduce bus bandwidth, then each rank's
// 1/r share across the nodes over its own NIC (NCCL's rails), as hwmodels' hierarchical algorithm.
struct DpGroup {
  int r = 1, nodes = 1;
  double intra_bw = 1, nic_bw = 1, intra_lat = 0, inter_lat = 0;
  double half(double bytes) const {
    double t = 0;
    if (r > 1) t += (r - 1.0) / r * bytes / intra_bw + log2_ceil(r) * intra_lat;
    if (nodes > 1) t += (nodes - 1.0) / nodes * bytes / r / nic_bw + log2_ceil(nodes) * inter_lat;
    return t;
  }
};

DpGroup dp_group(const GpuNodeSpec& g, const SearchConfig& c) {
  DpGroup out;
  out.r = std::max(1, std::min<int>(c.d, g.gpus_per_node / std::max<int>(1, c.t)));
  out.nodes = (c.d + out.r - 1) / out.r;
  out.intra_bw = g.intra_allreduce_bw;
  out.nic_bw = g.inter_bw * g.inter_efficiency;
  out.intra_lat = g.intra_latency;
  out.inter_lat = g.inter_latency;
  return out;
}

// Element-wise kernels (layer norms, GeLU, softmax, cross-entropy) at the profile's element-wise
// throughput when it gives one (a calibrated CPU: far below its streaming bandwidth), else at
// the streaming figure as before; streaming work (the optimizer step) keeps hbm_bw.
double elementwise_rate(const PlanProblem& pr) {
  if (pr.profile && pr.profile->gpu.elementwise_bandwidth.value > 0)
    return pr.profile->gpu.elementwise_bandwidth.value;
  return pr.gpu.hbm_bw * pr.gpu.hbm_efficiency;
}

LayerCosts layer_costs(const PlanProblem& pr, const SearchConfig& c, double act) {
  const ModelShape& m = pr.model;
  const GpuNodeSpec& g = pr.gpu;
  const double s = m.seq_length, b = c.micro_batch, h = m.hidden_size;
  const double ffn = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * h;
  const double t = c.t, rate = g.peak_flops * g.gemm_efficiency;
  const double gemm = 2 * b * s * (4 * h * h + 2 * h * ffn) / t;
  const double attn = 4 * b * s * s * h / t;
  const double a = m.num_attention_heads;
  const double act_none = s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  // Elementwise kernels stream about twice the stored activations; sequence parallelism shards
  // the LayerNorm/dropout part of them over the tensor-parallel group.
  const double act_ew = c.sequence_parallel ? s * b * h * (34 / t + 5 * a * s / (h * t)) : act_none;
  const double ew = 2 * act_ew / elementwise_rate(pr);
  const double kl = g.kernel_latency;
  LayerCosts lc;
  double ar = 0;
  if (c.t > 1) {
    const bool intra = c.t <= g.gpus_per_node;
    const double bus = intra ? g.intra_allreduce_bw : g.inter_bw * g.inter_efficiency;
    const double lat = intra ? g.intra_latency : g.inter_latency;
    ar = 2 * (t - 1) / t * (2 * b * s * h) / bus + 2 * log2_ceil(c.t) * lat;
  }
  lc.tp = 4 * ar;
  lc.f = (gemm + attn) / rate + ew + 12 * kl + 2 * ar;
  lc.b = (gemm + 2 * attn) / rate + 2 * ew + 10 * kl + 2 * ar;
  lc.w = gemm / rate + 6 * kl;
  const auto rc = static_cast<Recompute>(c.recompute);
  if (rc == Recompute::kSelective) lc.b += attn / rate + 0.5 * ew + 4 * kl;
  if (rc == Recompute::kFull) {
    lc.r = lc.f;
    lc.b += lc.f;
    lc.tp += 2 * ar;
  }
  lc.act = act;
  lc.act_w = std::min(act, 32 * s * b * h / t);
  lc.act_full = act_none;
  return lc;
}

}  // namespace

bool CostModel::layer_split(const SearchConfig& c, std::vector<int>* layers) const {
  const ScheduleOption& so = space_.schedules[c.schedule];
  return split_layers(problem_.model.num_layers, c.p * so.v, c.end_trim, layers);
}

bool CostModel::stage_costs(const SearchConfig& c, StageCosts* out) const {
  const ScheduleOption& so = space_.schedules[c.schedule];
  if (c.sequence_parallel && c.t == 1) return false;
  if (c.zero > 0 && c.d == 1) return false;
  if (c.p == 1 && (so.v != 1 || so.v_shape || so.pipelines != 1 || c.schedule != 0)) return false;
  if (c.p > 1 && so.takes_v && c.p * so.v > problem_.model.num_layers) return false;
  if (so.explicit_recompute && static_cast<Recompute>(c.recompute) != Recompute::kFull)
    return false;
  if (!layer_split(c, &out->layers)) return false;
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
  fill(c, out);
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

void CostModel::fill(const SearchConfig& c, StageCosts* out) const {
  const PlanProblem& pr = problem_;
  const GpuNodeSpec& g = pr.gpu;
  const ModelShape& m = pr.model;
  const ScheduleOption& so = space_.schedules[c.schedule];
  const int S = out->num_stages;
  const double t = c.t, d = c.d, s = m.seq_length, b = c.micro_batch, h = m.hidden_size,
               V = m.vocab_size;
  const DpGroup dpg = dp_group(g, c);
  const bool z3 = c.zero == 3;
  const LayerCosts lc = layer_costs(pr, c, layer_activation(c));
  const double rate = g.peak_flops * g.gemm_efficiency;
  const double logit = 2 * b * s * h * V / t / rate;
  const double ce = 3 * 4 * s * b * V / t / elementwise_rate(pr);
  out->f.resize(S);
  out->b.resize(S);
  out->w.resize(S);
  out->act.resize(S);
  out->act_w.resize(S);
  out->r.resize(S);
  out->act_r.resize(S);
  out->static_mem.assign(c.p, 0.0);
  out->gather.assign(S, 0.0);
  // ZeRO-3: per device the two largest stages' parameters (a sweep's gathered weights and the
  // next sweep's, prefetched).
  std::vector<double> big1(c.p, 0.0), big2(c.p, 0.0);
  double big_any = 0;
  const double lp = layer_params(m) / t;
  const double embed = (V + s) * h / t;
  for (int i = 0; i < S; ++i) {
    const double n = out->layers[i];
    const bool last = i == S - 1;
    out->f[i] = n * lc.f + (last ? logit + ce : 0);
    out->b[i] = n * lc.b + (last ? logit + ce : 0);
    out->w[i] = n * lc.w + (last ? logit : 0);
    out->act[i] = n * lc.act + (last ? 4 * s * b * V / t : 0);
    out->act_w[i] = n * lc.act_w;
    const bool full = static_cast<Recompute>(c.recompute) == Recompute::kFull;
    out->r[i] = full ? n * lc.r : 0;
    out->act_r[i] = full ? n * std::max(0.0, lc.act_full - lc.act) : 0;
    const int dev = out->device[i];
    double params = n * lp + (i == 0 ? embed : 0);
    // The logits weight is tied to the embedding; a last stage on another device keeps a copy.
    if (last && (dev < 0 || dev != out->device[0])) params += V * h / t;
    // ZeRO-3 gathers a stage's weights once per sweep of consecutive passes of that stage
    // (breadth-first: counted in the data-parallel term below).
    if (z3 && !so.overlaps_dp && c.d > 1) out->gather[i] = dpg.half(2 * params);
    big_any = std::max(big_any, params);
    if (dev >= 0) {
      if (params > big1[dev]) {
        big2[dev] = big1[dev];
        big1[dev] = params;
      } else {
        big2[dev] = std::max(big2[dev], params);
      }
    }
    if (dev >= 0) {
      out->static_mem[dev] += params;
    } else {
      for (double& x : out->static_mem) x += params * so.pipelines / c.p;
    }
  }
  // static_mem holds parameters per device so far; turn it into bytes.
  double max_params = 0;
  for (int dev = 0; dev < c.p; ++dev) {
    double& P = out->static_mem[dev];
    max_params = std::max(max_params, P);
    double bytes = 0;
    const bool off = c.offload != 0;
    switch (c.zero) {
      case 0:
        bytes = off ? 4 * P : 16 * P;
        break;
      case 1:
        bytes = off ? 4 * P : 4 * P + 12 * P / d;
        break;
      case 2:
        bytes = off ? 2 * P + 2 * P / d : 2 * P + 14 * P / d;
        break;
      default:
        bytes = (off ? 4 * P / d : 16 * P / d) +
                2 * (out->device[0] >= 0 ? big1[dev] + big2[dev] : 2 * big_any);
        break;
    }
    if (static_cast<Recompute>(c.recompute) == Recompute::kFull) bytes += lc.act_full;
    P = bytes + g.reserved_bytes;
  }
  // Stage-to-stage hop: scatter/gather sends b*s*h/t elements per rank.
  out->hop = 0;
  if (c.p > 1) {
    const bool inter = c.t * c.d >= g.gpus_per_node;
    const double bw = inter ? g.inter_bw * g.inter_efficiency : g.intra_bw;
    out->hop = 2 * b * s * h / t / bw + (inter ? g.inter_latency : g.intra_latency);
  }
  // Data-parallel traffic of the largest device's parameters: fp32 gradients reduced (Megatron's
  // main-grad buffer, as the DES by default), bf16 parameters gathered back under ZeRO-1/2,
  // and with breadth-first ZeRO-3 the gathers of the forward and backward sweeps.
  double dp = 0;
  if (c.d > 1) {
    const double grads = 4 * max_params, weights = 2 * max_params;
    if (c.zero == 0) {
      dp = 2 * dpg.half(grads);
    } else if (!z3) {
      dp = dpg.half(grads) + dpg.half(weights);
    } else if (so.overlaps_dp) {
      dp = (dpg.half(grads) + 2 * dpg.half(weights)) / std::max(1, so.v);
    } else {
      dp = dpg.half(grads);
    }
  }
  out->dp = dp;
  const double shard = c.zero > 0 ? max_params / d : max_params;
  out->optimizer = c.offload ? shard * 4 / g.pcie_bw + shard / g.cpu_adam_params_per_s
                             : shard * 32 / (g.hbm_bw * g.hbm_efficiency);
  const double pass = lc.f + lc.b + lc.w;
  out->tp_share = pass > 0 ? lc.tp / pass : 0;
}

namespace {

// Peak activations of device 0 that every schedule of this shape reaches, in microbatches of
// the device's own stages (closed forms of shared/reference/schedules.md, taken on the low side).
double device0_units(const ScheduleOption& so, int p, int m) {
  if (so.memory_aware || so.pipelines > 1 || so.explicit_recompute) return 1;
  double u = 1;
  if (so.name == "gpipe") {
    u = m;
  } else if (so.v_shape) {
    u = std::max(1, (p + 4) / 3 - 1);
  } else {
    u = p;
  }
  return std::min<double>(u, m);
}

}  // namespace

double gather_lower_bound(const StageCosts& sc) {
  // Every device sweeps each of its stages at least once and its first gather is exposed.
  std::vector<double>::const_iterator it = std::max_element(sc.gather.begin(), sc.gather.end());
  if (it == sc.gather.end() || *it <= 0) return 0;
  if (sc.device.empty() || sc.device[0] < 0)
    return *std::min_element(sc.gather.begin(), sc.gather.end());
  double lb = 0;
  for (int d = 0; d < sc.num_devices; ++d) {
    double g = 1e300;
    for (int i = 0; i < sc.num_stages; ++i)
      if (sc.device[i] == d) g = std::min(g, sc.gather[i]);
    if (g < 1e300) lb = std::max(lb, g);
  }
  return lb;
}

ScreenResult CostModel::screen(const SearchConfig& c, StageCosts* sc) const {
  ScreenResult r;
  if (!stage_costs(c, sc)) return r;
  r.valid = true;
  const ScheduleOption& so = space_.schedules[c.schedule];
  const int S = sc->num_stages, P = c.p, m = c.microbatches;
  double pipe = 0;
  double mem = 0;
  for (double x : sc->static_mem) mem = std::max(mem, x);
  if (sc->device[0] < 0) {
    double work = 0;
    for (int i = 0; i < S; ++i) work += sc->f[i] + sc->b[i] + sc->w[i];
    pipe = m * work / P;
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
    for (int d = 0; d < D; ++d) {
      pipe = std::max(pipe, head[d] + std::max(busy[d], fb[d] + tail[d]));
      mem = std::max(mem, sc->static_mem[d] + act1[d]);
    }
    // Device 0's peak in units of its own per-microbatch activations; V-shape units are two
    // chunks of unequal size (the last holds the logits), so count the smaller chunk twice.
    const double per_mb = so.v_shape ? 2 * act_min0 : act_all[0];
    mem = std::max(mem, sc->static_mem[0] + device0_units(so, P, m) * per_mb);
  }
  // The building-block searches (adaptive offsets; V-Half and V-Min) take seconds per schedule
  // beyond 16 devices: keep them to p <= 16.
  if ((so.memory_aware || so.name == "v-half" || so.name == "v-min") && P > 16) {
    r.valid = false;
    return r;
  }
  if (so.memory_aware && (problem_.limit() - mem) / activation_unit(c) >= P) {
    // Memory does not bind: a memory-controllable generator would pick its zero-bubble end,
    // which the fixed zero-bubble schedules in the space already cover.
    r.valid = false;
    return r;
  }
  // OVERLAP_F_B is charged at its forward stage's F+B+W; when the paired backward's stage is
  // lighter (or heavier) the evaluator's figure moves by up to one stage's difference per pair.
  if (so.overlap) pipe *= 0.9;
  r.time_lb = pipe + sc->dp + sc->optimizer + gather_lower_bound(*sc);
  r.mem_lb = mem;
  return r;
}

CostTable to_cost_table(const StageCosts& sc, int num_stages_total,
                        const std::vector<int>& stage_of, bool explicit_recompute) {
  CostTable t;
  t.num_stages = num_stages_total;
  t.duration.assign(static_cast<std::size_t>(num_stages_total) * kNumActionKinds, 0);
  t.mem_delta.assign(static_cast<std::size_t>(num_stages_total) * kNumActionKinds, 0.0);
  t.comm.assign(num_stages_total, seconds_to_ps(sc.hop));
  for (int g = 0; g < num_stages_total; ++g) {
    const int i = stage_of[g];
    const TimePs f = seconds_to_ps(sc.f[i]), b = seconds_to_ps(sc.b[i]), w = seconds_to_ps(sc.w[i]);
    t.time(g, ActionKind::kF) = f;
    t.time(g, ActionKind::kB) = b;
    t.time(g, ActionKind::kW) = w;
    t.time(g, ActionKind::kBW) = b + w;
    t.time(g, ActionKind::kR) = 0;
    t.time(g, ActionKind::kOverlapFB) = f + b + w;
    t.mem(g, ActionKind::kF) = sc.act[i];
    t.mem(g, ActionKind::kB) = -(sc.act[i] - sc.act_w[i]);
    t.mem(g, ActionKind::kW) = -sc.act_w[i];
    t.mem(g, ActionKind::kBW) = -sc.act[i];
    if (explicit_recompute) {
      const TimePs r = seconds_to_ps(sc.r[i]);
      t.time(g, ActionKind::kR) = r;
      t.time(g, ActionKind::kB) = b - r;
      t.time(g, ActionKind::kBW) = b - r + w;
      t.mem(g, ActionKind::kR) = sc.act_r[i];
      t.mem(g, ActionKind::kB) = -(sc.act[i] + sc.act_r[i] - sc.act_w[i]);
      t.mem(g, ActionKind::kBW) = -(sc.act[i] + sc.act_r[i]);
    }
  }
  return t;
}

double exposed_gather(const StageCosts& sc, const Schedule& schedule,
                      const std::vector<double>& busy) {
  if (std::none_of(sc.gather.begin(), sc.gather.end(), [](double g) { return g > 0; })) return 0;
  const Placement& pl = schedule.placement;
  double worst = 0;
  for (int d = 0; d < static_cast<int>(schedule.actions.size()); ++d) {
    int stage = -1;
    double first = -1, rest = 0;
    for (const Action& a : schedule.actions[d]) {
      if (!is_compute(a.kind) || a.stage == stage) continue;
      stage = a.stage;
      const double g = sc.gather[pl.stages[stage].index];
      if (first < 0) {
        first = g;
      } else {
        rest += g;
      }
    }
    if (first < 0) continue;
    const double b = d < static_cast<int>(busy.size()) ? busy[d] : 0;
    worst = std::max(worst, first + std::max(0.0, rest - b));
  }
  return worst;
}

}  // namespace pw
