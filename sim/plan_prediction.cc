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
  const long long gpus =
      1LL * config.tensor_parallel * config.pipeline_parallel * config.data_parallel;
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
  std::vector<int> rep(static_cast<std::size_t>(D), -1);
  for (int k = 0; k < static_cast<int>(b.ranks.size()); ++k) {
    const SimRank& r = b.ranks[k];
    if (r.tr == 0 && r.dr == 0 && r.pr < D && rep[r.pr] < 0) rep[r.pr] = k;
  }
  out->clear();
  out->reserve(b.num_actions);
  std::size_t id = 0;
  for (int d = 0; d < D; ++d) {
    PW_ASSERT(rep[d] >= 0, "no simulated GPU for a pipeline rank");
    const std::size_t base = static_cast<std::size_t>(rep[d]) * b.num_actions;
    const int n = static_cast<int>(schedule.actions[d].size());
    for (int k = 0; k < n; ++k, ++id) {
      const std::int32_t first = b.action_first[base + id], last = b.action_last[base + id];
      PW_ASSERT(first >= 0 && last >= 0, "an action without simulated tasks");
      TimePs end = er.end[last];
      const std::int32_t send = b.action_send[base + id];
      if (send >= 0) end = std::max(end, er.end[send]);
      out->push_back(ActionTiming{d, k, er.start[first], end});
    }
  }
}

}  // namespace detail
}  // namespace pw
