#include "planner/search/screen.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hwmodels/memory.h"
#include "hwmodels/optimizer.h"
#include "hwmodels/rank_layout.h"

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

void CostModel::fill(const SearchConfig& c, StageCosts* out) const {
  const PlanProblem& pr = problem_;
  const ScheduleOption& so = space_.schedules[c.schedule];
  const IterationOptions& opt = pr.sim;
  // Room for figures outside the tables (configurations the search did not tabulate); per
  // thread, so the screen's loop does not clear two large structs on every call.
  thread_local LayerEntry le_scratch;
  thread_local CellNet net_scratch;
  const LayerEntry& le = layer_entry(c, &le_scratch);
  const CellNet& net = cell_net(c, &net_scratch);
  const int S = out->num_stages;
  const int P = c.p;
  const int dpc = c.cp * c.d;  // the data-and-context group gradients reduce over
  const bool z3 = c.zero == 3 && dpc > 1 && c.zero3_stage;         // gathers per stage sweep
  const bool z3_layer = c.zero == 3 && dpc > 1 && !c.zero3_stage;  // per layer, every pass
  const bool has_r = static_cast<Recompute>(c.recompute) != Recompute::kNone;
  out->gather_link.assign(S, {0.0, 0.0});
  for (std::vector<double>* v : {&out->f, &out->b, &out->w, &out->r, &out->act, &out->act_w,
                                 &out->act_r, &out->params, &out->gather})
    v->assign(S, 0.0);
  out->state_mem.assign(P, 0.0);
  out->static_mem.assign(P, 0.0);
  out->tail.assign(P, 0.0);
  out->reduce_mb.assign(P, 0.0);
  out->net_volume.assign(P, 0.0);
  out->reduce_link.assign(P, {0.0, 0.0});
  // Per device: parameters, the two largest stages (ZeRO-3 holds a sweep's gathered weights and
  // the next sweep's), the largest recompute working buffer, gradient reduction, re-gathers,
  // the data-parallel link time and the largest pass gather. Kept in `out` so its capacity is
  // reused across calls.
  out->device_scratch.assign(static_cast<std::size_t>(10) * P, 0.0);
  double* dev_params = out->device_scratch.data();
  double *big1 = dev_params + P, *big2 = big1 + P, *rbuf = big2 + P, *red = rbuf + P,
         *regather = red + P;
  double* link[2] = {regather + P, regather + 2 * P};             // per route
  double* pass_gather[2] = {regather + 3 * P, regather + 4 * P};  // largest, per route
  // ZeRO-2/3: every microbatch's reduce-scatters and (ZeRO-3) gathers leave the node on one
  // route per rank, where the DES shares the bandwidth among them.
  const bool volume = c.zero >= 2 && dpc > 1;
  // Microbatches each stage runs: a multi-pipeline placement (BitPipe) sends each microbatch
  // down one of its pipelines, whose stages share the devices (`share` below).
  const int stage_mbs = c.microbatches / std::max(1, so.pipelines);
  const std::vector<int>* pipe_map = nullptr;
  if (so.pipelines > 1 && static_cast<std::size_t>(c.schedule) < pipe_devices_.size() &&
      static_cast<std::size_t>(P) < pipe_devices_[c.schedule].size() &&
      pipe_devices_[c.schedule][P].size() == static_cast<std::size_t>(so.pipelines) * S)
    pipe_map = &pipe_devices_[c.schedule][P];
  // Passes per microbatch and stage that gather its weights by layer: F, B (or BW), and R when
  // separate. By stage at least one gather per stage (the evaluator counts the sweeps).
  const double gathers = z3_layer ? (so.explicit_recompute ? 3.0 : 2.0) * stage_mbs
                         : z3     ? 1.0
                                  : 0.0;
  const int D = P;
  const hw::CollectiveLine& reduce = c.zero == 0 ? net.dp_all_reduce : net.dp_reduce_scatter;
  // The expert-DP group's lines of this expert layout (CellNet::expert), or none where expert
  // gradients reduce with the rest.
  const CellNet::ExpertNet* xnet = nullptr;
  if (!net.expert.empty() && static_cast<std::size_t>(c.ep) < ep_index_.size() &&
      ep_index_[c.ep] >= 0) {
    const CellNet::ExpertNet& x = net.expert[static_cast<std::size_t>(ep_index_[c.ep]) * num_etp_ +
                                             (num_etp_ > 1 ? c.etp1 : 0)];
    if (x.all_gather.count > 0) xnet = &x;
  }
  const hw::CollectiveLine* xreduce = xnet == nullptr ? nullptr
                                      : c.zero == 0   ? &xnet->all_reduce
                                                      : &xnet->reduce_scatter;
  // Expert weights are gathered apart from the DP group's (RankLayout::expert_dp_differs).
  hw::RankLayout xlay;
  xlay.tp = c.t;
  xlay.ep = c.ep;
  xlay.etp = c.etp();
  const bool experts_apart = xlay.expert_dp_differs();
  hw::WorkloadOptions wo;
  wo.tp = c.t;
  wo.ep = c.ep;
  wo.etp = c.etp();
  std::vector<double>& dev_expert = out->device_expert;
  dev_expert.assign(P, 0.0);
  std::vector<double>& dev_layers = out->device_layers;
  dev_layers.assign(P, 0.0);
  // One stage's costs depend on its layer count, its MoE layers and its role (embedding, loss,
  // multi-token prediction depths), not on where it sits: stages alike are computed once.
  struct StageEval {
    int layers = -1, nm = 0;
    bool first = false, last = false, mtp = false;
    double f = 0, b = 0, w = 0, r = 0, act = 0, act_w = 0, act_r = 0, params = 0, gather = 0;
    double expert = 0, layer_params = 0, gathered = 0, stage_red = 0, stage_gather = 0;
    double stage_rs = 0, buf = 0, first_bucket = 0;
    std::array<double, 2> one_gather{0, 0}, stage_rs_link{0, 0}, gather_link{0, 0};
  };
  auto eval_stage = [&](int layer_begin, int layers, int nm, hw::StageRole role) {
    const bool first = role.first, last = role.last;
    StageEval m;
    m.layers = layers;
    m.nm = nm;
    m.first = first;
    m.last = last;
    m.mtp = role.mtp;
    const double n = layers - nm;  // dense layers; nm MoE layers
    // The stage's end piece besides the embedding: the loss with the multi-token prediction
    // depths (le.last), the loss alone or the depths alone (a layout's stage of their own).
    const hw::StageCosts* end = last       ? (role.mtp ? &le.last : &le.loss)
                                : role.mtp ? &le.mtp
                                           : nullptr;
    const double* tp_end = last ? (role.mtp ? le.tp_last : le.tp_loss) : le.tp_mtp;
    const double* ep_end = last ? (role.mtp ? le.ep_last : le.ep_loss) : le.ep_mtp;
    auto sum_ps = [&](TimePs hw::StageCosts::*field) {
      return static_cast<double>(static_cast<TimePs>(n) * le.layer.*field +
                                 static_cast<TimePs>(nm) * le.moe.*field +
                                 (first ? le.first.*field : 0) + (end ? end->*field : 0));
    };
    auto sum_of = [&](const double* layer, const double* moe, const double* fst, const double* lst,
                      int k) {
      return n * layer[k] + nm * moe[k] + (first ? fst[k] : 0) + (end ? lst[k] : 0);
    };
    // A pass with its TP collectives (run under its paired GEMMs with tp_comm_overlap, as the
    // DES does) and the EP all-to-all after them.
    const bool overlap = space_.tp_comm_overlap && c.sequence_parallel && c.t > 1;
    auto pass = [&](TimePs hw::StageCosts::*field, TimePs hw::StageCosts::*hide,
                    TimePs hw::StageCosts::*attn, int k) {
      const double compute = ps_to_seconds(sum_ps(field));
      const double tp = sum_of(le.tp, le.tp_moe, le.tp_first, tp_end, k);
      const double ep = sum_of(le.ep, le.ep_moe, le.ep_first, ep_end, k);
      const double t = overlap ? hw::overlapped_pass_time(compute, ps_to_seconds(sum_ps(hide)), tp)
                               : compute + tp;
      return t + ep + hw::cp_ring_exposed(ps_to_seconds(sum_ps(attn)), layers * le.cp[k], c.cp);
    };
    auto sum_bytes = [&](Bytes hw::StageCosts::*field) {
      return n * (le.layer.*field).value + nm * (le.moe.*field).value +
             (first ? (le.first.*field).value : 0) + (end ? (end->*field).value : 0);
    };
    // As the DES: F = f + its TP collectives; B = b + inline recompute + theirs; W = w + its.
    using SC = hw::StageCosts;
    const double r = has_r ? pass(&SC::r, &SC::hide_r, &SC::attn_r, 3) : 0;
    m.f = pass(&SC::f, &SC::hide_f, &SC::attn_f, 0);
    m.b = pass(&SC::b, &SC::hide_b, &SC::attn_b, 1) + r;
    m.w = pass(&SC::w, &SC::hide_w, &SC::attn_w, 2);
    m.r = r;
    // Delayed scaling: F and B end with one all-reduce of the stage's amaxes over its pipeline
    // rank's GPUs, waited for after the pass's other collectives (as the DES).
    if (c.fp8 != 0 && net.amax_all_reduce.count > 0)
      for (int k = 0; k < 2; ++k)
        (k == 0 ? m.f : m.b) += net.amax_all_reduce.seconds(n * le.amax[k] + nm * le.amax_moe[k] +
                                                            (role.mtp ? le.amax_mtp[k] : 0));
    m.act = sum_bytes(&hw::StageCosts::m_b);
    m.act_w = sum_bytes(&hw::StageCosts::m_w);
    m.act_r = has_r ? sum_bytes(&hw::StageCosts::m_r) : 0;
    const double params = hw::stage_parameter_count(pr.model, wo, layer_begin, layer_begin + layers,
                                                    role, P, &m.expert);
    // FP8 weight copies cover the transformer layers only (hw::model_state_bytes).
    m.layer_params = c.fp8 == 0
                         ? 0.0
                         : (first || last || role.mtp
                                ? hw::stage_parameter_count(pr.model, wo, layer_begin,
                                                            layer_begin + layers, false, false, P)
                                : params);
    m.params = params;
    // ZeRO-3 gathers the expert weights over the expert-DP group (xnet; not at all where each
    // rank's experts are its own), the rest over the DP group, as the DES (expert_share).
    const double x_gathered = xnet != nullptr ? m.expert : 0;
    const double dense_gathered = params - (experts_apart ? m.expert : 0);
    auto z3_gather_s = [&](double bytes) {
      return params <= 0
                 ? 0.0
                 : net.dp_all_gather.seconds(bytes * dense_gathered / params) +
                       (xnet != nullptr ? xnet->all_gather.seconds(bytes * x_gathered / params)
                                        : 0.0);
    };
    if (z3) m.gather = z3_gather_s(2 * params);
    // ZeRO-3 by layer (as the DES): every pass but W all-gathers the stage's weights, the first
    // layer's under the previous pass and the rest under its own compute, so a pass lasts at
    // least the rest's gather.
    // A DualPipeV pass gathers two stages' weights under F and B together: not split, left out.
    // m.gathered: the pass's working buffer, two layers' gathered weights.
    if (z3_layer) {
      const double first = hw::zero3_layer_bytes(params, layers);
      m.gathered = 2 * first;
      if (!so.overlap) {
        // The layers after the first, each gathered by its own collective (as the DES).
        const double g = std::max(0, layers - 1) * z3_gather_s(first);
        const double w_in_b = so.split_backward ? 0 : m.w;  // B and W run as one pass
        m.f = std::max(m.f, g);
        if (so.explicit_recompute) {  // separate R and B passes, each gathers
          const double r_g = std::max(m.r, g);
          m.b = std::max(m.b - m.r, g - w_in_b) + r_g;
          m.r = r_g;
        } else {
          m.b = std::max(m.b, g - w_in_b);
        }
      }
    }
    // The DES reduces each stage's fp32 gradients in buckets after the device's last pass
    // (Megatron without --overlap-grad-reduce), then ZeRO-1/2 re-gather the bf16 weights;
    // ZeRO-2/3 also reduce-scatter them after every earlier microbatch's backward.
    // m.one_gather and m.stage_rs_link: per route, see below.
    // Expert parameters (xnet): each bucket's expert share reduces (and re-gathers) over the
    // expert-DP group, then the rest over the DP group, as the DES; the route times (a lower
    // bound) count the DP group's alone.
    const double x_params = xnet != nullptr ? m.expert : 0;
    if (dpc > 1 || x_params > 0) {
      const double gbpp = hw::grad_bytes_per_param(space_.grad_reduce_in_fp32);
      const double grad = (params - x_params) * gbpp, x_grad = x_params * gbpp;
      const double nb = hw::grad_bucket_count(params, c.zero, space_.overlap_grad_reduce, dpc,
                                              first, space_.ddp_bucket_size);
      auto red_s = [&](double bytes, double x_bytes) {
        return reduce.seconds(bytes) + (xreduce != nullptr ? xreduce->seconds(x_bytes) : 0);
      };
      auto gather_s = [&](double bytes, double x_bytes) {
        return net.dp_all_gather.seconds(bytes) +
               (xnet != nullptr ? xnet->all_gather.seconds(x_bytes) : 0);
      };
      // Overlapped, the last bucket's reduction starts when the last backward's compute ends,
      // beside that pass's TP collectives.
      const double last_tp = sum_of(le.tp, le.tp_moe, le.tp_first, tp_end, 1) +
                             sum_of(le.tp, le.tp_moe, le.tp_first, tp_end, 2) +
                             (has_r ? sum_of(le.tp, le.tp_moe, le.tp_first, tp_end, 3) : 0);
      m.stage_red = space_.overlap_grad_reduce
                        ? std::max(0.0, red_s(grad / nb, x_grad / nb) - last_tp)
                        : nb * red_s(grad / nb, x_grad / nb);
      if (c.zero == 1 || c.zero == 2) {
        const double w = 2 * (params - x_params), x_w = 2 * x_params;
        m.stage_gather = gather_s(w, x_w);
        // overlap_param_gather: the buckets are the gradient buckets (the DES's rule).
        if (c.param_gather && first) m.first_bucket = gather_s(w / nb, x_w / nb);
      }
      if (c.zero >= 2) m.stage_rs = red_s(grad, x_grad);
      // Route times: the gathers (by layer: the first layer's and the rest's), m - 1
      // microbatches' reduce-scatters and the tail's buckets.
      if (volume) {
        if (z3_layer) {
          const double first =
              params > 0 ? hw::zero3_layer_bytes(params, layers) * dense_gathered / params : 0.0;
          const auto a = net.dp_all_gather.route_seconds(first);
          m.one_gather = {a[0] * std::max(1, layers), a[1] * std::max(1, layers)};
        } else if (z3) {
          m.one_gather = net.dp_all_gather.route_seconds(2 * dense_gathered);
          m.gather_link = m.one_gather;
        }
        const auto mb = reduce.route_seconds(grad), bucket = reduce.route_seconds(grad / nb);
        for (int k = 0; k < 2; ++k) m.stage_rs_link[k] = (stage_mbs - 1) * mb[k] + nb * bucket[k];
      }
    }
    // Recompute inside the backward re-creates one layer at a time (DES working buffer).
    m.buf = has_r && !so.explicit_recompute && layers > 0 ? m.act_r / layers : 0;
    return m;
  };
  // overlap_param_gather: the re-gather leaves the tail (screen() and finish() price it).
  const bool param_overlap = c.param_gather && (c.zero == 1 || c.zero == 2) && dpc > 1;
  out->param_first_bucket = 0;
  out->param_chunk.assign(param_overlap ? P : 0, -1.0);
  // The multi-token prediction depths on a stage of their own (a layout's or a searched split).
  const bool mtp_standalone = ((c.end_trim == kOwnSplit && space_.own_split_mtp_standalone) ||
                               is_mtp_standalone_code(c.end_trim)) &&
                              pr.model.mtp_num_layers > 0 && S >= 2 && so.pipelines == 1;
  std::array<StageEval, 8> memo;
  std::size_t memo_size = 0;
  int layer_begin = 0;
  for (int i = 0; i < S; ++i) {
    const int layers = out->layers[i];
    const int nm = hw::moe_layers_in(pr.model, layer_begin, layer_begin + layers);
    const hw::StageRole role = hw::stage_role(i, S, mtp_standalone);
    const StageEval* hit = nullptr;
    for (std::size_t k = 0; k < memo_size && hit == nullptr; ++k)
      if (memo[k].layers == layers && memo[k].nm == nm && memo[k].first == role.first &&
          memo[k].last == role.last && memo[k].mtp == role.mtp)
        hit = &memo[k];
    const StageEval m = hit != nullptr ? *hit : eval_stage(layer_begin, layers, nm, role);
    if (hit == nullptr && memo_size < memo.size()) memo[memo_size++] = m;
    layer_begin += layers;
    out->f[i] = m.f;
    out->b[i] = m.b;
    out->w[i] = m.w;
    out->r[i] = m.r;
    out->act[i] = m.act;
    out->act_w[i] = m.act_w;
    out->act_r[i] = m.act_r;
    out->params[i] = m.params;
    out->gather[i] = m.gather;
    out->gather_link[i] = m.gather_link;
    const double params = m.params, expert = m.expert, layer_params = m.layer_params;
    const double gathered = m.gathered, stage_red = m.stage_red, stage_gather = m.stage_gather;
    const double stage_rs = m.stage_rs, buf = m.buf;
    const std::array<double, 2> one_gather = m.one_gather, stage_rs_link = m.stage_rs_link;
    // The stage's device; in a multi-pipeline placement each pipeline's copy's device (a
    // copy holds the stage's weights and runs its pipeline's microbatches, stage_mbs), or,
    // where the option names no placement, every device with an even share.
    const int dev = out->device[i];
    const int n_on = dev >= 0 ? 1 : pipe_map != nullptr ? so.pipelines : D;
    for (int k_on = 0; k_on < n_on; ++k_on) {
      const int d = dev >= 0 ? dev : pipe_map != nullptr ? (*pipe_map)[k_on * S + i] : k_on;
      const double share = dev >= 0 || pipe_map != nullptr ? 1.0 : double(so.pipelines) / P;
      // ZeRO-2/3's per-microbatch reduce-scatters: (m - 1) * reduce_mb is what the device's
      // stream carries before its tail; a copy carries stage_mbs - 1 of them.
      const double rs_count =
          dev >= 0 || c.microbatches < 2 ? 1.0 : double(stage_mbs - 1) / double(c.microbatches - 1);
      dev_params[d] += params * share;
      dev_expert[d] += expert * share;
      dev_layers[d] += layer_params * share;
      red[d] += stage_red * share;
      out->reduce_mb[d] += stage_rs * share * rs_count;
      if (param_overlap) {
        if (dev >= 0 && out->param_chunk[d] < 0) out->param_chunk[d] = stage_gather;
        if (i == 0) out->param_first_bucket = m.first_bucket;
      } else {
        regather[d] += stage_gather * share;
      }
      for (int k = 0; k < 2; ++k) {
        link[k][d] += (gathers * one_gather[k] + stage_rs_link[k]) * share;
        out->reduce_link[d][k] += stage_rs_link[k] * share;
        pass_gather[k][d] = std::max(pass_gather[k][d], one_gather[k]);
      }
      rbuf[d] = std::max(rbuf[d], buf + gathered);
      const double pw = dev >= 0 ? params : params * share;
      if (pw > big1[d]) {
        big2[d] = big1[d];
        big1[d] = pw;
      } else {
        big2[d] = std::max(big2[d], pw);
      }
    }
  }
  // The embedding copy's gradient all-reduce of the first and last stages' devices (the DES's
  // build_embedding_sync), after their data-parallel reduction.
  const double copy = hw::embedding_copy_parameters(pr.model, c.t, P);
  const int first_dev = out->device[0], last_dev = out->device[S - 1];
  if (copy > 0 && first_dev >= 0 && last_dev >= 0 && first_dev != last_dev) {
    const double sync = net.embedding_all_reduce.seconds(
        copy * hw::grad_bytes_per_param(space_.grad_reduce_in_fp32));
    red[first_dev] += sync;
    red[last_dev] += sync;
  }
  if (param_overlap) {
    int chunks0 = 0;
    for (int i = 0; i < S; ++i) chunks0 += out->device[i] == 0 ? 1 : 0;
    out->param_aligned = hw::param_gather_aligned(P, chunks0, space_.align_param_gather);
  }
  out->dp = out->optimizer = 0;
  double worst_tail = -1;
  for (int d = 0; d < D; ++d) {
    const double P_dev = dev_params[d];
    const double E_dev = dev_expert[d];
    // Expert-data-parallel group: ranks holding the same experts, t*cp*d / (etp*ep).
    const int edp = std::max(1, c.t * dpc / (c.etp() * c.ep));
    const hw::ModelStateBytes ms =
        hw::model_state_bytes(P_dev, E_dev, c.zero, dpc, edp, c.offload != 0, c.fp8 != 0,
                              hw::grad_bytes_per_param(space_.grad_reduce_in_fp32), dev_layers[d]);
    const double shard = c.zero >= 1 ? (P_dev - E_dev) / dpc + E_dev / edp : P_dev;
    double opt_s = 0, prefetch = 0;
    if (c.offload) {
      const hw::OffloadSplit sp = hw::offload_split(
          pr.profile, shard, hw::require_cpu_adam_rate(pr.profile, "--offload on"),
          opt.offload_gpu_share);
      opt_s = sp.seconds();
      prefetch = sp.gpu_share * shard * hw::kOffloadStateBytesPerParam;
    } else {
      opt_s = ps_to_seconds(hw::adam_step_time(gpu_, shard));
    }
    out->state_mem[d] = ms.total().value;
    out->static_mem[d] = ms.total().value + rbuf[d] + prefetch + (z3 ? 2 * (big1[d] + big2[d]) : 0);
    out->tail[d] = red[d] + opt_s + regather[d];
    // Before the iteration's clock starts (device 0's first compute) a device's gather stream
    // can only have run two gathers (by layer: its first pass's and the next one's first layer;
    // by stage: its first two sweeps'). Its optimizer step follows all its reductions.
    if (volume) {
      for (int k = 0; k < 2; ++k) {
        out->net_volume[d] =
            std::max(out->net_volume[d], std::max(0.0, link[k][d] - 2 * pass_gather[k][d]) + opt_s);
        out->reduce_link[d][k] += opt_s;
      }
    }
    if (out->tail[d] > worst_tail) {
      worst_tail = out->tail[d];
      out->dp = red[d] + regather[d];
      out->optimizer = opt_s;
    }
  }
  // Stage-to-stage hop: Megatron's scatter/gather sends 1/t of the message and all-gathers it in
  // the receiving TP group when sequence parallelism is off.
  out->hop = 0;
  if (P > 1 && !opt.free_communication) {
    const double bytes = le.layer.p2p_bytes.value;
    const bool sg = opt.scatter_gather && !c.sequence_parallel && c.t > 1;
    out->hop = net.hop_alpha + net.hop_beta * (sg ? bytes / c.t : bytes) +
               (sg ? net.tp_all_gather.seconds(bytes) : 0);
  }
  // A layer's share of pass time in TP collectives (F + B + W, as the DES runs them).
  const int L = pr.model.num_layers, nm = hw::moe_layers_in(pr.model, 0, L);
  const double tp_layer = ((L - nm) * (le.tp[0] + le.tp[1] + le.tp[2]) +
                           nm * (le.tp_moe[0] + le.tp_moe[1] + le.tp_moe[2])) /
                          L;
  const double pass_layer = ((L - nm) * ps_to_seconds(le.layer.f + le.layer.b + le.layer.w) +
                             nm * ps_to_seconds(le.moe.f + le.moe.b + le.moe.w)) /
                                L +
                            tp_layer;
  out->tp_share = pass_layer > 0 ? tp_layer / pass_layer : 0;
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
