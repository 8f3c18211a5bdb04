// Optimizer step (with optional offload) and flow routing, with the symmetric-copy weights of the
// representative mode (IterationBuilder).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "hwmodels/memory.h"
#include "hwmodels/optimizer.h"
#include "sim/iteration_builder.h"

namespace pw::detail {
namespace {

using des::MemCategory;
using des::StreamKind;

struct Dsu {
  std::vector<std::uint32_t> parent;
  std::uint32_t find(std::uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(std::uint32_t a, std::uint32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

}  // namespace

void IterationBuilder::build_optimizer() {
  const Placement& pl = in_.schedule.placement;
  const int d = layout_.dp;
  const int zero = in_.parallel.zero_stage;
  for (int sim = 0; sim < static_cast<int>(out_.ranks.size()); ++sim) {
    const SimRank& r = out_.ranks[sim];
    double params = 0, expert = 0, layer_params = 0;
    for (int st = 0; st < pl.num_stages(); ++st)
      if (pl.stages[st].device == r.pr) {
        params += stage_params_[st];
        expert += stage_expert_params_[st];
        layer_params += stage_layer_params_[st];
      }
    const int ed = layout_.expert_dp();
    const double shard = zero >= 1 ? (params - expert) / d + expert / std::max(1, ed) : params;
    const hw::ModelStateBytes ms = hw::model_state_bytes(
        params, expert, zero, d, std::max(1, ed), in_.parallel.optimizer_offload, wo_.fp8,
        hw::grad_bytes_per_param(in_.parallel), layer_params);
    out_.graph.add_initial_memory(sim, MemCategory::kWeights, ms.weights.value);
    out_.graph.add_initial_memory(sim, MemCategory::kGrads, ms.gradients.value);
    out_.graph.add_initial_memory(sim, MemCategory::kOptimizer, ms.optimizer.value);
    std::int32_t opt_task = -1;
    if (!in_.parallel.optimizer_offload) {
      opt_task = add_compute(sim, hw::adam_step_time(gpu_, shard), 0, 0,
                             label(ActionKind::kOptStep, -1, -1));
    } else {
      // Deep Optimizer States: the share x of the update that runs on the GPU minimises the
      // longer of the two paths after the reduction (hwmodels/optimizer.h); the state prefetch
      // overlaps the backward.
      const double cpu = hw::require_cpu_adam_rate(in_.profile, "optimizer offload");
      const double x = hw::offload_split(in_.profile, shard, cpu, opt_.offload_gpu_share).gpu_share;
      out_.offload_gpu_share = x;
      const int host = -(r.gpu + 1);
      auto host_task = [&](double bytes, bool to_gpu, TimePs latency, ActionKind k) {
        const std::int32_t c = out_.graph.add_collective(false);
        out_.graph.add_phase(latency);
        if (bytes > 0) add_flow(to_gpu ? host : r.gpu, to_gpu ? r.gpu : host, bytes);
        return add_comm(sim, StreamKind::kHost, c, CommKind::kOffload, label(k, -1, -1));
      };
      const double state = x * shard * hw::kOffloadStateBytesPerParam;
      const std::int32_t prefetch = host_task(state, true, 0, ActionKind::kUnshard);
      out_.graph.add_effect(prefetch, {state, 0, 0, 0});
      out_.graph.set_mem_category(prefetch, MemCategory::kOptimizer);
      if (first_backward_[sim] >= 0) out_.graph.add_dep(first_backward_[sim], prefetch);
      const std::int32_t grads =
          host_task((1 - x) * shard * 2.0, false, 0, ActionKind::kReduceGrad);
      const std::int32_t cpu_update =
          host_task(0, false, seconds_to_ps((1 - x) * shard / cpu), ActionKind::kOptStep);
      const std::int32_t params_back =
          host_task((1 - x) * shard * 2.0, true, 0, ActionKind::kUnshard);
      out_.graph.add_dep(last_compute_[sim], grads);
      for (std::int32_t t : dp_tasks_[sim]) out_.graph.add_dep(t, grads);
      out_.graph.add_dep(grads, cpu_update);
      out_.graph.add_dep(cpu_update, params_back);
      opt_task = add_compute(sim, hw::adam_step_time(gpu_, x * shard), 0, 0,
                             label(ActionKind::kOptStep, -1, -1));
      out_.graph.add_dep(prefetch, opt_task);
      const std::int32_t write_back = host_task(state, false, 0, ActionKind::kReshard);
      out_.graph.add_effect(write_back, {0, -state, 0, 0});
      out_.graph.set_mem_category(write_back, MemCategory::kOptimizer);
      out_.graph.add_dep(opt_task, write_back);
      out_.graph.add_dep(params_back, write_back);
    }
    out_.graph.add_dep(last_compute_[sim], opt_task);
    for (std::int32_t t : dp_tasks_[sim]) out_.graph.add_dep(t, opt_task);
    for (std::int32_t t : step_waits_[sim]) out_.graph.add_dep(t, opt_task);
    // ZeRO-1/2: all-gather the updated bf16 parameters of each stage (with
    // overlap_param_gather at the start of the step instead: param_gathers).
    // The expert share over the expert-DP group (expert_gather_first), the rest over the DP
    // group.
    const bool expert_group = layout_.expert_dp_differs() && ed > 1;
    if (zero >= 1 && zero <= 2 && (d > 1 || expert_group) && !param_gather_overlapped()) {
      for (int st = 0; st < pl.num_stages(); ++st) {
        if (pl.stages[st].device != r.pr) continue;
        const double expert_bytes = expert_group ? stage_expert_params_[st] * 2.0 : 0;
        if (expert_bytes > 0) {
          const std::int32_t eg = expert_gather_first(sim, st, -1, expert_bytes, 1);
          out_.graph.add_dep(opt_task, eg);
        }
        if (d <= 1) continue;
        bool fresh = false;
        const std::int32_t c = keyed_collective({4, r.tr, r.pr, st}, &fresh);
        if (fresh)
          add_collective_phases(
              hw::CollectiveKind::kAllGather,
              stage_params_[st] * 2.0 -
                  (layout_.expert_dp_differs() ? stage_expert_params_[st] * 2.0 : 0),
              1, layout_.dp_group(r.tr, r.pr));
        const std::int32_t ag =
            add_comm(sim, StreamKind::kDp, c, CommKind::kDp, label(ActionKind::kUnshard, st, -1));
        out_.graph.add_dep(opt_task, ag);
      }
    }
  }
}

std::int32_t IterationBuilder::expert_gather_first(int sim, int stage, int part, double bytes,
                                                   int count) {
  const SimRank& r = out_.ranks[sim];
  const bool overlapped = param_gather_overlapped();
  bool fresh = false;
  const std::int32_t c = keyed_collective(
      {overlapped ? 18 : 17, layout_.expert_dp_index(r.tr, r.dr), r.pr, stage, part}, &fresh);
  if (fresh)
    add_collective_phases(hw::CollectiveKind::kAllGather, bytes, count,
                          layout_.expert_dp_group(r.tr, r.dr, r.pr));
  return add_comm(sim, overlapped ? StreamKind::kDpGather : StreamKind::kDp, c, CommKind::kDp,
                  label(ActionKind::kUnshard, stage, -1));
}

double IterationBuilder::dense_drop(int st) const {
  if (!layout_.expert_dp_differs() || stage_params_[st] <= 0) return 0;
  return stage_expert_params_[st] / stage_params_[st];
}

double IterationBuilder::expert_share(int st) const {
  return layout_.expert_dp() > 1 ? dense_drop(st) : 0;
}

bool IterationBuilder::param_gather_overlapped() const {
  const int zero = in_.parallel.zero_stage;
  return in_.parallel.overlap_param_gather && zero >= 1 && zero <= 2 && layout_.dp > 1;
}

IterationBuilder::ParamGathers IterationBuilder::param_gathers(int sim) {
  ParamGathers g;
  if (!param_gather_overlapped()) return g;
  const Placement& pl = in_.schedule.placement;
  const int S = pl.num_stages();
  const SimRank& r = out_.ranks[sim];
  g.first.assign(S, -1);
  g.rest.assign(S, -1);
  g.chunk.assign(S, -1);
  // The device's chunks in the order its first forwards run them (Megatron's model-chunk
  // order for interleaving and V shapes; BitPipe's two pipelines start their chunks in another
  // order, and chunk k's pre-hook dispatching chunk k + 1's gather must follow the passes).
  std::vector<std::uint8_t> seen(S, 0);
  auto add_chunk = [&](int st) {
    if (st < 0 || st >= S || seen[st] || pl.stages[st].device != r.pr) return;
    seen[st] = 1;
    g.chunk[st] = static_cast<int>(g.by_chunk.size());
    g.by_chunk.push_back(st);
  };
  for (int id = dep_.device_begin[r.pr]; id < dep_.device_begin[r.pr + 1]; ++id) {
    const Action& a = dep_.action[id];
    if (a.kind == ActionKind::kF || a.kind == ActionKind::kOverlapFB) add_chunk(a.stage);
  }
  for (int st = 0; st < S; ++st) add_chunk(st);
  g.aligned = hw::param_gather_aligned(layout_.pp, static_cast<int>(g.by_chunk.size()),
                                       in_.parallel.align_param_gather);
  const std::vector<int> group = layout_.dp_group(r.tr, r.pr);
  const bool expert_group = layout_.expert_dp_differs() && layout_.expert_dp() > 1;
  for (int st : g.by_chunk) {
    // The gradient buckets (parameters and gradients share the buffer's layout).
    const int nb = hw::grad_bucket_count(stage_params_[st], in_.parallel.zero_stage,
                                         in_.parallel.overlap_grad_reduce, layout_.dp, st == 0,
                                         in_.parallel.ddp_bucket_size);
    const double expert = layout_.expert_dp_differs() ? stage_expert_params_[st] * 2.0 : 0;
    const double bytes = (stage_params_[st] * 2.0 - expert) / nb;
    for (int part = 0; part < (nb > 1 ? 2 : 1); ++part) {
      // Each bucket's expert share first (the stream is in order: the dense task that the
      // forwards wait for ends after it).
      if (expert_group && expert > 0)
        expert_gather_first(sim, st, part, expert / nb, part == 0 ? 1 : nb - 1);
      bool fresh = false;
      const std::int32_t c = keyed_collective({10 + part, r.tr, r.pr, st}, &fresh);
      if (fresh)
        add_collective_phases(hw::CollectiveKind::kAllGather, bytes, part == 0 ? 1 : nb - 1, group);
      const std::int32_t tk = add_comm(sim, StreamKind::kDpGather, c, CommKind::kDp,
                                       label(ActionKind::kUnshard, st, -1));
      (part == 0 ? g.first : g.rest)[st] = tk;
    }
  }
  return g;
}

// Full mode: plain routes. Representative mode: the links of a route are folded onto one
// canonical link per orbit of the tensor/data-parallel translations, and each hop carries the
// number of translated copies of the flow that cross that canonical link, so the weighted
// max-min sharing of the representatives equals the full system's (whose copies all run at the
// same rate by symmetry).
void IterationBuilder::resolve_routes() {
  const std::vector<double>& topo_cap = topo_.link_capacities();
  const auto base = static_cast<std::int32_t>(topo_cap.size());
  out_.link_capacity = topo_cap;
  const double pcie = in_.profile.node.pcie.effective().value;
  for (std::size_t s = 0; s < out_.ranks.size(); ++s) {
    out_.link_capacity.push_back(pcie);  // host -> GPU
    out_.link_capacity.push_back(pcie);  // GPU -> host
  }
  const int t = layout_.tp, d = layout_.dp;
  auto image = [&](int gpu, int a, int b) {
    const int tr = gpu % t, dr = (gpu / t) % d, pr = gpu / (t * d);
    return layout_.gpu((tr + a) % t, (dr + b) % d, pr);
  };
  const int G = opt_.representative ? t * d : 1;
  std::vector<std::vector<std::vector<hw::LinkId>>> routes(pairs_.size());
  Dsu dsu;
  dsu.parent.resize(topo_cap.size());
  std::iota(dsu.parent.begin(), dsu.parent.end(), 0u);
  for (std::size_t pi = 0; pi < pairs_.size(); ++pi) {
    const auto [src, dst] = pairs_[pi];
    if (src < 0 || dst < 0) continue;
    routes[pi].resize(G);
    for (int g = 0; g < G; ++g) {
      topo_.route(image(src, g % t, g / t), image(dst, g % t, g / t), &routes[pi][g]);
      if (routes[pi][g].size() != routes[pi][0].size()) continue;
      for (std::size_t h = 0; h < routes[pi][0].size(); ++h)
        dsu.unite(routes[pi][0][h], routes[pi][g][h]);
    }
  }
  std::vector<std::vector<des::RouteHop>> hops(pairs_.size());
  std::vector<double> bottleneck(pairs_.size(), 0);
  for (std::size_t pi = 0; pi < pairs_.size(); ++pi) {
    const auto [src, dst] = pairs_[pi];
    if (src < 0 || dst < 0) {
      const int sim = sim_of_gpu_[src < 0 ? -src - 1 : -dst - 1];
      hops[pi].push_back({base + 2 * sim + (src < 0 ? 0 : 1), 1.0f});
      bottleneck[pi] = pcie;
      continue;
    }
    const auto& r0 = routes[pi][0];
    double bn = 0;
    for (std::size_t h = 0; h < r0.size(); ++h) {
      bn = bn == 0 ? topo_cap[r0[h]] : std::min(bn, topo_cap[r0[h]]);
      std::uint32_t link = dsu.find(r0[h]);
      int copies = 0;
      for (int g = 0; g < G; ++g)
        copies += routes[pi][g].size() == r0.size() && routes[pi][g][h] == link;
      if (copies == 0) {
        link = r0[h];
        for (int g = 0; g < G; ++g)
          copies += routes[pi][g].size() == r0.size() && routes[pi][g][h] == link;
      }
      auto it = std::find_if(hops[pi].begin(), hops[pi].end(), [&](const des::RouteHop& x) {
        return x.link == static_cast<std::int32_t>(link);
      });
      if (it != hops[pi].end()) {
        it->weight += static_cast<float>(copies);
      } else {
        hops[pi].push_back({static_cast<std::int32_t>(link), static_cast<float>(copies)});
      }
    }
    bottleneck[pi] = bn;
  }
  // Other jobs' traffic (every GPU is simulated then: the topology is not symmetric).
  if (!opt_.free_communication)
    for (const auto& [src, dst] : in_.topology.background_flows) {
      std::vector<hw::LinkId> links;
      topo_.route(src, dst, &links);
      std::vector<des::RouteHop> h;
      for (hw::LinkId l : links) h.push_back({static_cast<std::int32_t>(l), 1.0f});
      const std::int32_t b = out_.graph.add_route(h);
      out_.graph.add_background_flow(b, b + static_cast<std::int32_t>(h.size()));
    }
  // One stored route per (source, destination) pair, shared by all its flows; a flow given in
  // seconds at step bandwidth moves that many seconds at the route's bottleneck.
  std::vector<std::int32_t> route_begin(pairs_.size()), route_end(pairs_.size());
  for (std::size_t pi = 0; pi < pairs_.size(); ++pi) {
    route_begin[pi] = out_.graph.add_route(hops[pi]);
    route_end[pi] = route_begin[pi] + static_cast<std::int32_t>(hops[pi].size());
  }
  out_.graph.resolve_pending_flows(route_begin, route_end, bottleneck);
}

}  // namespace pw::detail
