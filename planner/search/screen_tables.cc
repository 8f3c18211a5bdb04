// The screen's tables (planner/search/screen.h): hwmodels' per-layer costs of every (t, cp, ep,
// fp8, micro-batch, sequence parallelism, recompute) the space can ask for, and the DP, TP and
// pipeline-hop networks of every (t, p, d) layout on the DES's own topology. CostModel::fill
// (screen.cc) combines them per configuration.
#include <algorithm>
#include <tuple>

#include "hwmodels/rank_layout.h"
#include "hwmodels/topology.h"
#include "planner/search/screen.h"

namespace pw {
namespace {

std::uint64_t cell_key(int t, int p, int d) {
  return (std::uint64_t(t) << 40) | (std::uint64_t(p) << 20) | std::uint64_t(d);
}

// The topology the DES builds for `gpus` GPUs (sim/plan_prediction.cc: ceil(gpus / per node)
// nodes, a partial node when the job is smaller than one).
hw::TopologySpec job_topology(const hw::HardwareProfile& profile, long long gpus) {
  const int per_node = std::max(1, profile.node.gpus_per_node);
  const long long nodes = (gpus + per_node - 1) / per_node;
  hw::TopologySpec spec = hw::topology_spec(profile, static_cast<int>(nodes));
  if (gpus < per_node) spec.node.gpus_per_node = static_cast<int>(gpus);
  return spec;
}

}  // namespace

CostModel::CostModel(const PlanProblem& problem, const SearchSpace& space)
    : problem_(problem), space_(space), gpu_(problem.profile.gpu) {
  // What fill() and the stage layout read of a schedule option (see cost_class).
  auto key = [](const ScheduleOption& so) {
    return std::make_tuple(so.v, so.pipelines, so.v_shape, so.split_backward, so.explicit_recompute,
                           so.overlap);
  };
  for (std::size_t i = 0; i < space_.schedules.size(); ++i) {
    std::size_t first = 0;
    while (key(space_.schedules[first]) != key(space_.schedules[i])) ++first;
    cost_class_.push_back(static_cast<int>(first));
  }
  // Trim codes that repeat an earlier code's split at a stage count (e.g. the depths' stage
  // trimmed by 0 or by 1 when both leave it the same layers) are not searched twice.
  const int L = problem_.model.num_layers;
  trim_duplicate_.assign(static_cast<std::size_t>(std::max(L, 0)) + 1, {});
  for (int S = 1; S <= L; ++S) {
    std::vector<std::pair<std::vector<int>, bool>> seen;
    for (const int code : space_.end_trim) {
      const auto c8 = static_cast<std::uint8_t>(code);
      if (c8 == kOwnSplit) continue;
      std::vector<int> split;
      if (!split_for_trim_code(L, S, c8, &split)) continue;
      std::pair<std::vector<int>, bool> key{std::move(split), is_mtp_standalone_code(c8)};
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        trim_duplicate_[S][c8] = 1;
      else
        seen.push_back(std::move(key));
    }
  }
  // Multi-pipeline options: which device holds each pipeline's copy of each stage and the
  // layers of each stage, for every pipeline size the space can ask (the generator's own
  // placement of this model, which the search runs as generated).
  int max_p = problem.num_gpus;
  for (int n : space_.gpu_counts) max_p = std::max(max_p, n);
  pipe_devices_.resize(space_.schedules.size());
  pipe_layers_.resize(space_.schedules.size());
  for (std::size_t i = 0; i < space_.schedules.size(); ++i) {
    const ScheduleOption& so = space_.schedules[i];
    if (so.pipelines < 2 || so.placement == nullptr) continue;
    const int top = so.max_devices > 0 ? std::min(so.max_devices, max_p) : max_p;
    pipe_devices_[i].resize(top + 1);
    pipe_layers_[i].resize(top + 1);
    for (int p = 2; p <= top; ++p) {
      const Placement pl = so.placement(p, problem_.model.num_layers);
      const int per = pl.stages_per_pipeline();
      std::vector<int>& map = pipe_devices_[i][p];
      std::vector<int>& layers = pipe_layers_[i][p];
      map.assign(static_cast<std::size_t>(so.pipelines) * per, -1);
      layers.assign(per, 0);
      for (const StageInfo& st : pl.stages) {
        if (st.pipeline < so.pipelines) map[st.pipeline * per + st.index] = st.device;
        if (st.pipeline == 0) layers[st.index] = st.layer_end - st.layer_begin;
      }
    }
  }
  const ModelShape& m = problem_.model;
  // Tabulate every (t, b, sp, recompute) the space can ask for.
  int max_n = problem_.num_gpus;
  for (int n : space_.gpu_counts) max_n = std::max(max_n, n);
  std::vector<int> ts, bs = space_.micro_batches;
  for (int t = 1; t <= std::min(max_n, space_.max_tensor_parallel); ++t)
    if (max_n % t == 0 && m.num_attention_heads % t == 0) ts.push_back(t);
  for (int b = 1; b <= 8; ++b) bs.push_back(b);
  std::sort(bs.begin(), bs.end());
  bs.erase(std::unique(bs.begin(), bs.end()), bs.end());
  std::vector<int> cps = space_.context_parallel, eps = space_.expert_parallel;
  if (cps.empty()) cps = {1};
  if (eps.empty()) eps = {1};
  t_index_.assign(ts.back() + 1, -1);
  b_index_.assign(bs.back() + 1, -1);
  cp_index_.assign(*std::max_element(cps.begin(), cps.end()) + 1, -1);
  ep_index_.assign(*std::max_element(eps.begin(), eps.end()) + 1, -1);
  for (std::size_t i = 0; i < ts.size(); ++i) t_index_[ts[i]] = static_cast<int>(i);
  for (std::size_t i = 0; i < bs.size(); ++i) b_index_[bs[i]] = static_cast<int>(i);
  for (std::size_t i = 0; i < cps.size(); ++i) cp_index_[cps[i]] = static_cast<int>(i);
  for (std::size_t i = 0; i < eps.size(); ++i) ep_index_[eps[i]] = static_cast<int>(i);
  eps_ = eps;
  num_b_ = static_cast<int>(bs.size());
  num_cp_ = static_cast<int>(cps.size());
  num_ep_ = static_cast<int>(eps.size());
  // Expert TP 1 beside t: MoE models whose space allows it (entries at t = 1 stay empty).
  num_etp_ = m.num_experts > 0 && space_.expert_tp_allowed(1) ? 2 : 1;
  num_fp8_ = 2;
  auto searched = [](const std::vector<int>& v, int x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (int t : ts)
    for (int cp : cps)
      for (int ep : eps)
        for (int one = 0; one < num_etp_; ++one)
          for (int fp8 = 0; fp8 < 2; ++fp8)
            for (int b : bs)
              for (int sp = 0; sp < 2; ++sp)
                for (int rc = 0; rc < 3; ++rc) {
                  // Only what the space can ask for is computed; the rest stays empty (expert
                  // TP 1 at t > 1 of MoE models only: at t = 1 the search marks it as t's).
                  const bool wanted =
                      (searched(space_.fp8, fp8) || (space_.fp8.empty() && fp8 == 0)) &&
                      (one == 0 || t > 1);
                  layers_.push_back(wanted ? make_layer_entry({t, cp, ep, one, fp8, b, sp != 0,
                                                               static_cast<hw::Recompute>(rc)})
                                           : LayerEntry{});
                }
  // The networks of every layout of every GPU count searched.
  ParallelConfig fp8_par;
  fp8_par.fp8 = "hybrid";
  fp8_par.fp8_recipe = space_.fp8_recipe;
  amax_ = searched(space_.fp8, 1) && fp8_par.fp8_amax_reduction();
  std::vector<int> counts = space_.gpu_counts;
  counts.push_back(problem_.num_gpus);
  for (int n : counts)
    for (const Tpd& f : factorisations(n, m, space_.max_tensor_parallel))
      if (!nets_.count(cell_key(f.t, f.p, f.d)))
        nets_.emplace(cell_key(f.t, f.p, f.d), make_cell_net(f.t, f.p, f.d));
}

CostModel::LayerEntry CostModel::make_layer_entry(const LayerKey& k) const {
  const int t = k.t;
  ParallelConfig par;
  par.tensor_parallel = t;
  par.micro_batch_size = k.b;
  par.sequence_parallel = k.sp && t > 1;
  par.recompute = hw::recompute_name(k.rc);
  par.context_parallel = k.cp;
  if (k.cp > 1) par.cp_comm_type = space_.cp_comm_type;
  par.expert_parallel = k.ep;
  par.expert_tensor_parallel = k.etp1 ? 1 : t;
  par.fp8 = k.fp8 ? "hybrid" : "off";
  if (k.fp8) par.fp8_recipe = space_.fp8_recipe;
  par.tp_comm_overlap = space_.tp_comm_overlap;  // kept only with sequence parallelism
  const hw::WorkloadOptions wo = hw::workload_options(par, problem_.sim.flash_attention);
  const ModelShape& m = problem_.model;
  LayerEntry e;
  e.layer = hw::stage_costs_for(m, gpu_, wo, 1, 0, false, false);
  if (m.num_experts > 0) e.moe = hw::stage_costs_for(m, gpu_, wo, 0, 1, false, false);
  e.first = hw::stage_costs(m, gpu_, wo, 0, 0, true, false);
  e.last = hw::stage_costs(m, gpu_, wo, 0, 0, false, true);
  if (m.mtp_num_layers > 0) {
    e.loss = hw::stage_costs(m, gpu_, wo, 0, 0, hw::StageRole{false, true, false});
    e.mtp = hw::stage_costs(m, gpu_, wo, 0, 0, hw::StageRole{false, false, true});
  }
  // Delayed scaling's amax bytes as hwmodels lists them (e.last: the depths with the loss).
  auto amax = [](const hw::StageCosts& c, double* out) {
    const std::vector<hw::TpComm>* lists[2] = {&c.comm_f, &c.comm_b};
    for (int i = 0; i < 2; ++i)
      for (const hw::TpComm& tc : *lists[i])
        if (tc.group == hw::CommGroup::kAmax) out[i] += tc.bytes.value * tc.count;
  };
  amax(e.layer, e.amax);
  amax(e.moe, e.amax_moe);
  amax(e.last, e.amax_mtp);
  if ((t > 1 || k.cp > 1 || k.ep > 1) && !problem_.sim.free_communication) {
    // The groups as the DES lays them out: TP consecutive, CP over consecutive data ranks,
    // EP over the tensor-and-data ranks with expert TP fastest (expert TP t: consecutive data
    // ranks; expert TP 1: consecutive ranks).
    const hw::Topology topo(job_topology(problem_.profile, 1LL * t * k.cp * k.ep));
    hw::RankLayout lay;
    lay.tp = t;
    lay.dp = k.cp * k.ep;
    lay.gpus_per_node = topo.spec().node.gpus_per_node;
    lay.cp = k.cp;
    lay.ep = k.ep;
    lay.etp = k.etp1 ? 1 : t;
    hw::CommNetworks nets;
    nets.tp = hw::describe_group(topo, problem_.profile, lay.tp_group(0, 0));
    nets.cp = hw::describe_group(topo, problem_.profile, lay.cp_group(0, 0, 0));
    nets.ep = hw::describe_group(topo, problem_.profile, lay.ep_group(0, 0, 0));
    // What a pass waits for, as a lower bound: its TP collectives, the EP all-to-all's
    // bandwidth bound (the DES times it with flows on the routes, and a pairwise exchange across
    // nodes beats the alpha-beta line by 6% on two DGX H100 nodes: test
    // Search.BoundsHoldWithContextAndExpertParallelism) and the CP ring steps' bandwidth bound
    // (what of them outlasts the attention shows: hw::cp_ring_exposed).
    auto tp = [&](const hw::StageCosts& c, double* out, double* out_ep, double* out_cp) {
      const std::vector<hw::TpComm>* lists[4] = {&c.comm_f, &c.comm_b, &c.comm_w, &c.comm_r};
      for (int i = 0; i < 4; ++i) {
        std::vector<hw::TpComm> waited;
        TimePs ep = 0, cp = 0;
        for (const hw::TpComm& tc : *lists[i]) {
          if (tc.group == hw::CommGroup::kTp) waited.push_back(tc);
          if (tc.group == hw::CommGroup::kEp)
            ep += tc.count * hw::all_to_all_bandwidth_bound(tc.kind, tc.bytes, nets.ep);
          if (tc.group != hw::CommGroup::kCp) continue;
          // The CP ring's steps (under attention), or the waited all-gather / all-to-all forms.
          if (hw::is_cp_ring_step(tc))
            cp += tc.count * hw::send_recv_bandwidth_bound(tc.bytes, nets.cp);
          else if (tc.kind == hw::CollectiveKind::kAllToAll)
            ep += tc.count * hw::all_to_all_bandwidth_bound(tc.kind, tc.bytes, nets.cp);
          else
            ep += tc.count *
                  hw::collective_time(tc.kind, hw::CollectiveAlgo::kAuto, tc.bytes, nets.cp);
        }
        out[i] = ps_to_seconds(hw::tp_comm_time(waited, nets));
        out_ep[i] = ps_to_seconds(ep);
        if (out_cp != nullptr) out_cp[i] = ps_to_seconds(cp);
      }
    };
    tp(e.layer, e.tp, e.ep, e.cp);
    tp(e.moe, e.tp_moe, e.ep_moe, nullptr);
    tp(e.first, e.tp_first, e.ep_first, nullptr);
    tp(e.last, e.tp_last, e.ep_last, nullptr);
    if (m.mtp_num_layers > 0) {
      tp(e.loss, e.tp_loss, e.ep_loss, nullptr);
      tp(e.mtp, e.tp_mtp, e.ep_mtp, nullptr);
    }
  }
  return e;
}

CostModel::CellNet CostModel::make_cell_net(int t, int p, int d) const {
  CellNet net;
  if (problem_.sim.free_communication) return net;
  const hw::Topology topo(job_topology(problem_.profile, 1LL * t * p * d));
  const hw::RankLayout lay{t, p, d, topo.spec().node.gpus_per_node};
  if (d > 1) {
    const hw::GroupNetwork g = hw::describe_group(topo, problem_.profile, lay.dp_group(0, 0));
    net.dp_all_reduce = hw::collective_line(hw::CollectiveKind::kAllReduce, g);
    net.dp_reduce_scatter = hw::collective_line(hw::CollectiveKind::kReduceScatter, g);
    net.dp_all_gather = hw::collective_line(hw::CollectiveKind::kAllGather, g);
  }
  if (t > 1) {
    const hw::GroupNetwork g = hw::describe_group(topo, problem_.profile, lay.tp_group(0, 0));
    net.tp_all_gather = hw::collective_line(hw::CollectiveKind::kAllGather, g);
  }
  if (p > 1) {
    // The DES's point phase: route latency + one collective step, then the bytes at the
    // route's bottleneck (contention only slows it).
    const hw::PathInfo pi = topo.path_info(lay.gpu(0, 0, 0), lay.gpu(0, 0, 1));
    net.hop_alpha = ps_to_seconds(pi.latency + problem_.profile.collective_step_latency);
    net.hop_beta = 1.0 / pi.bottleneck.value;
    const hw::GroupNetwork ends =
        hw::describe_group(topo, problem_.profile, {lay.gpu(0, 0, 0), lay.gpu(0, 0, p - 1)});
    net.embedding_all_reduce = hw::collective_line(hw::CollectiveKind::kAllReduce, ends);
  }
  // MoE models: expert gradients and ZeRO-1/2 re-gathers of expert weights run over the
  // expert-DP group of each expert layout (where it is another group than the DP group).
  if (problem_.model.num_experts > 0) {
    net.expert.resize(eps_.size() * num_etp_);
    for (std::size_t ei = 0; ei < eps_.size(); ++ei)
      for (int one = 0; one < num_etp_; ++one) {
        hw::RankLayout el = lay;
        el.ep = eps_[ei];
        el.etp = one != 0 ? 1 : t;
        if ((t * d) % (el.ep * el.etp) != 0 || !el.expert_dp_differs() || el.expert_dp() <= 1)
          continue;
        const hw::GroupNetwork g =
            hw::describe_group(topo, problem_.profile, el.expert_dp_group(0, 0, 0));
        CellNet::ExpertNet& x = net.expert[ei * num_etp_ + one];
        x.all_reduce = hw::collective_line(hw::CollectiveKind::kAllReduce, g);
        x.reduce_scatter = hw::collective_line(hw::CollectiveKind::kReduceScatter, g);
        x.all_gather = hw::collective_line(hw::CollectiveKind::kAllGather, g);
      }
  }
  if (amax_ && t * d > 1)
    net.amax_all_reduce =
        hw::collective_line(hw::CollectiveKind::kAllReduce,
                            hw::describe_group(topo, problem_.profile, lay.stage_group(0)));
  return net;
}

const CostModel::LayerEntry& CostModel::layer_entry(const SearchConfig& c,
                                                    LayerEntry* scratch) const {
  auto at = [](const std::vector<int>& index, int v) {
    return v < static_cast<int>(index.size()) ? index[v] : -1;
  };
  const int ti = at(t_index_, c.t), bi = at(b_index_, c.micro_batch), ci = at(cp_index_, c.cp),
            ei = at(ep_index_, c.ep);
  const bool fp8_wanted =
      std::find(space_.fp8.begin(), space_.fp8.end(), int{c.fp8}) != space_.fp8.end();
  const bool etp_wanted = c.etp1 == 0 || (c.t > 1 && num_etp_ == 2);
  if (ti >= 0 && bi >= 0 && ci >= 0 && ei >= 0 && fp8_wanted && etp_wanted)
    return layers_[(((((static_cast<std::size_t>(ti) * num_cp_ + ci) * num_ep_ + ei) * num_etp_ +
                      c.etp1) *
                         num_fp8_ +
                     c.fp8) *
                        num_b_ +
                    bi) *
                       6 +
                   (c.sequence_parallel ? 3 : 0) + c.recompute];
  *scratch = make_layer_entry({c.t, c.cp, c.ep, c.etp1, c.fp8, c.micro_batch,
                               c.sequence_parallel != 0, static_cast<hw::Recompute>(c.recompute)});
  return *scratch;
}

const CostModel::CellNet& CostModel::cell_net(const SearchConfig& c, CellNet* scratch) const {
  // The DP group is Megatron's data-and-context group: cp * d ranks.
  const auto it = nets_.find(cell_key(c.t, c.p, c.cp * c.d));
  if (it != nets_.end()) return it->second;
  *scratch = make_cell_net(c.t, c.p, c.cp * c.d);
  return *scratch;
}

}  // namespace pw
