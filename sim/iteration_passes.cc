// The passes, PP transfers, DP reduction and optimizer step of one iteration (IterationBuilder).
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "hwmodels/memory.h"
#include "sim/iteration_builder.h"

namespace pw::detail {
namespace {

using des::MemCategory;
using des::StreamKind;

// What one action costs on one TP rank: compute time, TP collectives, activation memory.
struct PassCost {
  TimePs dur = 0;
  std::vector<hw::TpComm> comms;
  double mem_start = 0, mem_end = 0;
  double buffer = 0;  ///< recompute working memory held during the pass
  /// The workload model's passes the action runs (F; B with its W and inline recompute; ...):
  /// time, the part of it the part's TP collectives can run under (tp_comm_overlap), and those
  /// collectives.
  struct Part {
    TimePs dur = 0, hide = 0;
    const std::vector<hw::TpComm>* comms = nullptr;
    TimePs attn = 0;  ///< of dur, the attention core
  };
  std::vector<Part> parts;
  std::vector<hw::TpComm> by_group[4];  ///< comms by hw::CommGroup, CP's ring steps apart
  /// Context-parallel rings (hw::CpComm::kP2p), one per workload pass that runs attention (F;
  /// B and an inline recompute each their own): the pass's attention core, which runs in cp
  /// blocks after the rest of the action (dur and parts exclude it), and its send/recv steps.
  struct Ring {
    TimePs attn = 0;
    std::vector<hw::TpComm> steps;
  };
  std::vector<Ring> rings;
};

void append(std::vector<hw::TpComm>* out, const std::vector<hw::TpComm>& v) {
  out->insert(out->end(), v.begin(), v.end());
}

}  // namespace

void IterationBuilder::build_passes() {
  const Placement& pl = in_.schedule.placement;
  const int S = pl.num_stages();
  const bool zero3_any = in_.parallel.zero_stage == 3 && layout_.dp > 1;
  const bool zero3 = zero3_any && in_.parallel.zero3_gather == "stage";  // per sweep
  const bool zero3_layer = zero3_any && !zero3;  // by layer or by tensor: every pass gathers
  // ZeRO-2/3 reduce-scatter every backward's weight gradients (Megatron-FSDP: "accumulated during
  // every backward pass"; DeepSpeed: every micro-step), not only the last microbatch's.
  const bool reduce_every = in_.parallel.zero_stage >= 2 && layout_.dp > 1;
  const bool inline_r = !has_recompute_actions_;
  const bool overlap_tp = in_.parallel.tp_comm_overlap && layout_.tp > 1;
  auto cost_of = [&](const Action& a) {
    PassCost pc;
    auto backward = [&](int st, bool with_w) {
      const hw::StageCosts& c = costs_[st];
      pc.dur += c.b + (with_w ? c.w : 0) + (inline_r ? c.r : 0);
      pc.parts.push_back({c.b, c.hide_b, &c.comm_b, c.attn_b});
      if (with_w) pc.parts.push_back({c.w, c.hide_w, &c.comm_w, c.attn_w});
      if (inline_r) pc.parts.push_back({c.r, c.hide_r, &c.comm_r, c.attn_r});
      append(&pc.comms, c.comm_b);
      if (with_w) append(&pc.comms, c.comm_w);
      if (inline_r) append(&pc.comms, c.comm_r);
      // Megatron recomputes one layer at a time inside the backward: one layer's re-created
      // activations are working memory for the duration of the pass.
      const StageInfo& si = in_.schedule.placement.stages[st];
      if (inline_r) pc.buffer += c.m_r.value / std::max(1, si.layer_end - si.layer_begin);
      pc.mem_end -= c.m_b.value + (inline_r ? 0.0 : c.m_r.value) - (with_w ? 0.0 : c.m_w.value);
    };
    const int st = std::max<int>(a.stage, 0);
    switch (a.kind) {
      case ActionKind::kF:
        pc.dur = costs_[st].f;
        pc.parts.push_back(
            {costs_[st].f, costs_[st].hide_f, &costs_[st].comm_f, costs_[st].attn_f});
        pc.comms = costs_[st].comm_f;
        pc.mem_start = costs_[st].m_b.value;
        break;
      case ActionKind::kB:
        backward(st, false);
        break;
      case ActionKind::kBW:
        backward(st, true);
        break;
      case ActionKind::kW:
        pc.dur = costs_[st].w;
        pc.parts.push_back(
            {costs_[st].w, costs_[st].hide_w, &costs_[st].comm_w, costs_[st].attn_w});
        pc.comms = costs_[st].comm_w;
        pc.mem_end = -costs_[st].m_w.value;
        break;
      case ActionKind::kR:
        pc.dur = costs_[st].r;
        pc.parts.push_back(
            {costs_[st].r, costs_[st].hide_r, &costs_[st].comm_r, costs_[st].attn_r});
        pc.comms = costs_[st].comm_r;
        pc.mem_start = costs_[st].m_r.value;
        break;
      case ActionKind::kOverlapFB: {
        pc.dur = costs_[st].f;
        pc.parts.push_back(
            {costs_[st].f, costs_[st].hide_f, &costs_[st].comm_f, costs_[st].attn_f});
        pc.comms = costs_[st].comm_f;
        const double m_f = costs_[st].m_b.value;
        backward(a.stage2, true);
        pc.mem_start += m_f;
        break;
      }
      default:
        break;  // explicit communication / markers: the simulator models those itself
    }
    for (const hw::TpComm& c : pc.comms)
      if (!hw::is_cp_ring_step(c)) pc.by_group[static_cast<int>(c.group)].push_back(c);
    if (layout_.cp > 1)
      for (PassCost::Part& part : pc.parts) {
        PassCost::Ring ring{part.attn, {}};
        for (const hw::TpComm& c : *part.comms)
          if (hw::is_cp_ring_step(c)) ring.steps.push_back(c);
        if (ring.steps.empty()) continue;
        part.dur -= part.attn;
        pc.dur -= part.attn;
        pc.rings.push_back(std::move(ring));
      }
    return pc;
  };
  // An action costs the same on every rank of its pipeline rank: priced once per action.
  std::vector<PassCost> cost_by_action(dep_.size());
  std::vector<std::uint8_t> priced(dep_.size(), 0);
  auto cached_cost = [&](int id) -> const PassCost& {
    if (!priced[id]) {
      cost_by_action[id] = cost_of(dep_.action[id]);
      priced[id] = 1;
    }
    return cost_by_action[id];
  };
  // Per pipeline rank, its GPUs (the FP8 amax reduction group), built when a pass first needs it.
  std::vector<std::vector<int>> stage_groups(layout_.pp);

  for (int sim = 0; sim < static_cast<int>(out_.ranks.size()); ++sim) {
    const SimRank& r = out_.ranks[sim];
    const int begin = dep_.device_begin[r.pr], end = dep_.device_begin[r.pr + 1];
    // The last backward (W or BW) of each stage carries the gradient buckets.
    std::vector<int> last_bwd(S, -1);
    for (int id = begin; id < end; ++id) {
      const Action& a = dep_.action[id];
      if (a.kind == ActionKind::kW || a.kind == ActionKind::kBW) last_bwd[a.stage] = id;
      if (a.kind == ActionKind::kOverlapFB) last_bwd[a.stage2] = id;
    }
    const ParamGathers pg = param_gathers(sim);
    std::vector<std::uint8_t> forward_seen(pg.first.empty() ? 0 : S, 0);
    std::int32_t prev_last = -1;
    int sweep_stage = -1, sweep = 0;
    std::int32_t sweep_first = -1, prev_sweep_first = -1;
    // Where the previous pass started (the end of the one before it): a pass's first layer is
    // gathered from then on, under the previous pass (ZeRO-3 by layer).
    std::int32_t prev_start = -1, prev_prev_last = -1;
    auto close_sweep = [&] {
      if (sweep_stage < 0) return;
      const double w = stage_params_[sweep_stage] * 2.0;
      const std::int32_t rel = add_compute(
          sim, 0, 0, -w, label(ActionKind::kReshard, sweep_stage, -1), MemCategory::kBuffers);
      if (prev_last >= 0) out_.graph.add_dep(prev_last, rel);
    };
    for (int id = begin; id < end; ++id) {
      const Action& a = dep_.action[id];
      const PassCost& pc = cached_cost(id);
      const bool is_pass = is_compute(a.kind);
      std::int32_t gather = -1;
      if (zero3 && is_pass && a.stage != sweep_stage) {
        close_sweep();
        // ZeRO-3: gather this stage's weights once per sweep (one ahead of use at most).
        // The expert share over the expert-DP group first, on the same in-order stream.
        const double x = expert_share(a.stage);
        if (x > 0) {
          bool fresh = false;
          const std::int32_t c =
              keyed_collective({19, layout_.expert_dp_index(r.tr, r.dr), r.pr, sweep}, &fresh);
          if (fresh)
            add_collective_phases(hw::CollectiveKind::kAllGather, stage_params_[a.stage] * 2.0 * x,
                                  1, layout_.expert_dp_group(r.tr, r.dr, r.pr));
          const std::int32_t eg = add_comm(sim, StreamKind::kDpGather, c, CommKind::kDp,
                                           label(ActionKind::kUnshard, a.stage, a.microbatch));
          if (prev_sweep_first >= 0) out_.graph.add_dep(prev_sweep_first, eg);
        }
        bool fresh = false;
        const std::int32_t c = keyed_collective({1, r.tr, r.pr, sweep}, &fresh);
        if (fresh)
          add_collective_phases(hw::CollectiveKind::kAllGather,
                                stage_params_[a.stage] * 2.0 * (1 - dense_drop(a.stage)), 1,
                                layout_.dp_group(r.tr, r.pr));
        gather = add_comm(sim, StreamKind::kDpGather, c, CommKind::kDp,
                          label(ActionKind::kUnshard, a.stage, a.microbatch));
        out_.graph.add_effect(gather, {stage_params_[a.stage] * 2.0, 0, 0, 0});
        out_.graph.set_mem_category(gather, MemCategory::kBuffers);
        if (prev_sweep_first >= 0) out_.graph.add_dep(prev_sweep_first, gather);
        prev_sweep_first = sweep_first;
        sweep_stage = a.stage;
        ++sweep;
        sweep_first = -1;
      }
      // ZeRO-3 by layer: every pass that reads its weights (W reads only activations and output
      // gradients) all-gathers them layer by layer: the first layer prefetched under the
      // previous pass, the rest under this one's compute (each layer's while the one before
      // runs), two layers' weights held while it runs.
      std::int32_t layer_gather = -1, layer_rest = -1, layer_start = -1;
      double gathered = 0;  // working memory of the gathered layers
      if (zero3_layer && is_pass && a.kind != ActionKind::kW) {
        // Per stage of the pass: its gathers (hw::zero3_pass_gathers), the first under the
        // previous pass, the rest beside this one; two of the largest held while it runs.
        std::array<const hw::Zero3PassGathers*, 2> runs{};
        int n_runs = 0, rest_count = 0;
        for (int st : {int{a.stage}, a.kind == ActionKind::kOverlapFB ? int{a.stage2} : -1}) {
          if (st < 0 || stage_gathers_[st].first_bytes <= 0) continue;
          const hw::Zero3PassGathers& g = stage_gathers_[st];
          runs[n_runs++] = &g;
          rest_count += g.count() - 1;
          gathered += 2 * g.largest_bytes();
        }
        // Each gather's expert share (expert_share: the stage's expert fraction of its bytes)
        // over the expert-DP group, before the rest over the DP group on the same stream.
        std::array<double, 2> share{}, keep{};
        for (int k = 0; k < n_runs; ++k) {
          const int st = k == 0 ? int{a.stage} : int{a.stage2};
          share[k] = expert_share(st);
          keep[k] = 1 - dense_drop(st);
        }
        const bool expert = share[0] > 0 || share[1] > 0;
        auto all_gather = [&](int key, bool first, bool of_experts) {
          bool fresh = false;
          const std::int32_t c =
              of_experts ? keyed_collective(
                               {key + 13, layout_.expert_dp_index(r.tr, r.dr), r.pr, id}, &fresh)
                         : keyed_collective({key, r.tr, r.pr, id}, &fresh);
          if (fresh) {
            const std::vector<int> group = of_experts ? layout_.expert_dp_group(r.tr, r.dr, r.pr)
                                                      : layout_.dp_group(r.tr, r.pr);
            for (int k = 0; k < n_runs; ++k) {
              const double f = of_experts ? share[k] : keep[k];
              if (f <= 0) continue;
              if (first) {
                add_collective_phases(hw::CollectiveKind::kAllGather, runs[k]->first_bytes * f, 1,
                                      group);
                continue;
              }
              for (const hw::GatherRun& g : runs[k]->rest)
                add_collective_phases(hw::CollectiveKind::kAllGather, g.bytes * f, g.count, group);
            }
          }
          return add_comm(sim, StreamKind::kDpGather, c, CommKind::kDp,
                          label(ActionKind::kUnshard, a.stage, a.microbatch));
        };
        if (expert) {
          const std::int32_t eg = all_gather(7, true, true);
          if (prev_start >= 0) out_.graph.add_dep(prev_start, eg);
        }
        layer_gather = all_gather(7, true, false);
        if (prev_start >= 0) out_.graph.add_dep(prev_start, layer_gather);
        if (rest_count > 0) {
          if (expert) out_.graph.add_dep(layer_gather, all_gather(8, false, true));
          layer_rest = all_gather(8, false, false);
          out_.graph.add_dep(layer_gather, layer_rest);
          // Before the pass's compute: the compute stream runs its tasks in the order made.
          layer_start = add_compute(sim, 0, 0, 0, a);
          out_.graph.add_dep(layer_start, layer_rest);
        }
      }
      // overlap_param_gather: the chunk's first forward runs its pre-hook (a zero-length task
      // that starts once the pass's inputs are ready), which waits for the chunk's first
      // bucket; the pass ends when its compute and the chunk's last bucket have.
      std::int32_t hook = -1;
      const bool forward = a.kind == ActionKind::kF || a.kind == ActionKind::kOverlapFB;
      if (!pg.first.empty() && forward && !forward_seen[a.stage]) {
        forward_seen[a.stage] = 1;
        hook = add_compute(sim, 0, 0, 0, a);
        if (!pg.aligned) out_.graph.add_dep(hook, pg.first[a.stage]);
        // Aligned, the first two chunks' gathers start with the step and chunk k's first
        // forward dispatches chunk k + 1's.
        const int next = pg.aligned ? pg.chunk[a.stage] + 1 : -1;
        if (next >= 2 && next < static_cast<int>(pg.by_chunk.size()))
          out_.graph.add_dep(hook, pg.first[pg.by_chunk[next]]);
      }
      PassTasks pt;
      const int bwd_stage = a.kind == ActionKind::kOverlapFB ? a.stage2 : a.stage;
      const bool split = layout_.dp > 1 && is_pass && id == last_bwd[std::max(bwd_stage, 0)];
      bool tp_done = false;  // the overlapped path ran the TP collectives beside the compute
      if (split) {
        const int nb = hw::grad_bucket_count(stage_params_[bwd_stage], in_.parallel.zero_stage,
                                             in_.parallel.overlap_grad_reduce, layout_.dp,
                                             bwd_stage == 0, in_.parallel.ddp_bucket_size);
        auto& buckets = bucket_tasks_[static_cast<std::size_t>(sim) * S + bwd_stage];
        for (int k = 0; k < nb; ++k) {
          const TimePs part = pc.dur / nb + (k == nb - 1 ? pc.dur % nb : 0);
          const std::int32_t tk =
              add_compute(sim, part, k == 0 ? pc.mem_start : 0, k == nb - 1 ? pc.mem_end : 0, a);
          out_.graph.add_effect(tk, {0, 0, k == 0 ? pc.buffer : 0, k == nb - 1 ? -pc.buffer : 0});
          if (k > 0) out_.graph.add_dep(buckets.back(), tk);
          buckets.push_back(tk);
        }
        pt.first = buckets.front();
        pt.last = buckets.back();
      } else if (overlap_tp && is_pass) {
        // tp_comm_overlap, per workload pass: the part's TP collectives start when the compute
        // that cannot hide them has run and go on beside the rest (its paired GEMMs); the part
        // ends when both have (hwmodels::overlapped_pass_time, the screen's bound).
        std::int32_t prev = -1;
        for (std::size_t k = 0; k < pc.parts.size(); ++k) {
          const PassCost::Part& part = pc.parts[k];
          const TimePs hide = std::min(part.hide, part.dur);
          const std::int32_t x = add_compute(sim, part.dur - hide, k == 0 ? pc.mem_start : 0, 0, a);
          if (prev >= 0) out_.graph.add_dep(prev, x);
          if (pt.first < 0) pt.first = x;
          const std::int32_t y = add_compute(sim, hide, 0, 0, a);
          out_.graph.add_dep(x, y);
          prev = y;
          std::vector<hw::TpComm> tp_comms;
          for (const hw::TpComm& c : *part.comms)
            if (c.group == hw::CommGroup::kTp && c.bytes.value * c.count > 0) tp_comms.push_back(c);
          if (tp_comms.empty()) continue;
          bool fresh = false;
          const std::int32_t c = keyed_collective({2, r.dr, r.pr, id, static_cast<int>(k)}, &fresh);
          if (fresh)
            for (const hw::TpComm& tc : tp_comms)
              add_collective_phases(tc.kind, tc.bytes.value, tc.count,
                                    layout_.tp_group(r.dr, r.pr));
          const std::int32_t tk = add_comm(sim, StreamKind::kTp, c, CommKind::kTp, a);
          out_.graph.add_dep(x, tk);
          const std::int32_t join = add_compute(sim, 0, 0, 0, a);
          out_.graph.add_dep(y, join);
          out_.graph.add_dep(tk, join);
          prev = join;
        }
        pt.last = prev;
        out_.graph.add_effect(pt.last, {0, pc.mem_end, 0, -pc.buffer});
        out_.graph.add_effect(pt.first, {0, 0, pc.buffer, 0});
        tp_done = true;
      } else {
        pt.first = pt.last = add_compute(sim, pc.dur, pc.mem_start, pc.mem_end, a);
        out_.graph.add_effect(pt.first, {0, 0, pc.buffer, -pc.buffer});
      }
      if (!pc.rings.empty()) {
        // The context-parallel rings (hw::cp_ring_exposed), one after another after the rest
        // of the action: each runs its attention in cp blocks; step k sends the keys and values
        // block k + 1 needs while block k runs, after step k - 1 (it forwards what that step
        // received). The action's end effects move to its last block.
        const int cp = layout_.cp;
        const std::vector<int> group = layout_.cp_group(r.tr, r.dr, r.pr);
        std::int32_t block = pt.last;
        for (std::size_t ri = 0; ri < pc.rings.size(); ++ri) {
          const PassCost::Ring& ring = pc.rings[ri];
          std::int32_t step = -1;
          const std::int32_t start = block;
          for (int k = 0; k < cp; ++k) {
            const std::int32_t next =
                add_compute(sim, ring.attn / cp + (k == cp - 1 ? ring.attn % cp : 0), 0, 0, a);
            out_.graph.add_dep(block, next);
            if (step >= 0) out_.graph.add_dep(step, next);
            if (k < cp - 1) {
              bool fresh = false;
              const std::int32_t c =
                  keyed_collective({5, group.front(), id, static_cast<int>(ri), k}, &fresh);
              if (fresh) add_ring_step_phase(ring.steps, cp - 1, group);
              const std::int32_t x = add_comm(sim, StreamKind::kTp, c, CommKind::kCp, a);
              out_.graph.add_dep(k == 0 ? start : step, x);
              step = x;
            }
            block = next;
          }
        }
        out_.graph.add_effect(pt.last, {0, -pc.mem_end, 0, pc.buffer});
        out_.graph.add_effect(block, {0, pc.mem_end, 0, -pc.buffer});
        pt.last = block;
      }
      if (gather >= 0) out_.graph.add_dep(gather, pt.first);
      if (layer_gather >= 0) {
        out_.graph.add_dep(layer_gather, pt.first);
        out_.graph.add_effect(pt.first, {0, 0, gathered, 0});
        // The pass ends when its compute and its last layer's gather have. The rest are
        // gathered as the pass runs (each layer's pre-hook issues the next one's), so from the
        // pass's start: its zero-length start task takes the pass's inputs (the device's
        // previous action, the data from its neighbour) whether the schedule lists the RECV or
        // the simulator adds it. It used to wait for the previous action alone, and a lowered
        // plan (RECV listed) and the planner's schedule (RECV added) differed.
        const std::int32_t join = add_compute(sim, 0, 0, 0, a);
        out_.graph.add_dep(pt.last, join);
        if (layer_rest >= 0) out_.graph.add_dep(layer_rest, join);
        out_.graph.add_effect(join, {0, 0, 0, -gathered});
        pt.last = join;
        if (layer_start >= 0) {
          out_.graph.add_dep(layer_start, pt.first);
          pt.first = layer_start;
        }
      }
      if (hook >= 0) {
        out_.graph.add_dep(hook, pt.first);
        if (pg.first[a.stage] >= 0) out_.graph.add_dep(pg.first[a.stage], pt.first);
        if (pg.rest[a.stage] >= 0) {
          const std::int32_t join = add_compute(sim, 0, 0, 0, a);
          out_.graph.add_dep(pt.last, join);
          out_.graph.add_dep(pg.rest[a.stage], join);
          pt.last = join;
        }
        pt.first = hook;  // the pass's inputs arrive at its pre-hook
      }
      if (sweep_first < 0 && is_pass) sweep_first = pt.first;
      if (prev_last >= 0) out_.graph.add_dep(prev_last, pt.first);
      // The pass's other collectives by group: TP, CP (all-gather and Ulysses forms) and EP ones
      // follow the compute on the TP stream (they sit between the pass's kernels: the keys and
      // values are gathered before attention, an EP all-to-all between the router and the
      // experts; nothing overlaps them).
      const auto& by_group = pc.by_group;
      auto group_collective = [&](hw::CommGroup g, int key, const std::vector<int>& members) {
        bool fresh = false;
        const std::int32_t c = keyed_collective({key, members.front(), id}, &fresh);
        if (fresh)
          for (const hw::TpComm& tc : by_group[static_cast<int>(g)])
            add_collective_phases(tc.kind, tc.bytes.value, tc.count, members);
        return c;
      };
      double tp_bytes = 0;
      for (const hw::TpComm& c : by_group[0]) tp_bytes += c.bytes.value * c.count;
      if (layout_.tp > 1 && tp_bytes > 0 && !tp_done) {
        bool fresh = false;
        const std::int32_t c = keyed_collective({2, r.dr, r.pr, id}, &fresh);
        if (fresh)
          for (const hw::TpComm& tc : by_group[0])
            add_collective_phases(tc.kind, tc.bytes.value, tc.count, layout_.tp_group(r.dr, r.pr));
        const std::int32_t tk = add_comm(sim, StreamKind::kTp, c, CommKind::kTp, a);
        out_.graph.add_dep(pt.last, tk);
        pt.last = tk;
      }
      // The waited CP forms, then the EP all-to-all: each after what came before it.
      auto waited = [&](hw::CommGroup g, int key, const std::vector<int>& members, CommKind k) {
        if (by_group[static_cast<int>(g)].empty()) return;
        const std::int32_t tk =
            add_comm(sim, StreamKind::kTp, group_collective(g, key, members), k, a);
        out_.graph.add_dep(pt.last, tk);
        pt.last = tk;
      };
      if (layout_.cp > 1)
        waited(hw::CommGroup::kCp, 11, layout_.cp_group(r.tr, r.dr, r.pr), CommKind::kCp);
      if (layout_.ep > 1)
        waited(hw::CommGroup::kEp, 6, layout_.ep_group(r.tr, r.dr, r.pr), CommKind::kEp);
      // Delayed scaling's amax all-reduce at the end of the chunk's forward (its fp8_autocast's
      // exit) and of its backward (the first FP8 module's), over the stage's tensor-, data- and
      // context-parallel ranks; the compute stream waits for it (Transformer Engine reduces
      // with async_op=False). Counted with the data-parallel communication.
      if (layout_.tp * layout_.dp > 1 &&
          !by_group[static_cast<int>(hw::CommGroup::kAmax)].empty()) {
        std::vector<int>& members = stage_groups[r.pr];
        if (members.empty()) members = layout_.stage_group(r.pr);
        waited(hw::CommGroup::kAmax, 14, members, CommKind::kDp);
      }
      pass_[out_.action_slot(sim, id)] = pt;
      if (is_pass) {
        const int done = a.kind == ActionKind::kOverlapFB ? a.stage2 : a.stage;
        if (done >= 0 && id == last_bwd[done])
          stage_grads_ready_[static_cast<std::size_t>(sim) * S + done] = pt.last;
      }
      const int grad_stage = a.kind == ActionKind::kW || a.kind == ActionKind::kBW ? int{a.stage}
                             : a.kind == ActionKind::kOverlapFB                    ? int{a.stage2}
                                                                                   : -1;
      if (reduce_every && grad_stage >= 0 && id != last_bwd[grad_stage]) {
        // The last one is bucketed with the other stages' (build_data_parallel); the expert
        // share over the expert-DP group, as there.
        const double gb = hw::grad_bytes_per_param(in_.parallel);
        const double expert =
            layout_.expert_dp_differs() ? stage_expert_params_[grad_stage] * gb : 0;
        for (int part = expert > 0 && layout_.expert_dp() > 1 ? 0 : 1; part < 2; ++part) {
          bool fresh = false;
          const std::int32_t c =
              part == 0
                  ? keyed_collective({16, layout_.expert_dp_index(r.tr, r.dr), r.pr, id}, &fresh)
                  : keyed_collective({9, r.tr, r.pr, id}, &fresh);
          if (fresh)
            add_collective_phases(hw::CollectiveKind::kReduceScatter,
                                  part == 0 ? expert : stage_params_[grad_stage] * gb - expert, 1,
                                  part == 0 ? layout_.expert_dp_group(r.tr, r.dr, r.pr)
                                            : layout_.dp_group(r.tr, r.pr));
          const std::int32_t tk =
              add_comm(sim, StreamKind::kDp, c, CommKind::kDp,
                       label(ActionKind::kReduceGrad, grad_stage, a.microbatch));
          out_.graph.add_dep(pt.last, tk);
          dp_tasks_[sim].push_back(tk);
        }
      }
      prev_last = pt.last;
      if (is_pass) {
        prev_start = prev_prev_last;
        prev_prev_last = pt.last;
      }
      if (first_backward_[sim] < 0 && (a.kind == ActionKind::kB || a.kind == ActionKind::kBW ||
                                       a.kind == ActionKind::kOverlapFB))
        first_backward_[sim] = pt.first;
    }
    close_sweep();
    last_compute_[sim] = prev_last;
  }
}

void IterationBuilder::build_data_parallel() {
  const Placement& pl = in_.schedule.placement;
  const int S = pl.num_stages();
  bool replicated = false;
  for (const std::vector<int>& c : stage_copies_) replicated |= !c.empty();
  // Expert gradients reduce over the expert-data-parallel group (Megatron's expert buffers),
  // the rest over the DP group.
  const bool expert_split = layout_.expert_dp_differs();
  if (layout_.dp <= 1 && !replicated && !(expert_split && layout_.expert_dp() > 1)) return;
  const hw::CollectiveKind kind = in_.parallel.zero_stage == 0 ? hw::CollectiveKind::kAllReduce
                                                               : hw::CollectiveKind::kReduceScatter;
  for (int sim = 0; sim < static_cast<int>(out_.ranks.size()); ++sim) {
    const SimRank& r = out_.ranks[sim];
    std::vector<int> stages;
    for (int st = 0; st < S; ++st)
      if (pl.stages[st].device == r.pr) stages.push_back(st);
    // Reduce in the order the stages finish their backward (in-order DP stream).
    auto ready_at = [&](int st) {
      const auto& b = bucket_tasks_[static_cast<std::size_t>(sim) * S + st];
      return b.empty() ? out_.graph.size() : static_cast<std::size_t>(b.back());
    };
    std::stable_sort(stages.begin(), stages.end(),
                     [&](int a, int b) { return ready_at(a) < ready_at(b); });
    // With copies across pipelines, the stream holds the copies' all-reduces, which pair
    // devices that finish their chunks in different orders: every device takes its chunks from
    // the last layers to the first (the backward's direction), one order for all, or two
    // devices would each wait in their stream for the collective the other has queued behind.
    if (replicated)
      std::stable_sort(stages.begin(), stages.end(),
                       [&](int a, int b) { return pl.stages[a].index > pl.stages[b].index; });
    for (int st : stages) {
      const double grad = stage_params_[st] * hw::grad_bytes_per_param(in_.parallel);
      std::int32_t pair = -1;
      if (!stage_copies_[st].empty()) {
        // The copies' all-reduce (one collective per (tensor rank, replica, layer range)), after
        // this copy's last backward; the sum is what the DP reduction then reduces.
        bool fresh = false;
        const std::int32_t c = keyed_collective({13, r.tr, r.dr, pl.stages[st].index}, &fresh);
        if (fresh) {
          std::vector<int> group;
          for (int dev : stage_copies_[st]) group.push_back(layout_.gpu(r.tr, r.dr, dev));
          add_collective_phases(hw::CollectiveKind::kAllReduce, grad, 1, group);
        }
        pair = add_comm(sim, StreamKind::kDp, c, CommKind::kDp,
                        label(ActionKind::kPairReduce, st, -1));
        const std::int32_t ready = stage_grads_ready_[static_cast<std::size_t>(sim) * S + st];
        out_.graph.add_dep(ready >= 0 ? ready : last_compute_[sim], pair);
        dp_tasks_[sim].push_back(pair);
      }
      const double expert =
          expert_split ? stage_expert_params_[st] * hw::grad_bytes_per_param(in_.parallel) : 0;
      const bool dense_group = layout_.dp > 1, expert_group = expert > 0 && layout_.expert_dp() > 1;
      if (!dense_group && !expert_group) continue;
      const auto& buckets = bucket_tasks_[static_cast<std::size_t>(sim) * S + st];
      const int nb = std::max<int>(1, static_cast<int>(buckets.size()));
      for (int k = 0; k < nb; ++k) {
        // Each bucket: its expert share over the expert-DP group, then the rest over the DP
        // group, in one in-order stream.
        for (int part = expert_group ? 0 : 1; part < (dense_group ? 2 : 1); ++part) {
          bool fresh = false;
          const std::int32_t c =
              part == 0
                  ? keyed_collective({15, layout_.expert_dp_index(r.tr, r.dr), r.pr, st, k}, &fresh)
                  : keyed_collective({3, r.tr, r.pr, st, k}, &fresh);
          if (fresh)
            add_collective_phases(kind, (part == 0 ? expert : grad - expert) / nb, 1,
                                  part == 0 ? layout_.expert_dp_group(r.tr, r.dr, r.pr)
                                            : layout_.dp_group(r.tr, r.pr));
          const std::int32_t tk = add_comm(sim, StreamKind::kDp, c, CommKind::kDp,
                                           label(ActionKind::kReduceGrad, st, k));
          const bool overlap = in_.parallel.overlap_grad_reduce && !buckets.empty();
          out_.graph.add_dep(overlap ? buckets[k] : last_compute_[sim], tk);
          if (pair >= 0) out_.graph.add_dep(pair, tk);
          dp_tasks_[sim].push_back(tk);
        }
      }
    }
  }
}

// The last stage's copy of the input embedding (hw::embedding_copy_parameters) has its gradient
// summed with the first stage's by an all-reduce of the two pipeline ranks (Megatron's embedding
// group, finalize_model_grads), after the data-parallel reduction, before the optimizer step.
// Nothing when both stages sit on one device (a V placement holds one embedding).
void IterationBuilder::build_embedding_sync() {
  const Placement& pl = in_.schedule.placement;
  const int first = pl.stages.front().device, last = pl.stages.back().device;
  const double copy = hw::embedding_copy_parameters(in_.model, layout_.tp, layout_.pp);
  if (first == last || copy <= 0) return;
  for (int sim = 0; sim < static_cast<int>(out_.ranks.size()); ++sim) {
    const SimRank& r = out_.ranks[sim];
    if (r.pr != first && r.pr != last) continue;
    bool fresh = false;
    const std::int32_t c = keyed_collective({12, r.tr, r.dr}, &fresh);
    if (fresh)
      add_collective_phases(hw::CollectiveKind::kAllReduce,
                            copy * hw::grad_bytes_per_param(in_.parallel), 1,
                            {layout_.gpu(r.tr, r.dr, first), layout_.gpu(r.tr, r.dr, last)});
    const std::int32_t tk =
        add_comm(sim, StreamKind::kDp, c, CommKind::kDp, label(ActionKind::kReduceGrad, -1, -1));
    out_.graph.add_dep(last_compute_[sim], tk);
    for (std::int32_t t : dp_tasks_[sim]) out_.graph.add_dep(t, tk);
    dp_tasks_[sim].push_back(tk);
  }
}

}  // namespace pw::detail
