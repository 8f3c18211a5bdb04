#include "sim/plan_prediction.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "hwmodels/topology.h"
#include "sim/iteration_builder.h"

namespace pw {

IterationInput plan_iteration_input(const ModelShape& model, const ParallelConfig& config,
                                    const hw::HardwareProfile& profile, const Schedule& schedule) {
  IterationInput in;
  in.model = model;
  if (in.model.ffn_hidden_size == 0) in.model.ffn_hidden_size = 4 * in.model.hidden_size;
  in.parallel = config;
  if (config.tensor_parallel == 1) in.parallel.sequence_parallel = false;
  in.profile = profile;
  const long long gpus = 1LL * config.tensor_parallel * config.context_parallel *
                         config.pipeline_parallel * config.data_parallel;
  const int per_node = std::max(1, profile.node.gpus_per_node);
  const long long nodes = (gpus + per_node - 1) / per_node;
  PW_ASSERT(gpus >= 1 && nodes <= 1'000'000, "t * p * d out of range");
  in.topology = hw::topology_spec(profile, static_cast<int>(nodes));
  if (gpus < per_node) in.topology.node.gpus_per_node = static_cast<int>(gpus);
  in.schedule = schedule;
  return in;
}

TimingAgreement compare_timings(const Schedule& schedule,
                                const std::vector<ActionTiming>& predicted,
                                const std::vector<ActionTiming>& simulated) {
  std::vector<std::size_t> begin(schedule.actions.size() + 1, 0);
  for (std::size_t d = 0; d < schedule.actions.size(); ++d)
    begin[d + 1] = begin[d] + schedule.actions[d].size();
  TimingAgreement a;
  for (const ActionTiming& p : predicted) {
    if (p.device < 0 || static_cast<std::size_t>(p.device) >= schedule.actions.size()) continue;
    if (p.index < 0 || static_cast<std::size_t>(p.index) >= schedule.actions[p.device].size())
      continue;
    const std::size_t id = begin[p.device] + static_cast<std::size_t>(p.index);
    if (id >= simulated.size()) continue;
    const ActionTiming& s = simulated[id];
    ++a.compared;
    const TimePs diff = std::max(std::llabs(p.start - s.start), std::llabs(p.end - s.end));
    if (diff == 0) ++a.exact;
    a.worst = std::max(a.worst, diff);
  }
  return a;
}

namespace detail {

void action_timings(const Schedule& schedule, const BuiltIteration& b, const des::EngineResult& er,
                    std::vector<ActionTiming>* out) {
  const int D = schedule.placement.num_devices;
  const int S = schedule.placement.num_stages();
  std::vector<int> rep(static_cast<std::size_t>(D), -1);
  for (int k = 0; k < static_cast<int>(b.ranks.size()); ++k) {
    const SimRank& r = b.ranks[k];
    if (r.tr == 0 && r.dr == 0 && r.pr < D && rep[r.pr] < 0) rep[r.pr] = k;
  }
  // The simulator models the DP reduction, BitPipe's pair reduction and the optimizer step
  // itself (tasks labelled REDUCE_GRAD or PAIR_REDUCE with the stage, and OPT); an explicit
  // REDUCE_GRAD / PAIR_REDUCE / OPT action of the schedule is only a zero-time marker there. Such
  // an action takes the interval of the modelled tasks of its kind on its representative GPU:
  // REDUCE_GRAD of stage s, first to last bucket of s; PAIR_REDUCE of s, its all-reduce; OPT, first
  // to last optimizer task (with offload: the GPU share and the host update). Tasks that take no
  // time are left out (an offload share of 0 leaves an empty GPU update); without any task of its
  // kind (REDUCE_GRAD at d = 1), the action keeps its marker's zero-length interval.
  constexpr TimePs kNone = -1;
  const std::size_t G = b.graph.size();
  std::vector<std::uint8_t> is_action(G, 0);
  for (std::size_t k = 0; k < b.action_first.size(); ++k) {
    if (b.action_first[k] >= 0) is_action[b.action_first[k]] = 1;
    if (b.action_last[k] >= 0) is_action[b.action_last[k]] = 1;
  }
  std::vector<int> rep_of_sim(b.ranks.size(), -1);
  for (int d = 0; d < D; ++d)
    if (rep[d] >= 0) rep_of_sim[rep[d]] = d;
  // Per device: [0, S) reduce-grad intervals by stage, [S] the optimizer, [S + 1, 2S + 1) the
  // pair reductions (PAIR_REDUCE) by stage.
  const std::size_t W = 2 * static_cast<std::size_t>(S) + 1;
  std::vector<TimePs> lo(static_cast<std::size_t>(D) * W, kNone), hi(lo.size(), kNone);
  for (std::size_t t = 0; t < G; ++t) {
    if (is_action[t] || er.end[t] <= er.start[t]) continue;  // markers, empty shares
    const des::Task& task = b.graph.task(static_cast<std::int32_t>(t));
    if (task.device < 0 || task.device >= static_cast<int>(rep_of_sim.size())) continue;
    const int d = rep_of_sim[task.device];
    if (d < 0) continue;
    const Action& label = b.graph.label(static_cast<std::int32_t>(t));
    std::size_t slot;
    if (label.kind == ActionKind::kOptStep) {
      slot = static_cast<std::size_t>(S);
    } else if (label.kind == ActionKind::kReduceGrad && label.stage >= 0 && label.stage < S) {
      slot = static_cast<std::size_t>(label.stage);
    } else if (label.kind == ActionKind::kPairReduce && label.stage >= 0 && label.stage < S) {
      slot = static_cast<std::size_t>(S) + 1 + static_cast<std::size_t>(label.stage);
    } else {
      continue;
    }
    const std::size_t i = static_cast<std::size_t>(d) * W + slot;
    lo[i] = lo[i] == kNone ? er.start[t] : std::min(lo[i], er.start[t]);
    hi[i] = hi[i] == kNone ? er.end[t] : std::max(hi[i], er.end[t]);
  }
  out->clear();
  out->reserve(b.num_actions);
  std::size_t id = 0;
  for (int d = 0; d < D; ++d) {
    PW_ASSERT(rep[d] >= 0, "no simulated GPU for a pipeline rank");
    const int n = static_cast<int>(schedule.actions[d].size());
    TimePs reached = 0;
    for (int k = 0; k < n; ++k, ++id) {
      const std::size_t slot_id = b.action_slot(rep[d], static_cast<int>(id));
      const std::int32_t first = b.action_first[slot_id], last = b.action_last[slot_id];
      PW_ASSERT(first >= 0 && last >= 0, "an action without simulated tasks");
      TimePs start = er.start[first], end = er.end[last];
      const std::int32_t send = b.action_send[slot_id];
      if (send >= 0) end = std::max(end, er.end[send]);
      const Action& a = schedule.actions[d][k];
      std::size_t slot = W;
      if (a.kind == ActionKind::kOptStep) slot = static_cast<std::size_t>(S);
      if (a.kind == ActionKind::kReduceGrad && a.stage >= 0 && a.stage < S)
        slot = static_cast<std::size_t>(a.stage);
      if (a.kind == ActionKind::kPairReduce && a.stage >= 0 && a.stage < S)
        slot = static_cast<std::size_t>(S) + 1 + static_cast<std::size_t>(a.stage);
      if (slot < W && lo[static_cast<std::size_t>(d) * W + slot] != kNone) {
        start = lo[static_cast<std::size_t>(d) * W + slot];
        end = hi[static_cast<std::size_t>(d) * W + slot];
      }
      // A receive starts when its device reaches it (the previous action's end, or the step's
      // start) and ends when the data has arrived (its marker): the wait a runtime measures
      // from posting the receive to holding the data.
      if (a.kind == ActionKind::kRecvF || a.kind == ActionKind::kRecvB)
        start = std::min(start, reached);
      out->push_back(ActionTiming{d, k, start, end});
      reached = end;  // where the device is after it (a send: once its transfer is done)
    }
  }
}

}  // namespace detail
}  // namespace pw
