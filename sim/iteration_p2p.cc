// Pipeline transfers of one iteration (IterationBuilder::build_transfers) and the calls Megatron
// makes for them in its two schedules (IterationBuilder::p2p_calls).
#include <algorithm>
#include <vector>

#include "core/lowering.h"
#include "sim/iteration_builder.h"

namespace pw::detail {
namespace {

using des::StreamKind;

// One unit of a device's compute: a forward, or a backward with the recompute passes before it
// (Megatron recomputes inside its backward step). Action ids.
struct Unit {
  std::int32_t first = -1, main = -1;
  bool fwd = true;
};

// The device's units, or an empty list when it holds a pass Megatron's schedules do not have.
std::vector<Unit> units_of(const DependencyGraph& dep, int device) {
  std::vector<Unit> units;
  std::int32_t pending = -1;
  for (int id = dep.device_begin[device]; id < dep.device_begin[device + 1]; ++id) {
    const ActionKind k = dep.action[id].kind;
    if (!is_compute(k)) continue;
    if (k == ActionKind::kR) {
      if (pending < 0) pending = id;
      continue;
    }
    if (k != ActionKind::kF && k != ActionKind::kBW && k != ActionKind::kB) return {};
    units.push_back({pending >= 0 ? pending : id, id, k == ActionKind::kF});
    pending = -1;
  }
  if (pending >= 0) return {};
  return units;
}

// True when `units` run `warmup` forwards, then `pairs` forward-backward pairs, then `warmup`
// backwards: the order both Megatron schedules give every device.
bool megatron_order(const std::vector<Unit>& units, int warmup, int pairs) {
  if (static_cast<int>(units.size()) != 2 * (warmup + pairs)) return false;
  for (int i = 0; i < static_cast<int>(units.size()); ++i) {
    const bool fwd = i < warmup || (i < warmup + 2 * pairs && (i - warmup) % 2 == 0);
    if (units[i].fwd != fwd) return false;
  }
  return true;
}

}  // namespace

IterationBuilder::P2pCalls IterationBuilder::p2p_calls() const {
  P2pCalls calls;
  const Schedule& s = in_.schedule;
  const bool plain = s.name == "1f1b" || s.name == "1f1b-r";
  const bool interleaved = s.name == "interleaved";
  const int P = s.placement.num_devices, m = s.num_microbatches;
  const PlacementKind want = plain ? PlacementKind::kLinear : PlacementKind::kLoop;
  if (!opt_.blocking_p2p || P < 2 || !(plain || interleaved) || s.placement.kind != want ||
      s.placement.num_pipelines() != 1)
    return calls;
  const int v = s.placement.num_stages() / P;
  std::vector<std::vector<Unit>> units(P);
  for (int d = 0; d < P; ++d) units[d] = units_of(dep_, d);
  // Megatron's interleaved table visits g microbatches per chunk: device 0's leading forwards
  // of its first stage.
  const int g = leading_first_stage_forwards(s);
  // Megatron's calls are modelled for its default group of p microbatches: there each pass's
  // input arrives in the call just before it. With larger groups (its
  // microbatch_group_size_per_vp_stage) a receive is queued per chunk and consumed steps later
  // (recv_tensor_from_previous_stage), which pairing each receive with the next pass would
  // deadlock: such plans take the transfers when their data is ready, as other schedules do.
  if (interleaved && g != P) return calls;
  const int total = m * v;
  std::vector<int> warmup(P);
  for (int d = 0; d < P; ++d) {
    // get_pp_rank_microbatches (schedules.py); the generator runs every forward first when
    // m == p (planner/schedules/classic.cc).
    int w = plain ? std::min(P - d - 1, m) : 2 * (P - d - 1) + (v - 1) * g;
    if (interleaved && (m == P || w > total)) w = total;
    warmup[d] = w;
    if (!megatron_order(units[d], w, total - w)) return calls;  // not Megatron's order
  }
  calls.model = !interleaved                    ? P2pModel::kPerPass
                : in_.parallel.overlap_p2p_comm ? P2pModel::kOverlapped
                                                : P2pModel::kPairs;
  const std::size_t n = dep_.size();
  calls.recv_post.assign(n, -1);
  calls.recv_wait.assign(n, -1);
  calls.recv_after_send.assign(n, -1);
  calls.send_post.assign(n, -1);
  calls.send_hold.assign(n, -1);
  auto set_unit = [&](std::vector<std::int32_t>& field, const Unit& u, std::int32_t value) {
    for (std::int32_t id = u.first; id <= u.main; ++id) field[id] = value;
  };
  for (int d = 0; d < P; ++d) {
    const std::vector<Unit>& us = units[d];
    const int nu = static_cast<int>(us.size()), w = warmup[d], pairs = total - w;
    if (calls.model == P2pModel::kOverlapped) {
      // overlap_p2p_comm: per direction, each pass posts (without waiting) the send of its
      // output and the receive of the next same-direction pass's input, which waits for that
      // receive alone. A forward's send is waited for before the next pass (Megatron frees
      // pipeline outputs: deallocate_pipeline_outputs), a backward's after the next backward.
      int prev_f = -1, prev_b = -1;
      for (int i = 0; i < nu; ++i) {
        const Unit& u = us[i];
        int post = u.fwd ? prev_f : prev_b;
        // The first backward's receive leaves with the last warm-up forward (with no steady
        // state, a blocking receive after the last forward).
        if (!u.fwd && prev_b < 0) post = pairs > 0 ? w - 1 : i - 1;
        set_unit(calls.recv_post, u, post >= 0 ? us[post].main : -1);
        set_unit(calls.recv_wait, u, u.first);
        if (u.fwd) {
          if (i + 1 < nu) set_unit(calls.send_hold, u, us[i + 1].first);
        } else {
          int next_b = i + 1;
          while (next_b < nu && us[next_b].fwd) ++next_b;
          if (next_b + 1 < nu) set_unit(calls.send_hold, u, us[next_b + 1].first);
        }
        (u.fwd ? prev_f : prev_b) = i;
      }
      continue;
    }
    // Blocking calls: after each group of passes one call sends the group's outputs and
    // receives the next group's inputs, and the next group starts when the whole call has
    // completed. A group is one pass, or in the interleaved schedule's steady state a
    // forward-backward pair (send_forward_backward_recv_forward_backward). The plain schedule
    // sends and receives in two calls between passes of one direction (warm-up, cool-down).
    std::vector<int> group_begin;
    for (int i = 0; i < nu;) {
      group_begin.push_back(i);
      i += calls.model == P2pModel::kPairs && i >= w && i < w + 2 * pairs ? 2 : 1;
    }
    group_begin.push_back(nu);
    for (std::size_t gi = 0; gi + 1 < group_begin.size(); ++gi) {
      const int b = group_begin[gi], e = group_begin[gi + 1];
      const std::int32_t post = gi > 0 ? us[b - 1].main : -1;
      const std::int32_t hold = gi + 2 < group_begin.size() ? us[e].first : -1;
      const bool split = calls.model == P2pModel::kPerPass && b > 0 && us[b - 1].fwd == us[b].fwd;
      for (int i = b; i < e; ++i) {
        set_unit(calls.recv_post, us[i], post);
        set_unit(calls.recv_wait, us[i], us[b].first);
        set_unit(calls.send_post, us[i], us[e - 1].main);
        set_unit(calls.send_hold, us[i], hold);
        if (split) set_unit(calls.recv_after_send, us[i], us[b - 1].main);
      }
    }
  }
  return calls;
}

void IterationBuilder::build_transfers() {
  const int R = static_cast<int>(out_.ranks.size());
  const bool sg = opt_.scatter_gather && !in_.parallel.sequence_parallel && layout_.tp > 1;
  const P2pCalls calls = p2p_calls();
  const bool by_calls = calls.model != P2pModel::kDataReady;
  // With calls: each producing pass's send task (Megatron's schedules send one message per
  // pass), and the receives posted only after a send of their device has completed.
  std::vector<std::int32_t> send_of(by_calls ? pass_.size() : 0, -1);
  std::vector<std::pair<std::size_t, std::int32_t>> after_send;  // (send_of slot, receive)
  // The compute pass at or after (before) `id` on its device: an explicit RECV (SEND) of a
  // lowered plan stands for the pass that consumes (produced) the data.
  auto consumer_of = [&](int id) {
    const int end = dep_.device_begin[dep_.device_of[id] + 1];
    while (id + 1 < end && !is_compute(dep_.action[id].kind)) ++id;
    return id;
  };
  auto producer_of = [&](int id) {
    const int begin = dep_.device_begin[dep_.device_of[id]];
    while (id > begin && !is_compute(dep_.action[id].kind)) --id;
    return id;
  };
  for (int sim = 0; sim < R; ++sim) {
    const SimRank& r = out_.ranks[sim];
    const int begin = dep_.device_begin[r.pr], end = dep_.device_begin[r.pr + 1];
    const std::vector<int> tp_group = sg ? layout_.tp_group(r.dr, r.pr) : std::vector<int>{};
    for (int id = begin; id < end; ++id) {
      const PassTasks& me = pass_[out_.action_slot(sim, id)];
      for (int k = dep_.dep_begin[id]; k < dep_.dep_begin[id + 1]; ++k) {
        const int dep = dep_.dep[k];
        const int hop = dep_.dep_hop[k];
        const int spr = dep_.device_of[dep];
        const int ssim = sim_of(r.tr, r.dr, spr);
        const PassTasks& src = pass_[out_.action_slot(ssim, dep)];
        if (hop < 0) {
          out_.graph.add_dep(src.last, me.first);
          continue;
        }
        const Action& da = dep_.action[dep];
        const bool fwd = da.kind == ActionKind::kF || da.kind == ActionKind::kSendF;
        const std::int32_t c = out_.graph.add_collective(true);
        const Action& ra = dep_.action[id];
        // The activation the lower stage sends on, forward (the sender's) or as its gradient
        // backward (the receiver's): stages differ where one sends more (a stage of the
        // multi-token prediction depths alone sends 1 + D hidden states).
        const double bytes = costs_[fwd ? hop : ra.stage].p2p_bytes.value;
        const int sg_gpu = out_.ranks[ssim].gpu, rg_gpu = r.gpu;
        add_point_phase(sg_gpu, rg_gpu, sg ? bytes / layout_.tp : bytes);
        if (sg) add_collective_phases(hw::CollectiveKind::kAllGather, bytes, 1, tp_group, r.tr);
        const std::int32_t send =
            add_comm(ssim, StreamKind::kPpSend, c, CommKind::kPp,
                     label(fwd ? ActionKind::kSendF : ActionKind::kSendB, hop, da.microbatch));
        const std::int32_t recv =
            add_comm(sim, StreamKind::kPpRecv, c, CommKind::kPp,
                     label(fwd ? ActionKind::kRecvF : ActionKind::kRecvB, ra.stage, da.microbatch));
        out_.graph.add_dep(src.last, send);
        if (timings_ && (da.kind == ActionKind::kSendF || da.kind == ActionKind::kSendB))
          out_.action_send[out_.action_slot(ssim, dep)] = send;
        if (by_calls) {
          // The transfer starts when both calls are posted (the collective waits for both
          // tasks): the receiver's after the pass named by recv_post.
          const int producer = producer_of(dep), consumer = consumer_of(id);
          const std::size_t slot = out_.action_slot(ssim, producer);
          // A pass of Megatron's schedules sends one message; a lowered plan that lists its
          // SENDs elsewhere may name one pass for two, and the first stands for the call.
          if (send_of[slot] < 0) send_of[slot] = send;
          if (calls.send_post[producer] >= 0 && calls.send_post[producer] != producer)
            out_.graph.add_dep(pass_[out_.action_slot(ssim, calls.send_post[producer])].last, send);
          if (calls.send_hold[producer] >= 0)
            out_.graph.add_dep(send,
                               pass_[out_.action_slot(ssim, calls.send_hold[producer])].first);
          else
            step_waits_[ssim].push_back(send);
          if (calls.recv_post[consumer] >= 0)
            out_.graph.add_dep(pass_[out_.action_slot(sim, calls.recv_post[consumer])].last, recv);
          if (calls.recv_wait[consumer] >= 0)
            out_.graph.add_dep(recv, pass_[out_.action_slot(sim, calls.recv_wait[consumer])].first);
          if (calls.recv_after_send[consumer] >= 0)
            after_send.emplace_back(out_.action_slot(sim, calls.recv_after_send[consumer]), recv);
        } else if (opt_.blocking_p2p && dep + 1 < dep_.device_begin[spr + 1]) {
          // Other schedules' runtimes post their receives ahead: a transfer starts when its
          // data is ready, and the sender's next pass starts after its send completes.
          const PassTasks& nxt = pass_[out_.action_slot(ssim, dep + 1)];
          out_.graph.add_dep(send, nxt.first);
        }
        out_.graph.add_dep(recv, me.first);
        // The trace's arrow ends at the pass that consumes the data: this action, or with an
        // explicit RECV (a lowered plan) the next pass on the device.
        if (arrows_) {
          int consumer = id;
          while (consumer + 1 < end && !is_compute(dep_.action[consumer].kind)) ++consumer;
          out_.flow_to[send] = pass_[out_.action_slot(sim, consumer)].first;
        }
      }
    }
  }
  for (const auto& [slot, recv] : after_send)
    if (send_of[slot] >= 0) out_.graph.add_dep(send_of[slot], recv);
}

}  // namespace pw::detail
