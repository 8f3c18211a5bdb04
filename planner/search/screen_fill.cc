#include <algorithm>
#include <array>
#include <cmath>

#include "hwmodels/memory.h"
#include "hwmodels/optimizer.h"
#include "hwmodels/rank_layout.h"
#include "planner/search/screen.h"

// A configuration's figures per stage and per device (CostModel::fill): what the screen's
// bounds, the evaluator tier and the plans read, priced from the cost tables of screen_tables.cc.

namespace pw {

// What fill() works out once per configuration and every stage's figures read.
struct CostModel::FillContext {
  const SearchConfig& c;
  const ScheduleOption& so;
  const LayerEntry& le;
  const CellNet& net;
  const hw::CollectiveLine& reduce;   // the DP group's gradient reduction
  const CellNet::ExpertNet* xnet;     // the expert-DP group's lines, or none
  const hw::CollectiveLine* xreduce;  // their gradient reduction, or none
  const hw::WorkloadOptions& wo;
  int P, dpc, stage_mbs;
  bool z3, z3_layer, has_r, volume, experts_apart;
};

CostModel::StageEval CostModel::eval_stage(const FillContext& x, int layer_begin, int layers,
                                           int nm, hw::StageRole role) const {
  const PlanProblem& pr = problem_;
  const SearchConfig& c = x.c;
  const ScheduleOption& so = x.so;
  const LayerEntry& le = x.le;
  const CellNet& net = x.net;
  const hw::CollectiveLine& reduce = x.reduce;
  const CellNet::ExpertNet* xnet = x.xnet;
  const hw::CollectiveLine* xreduce = x.xreduce;
  const hw::WorkloadOptions& wo = x.wo;
  const int P = x.P, dpc = x.dpc, stage_mbs = x.stage_mbs;
  const bool z3 = x.z3, z3_layer = x.z3_layer, has_r = x.has_r, volume = x.volume;
  const bool experts_apart = x.experts_apart;
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
    const double t =
        overlap ? hw::overlapped_pass_time(compute, ps_to_seconds(sum_ps(hide)), tp) : compute + tp;
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
    const double nb = hw::grad_bucket_count(params, c.zero, space_.overlap_grad_reduce, dpc, first,
                                            space_.ddp_bucket_size);
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
  const FillContext x{c, so,  le,        net, reduce,   xnet,  xreduce, wo,
                      P, dpc, stage_mbs, z3,  z3_layer, has_r, volume,  experts_apart};
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
    const StageEval m = hit != nullptr ? *hit : eval_stage(x, layer_begin, layers, nm, role);
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

}  // namespace pw
