#include "executor/program.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

#include "core/lowering.h"

namespace pw::exec {
namespace {

// Pipeline device at the other end of a SEND/RECV (-1 for every other action).
int peer_of(const Placement& pl, const Action& a) {
  auto device_of = [&](int stage) { return stage < 0 ? -1 : pl.stages[stage].device; };
  switch (a.kind) {
    case ActionKind::kSendF:
      return device_of(pl.next_stage(a.stage));
    case ActionKind::kRecvF:
      return device_of(pl.prev_stage(a.stage));
    case ActionKind::kSendB:
      return device_of(pl.prev_stage(a.stage));
    case ActionKind::kRecvB:
      return device_of(pl.next_stage(a.stage));
    default:
      return -1;
  }
}

}  // namespace

std::vector<int> replica_stages(const Placement& placement, int stage) {
  std::vector<int> out;
  const StageInfo& me = placement.stages[stage];
  for (int p = 0; p < placement.num_pipelines(); ++p)
    for (int s = 0; s < placement.num_stages(); ++s)
      if (placement.stages[s].pipeline == p && placement.stages[s].index == me.index)
        out.push_back(s);
  return out;
}

std::string check_transfer_order(const Program& program, const Placement& pl) {
  using Key = std::tuple<int, int, int>;  // receiving stage, microbatch, direction
  std::map<std::pair<int, int>, std::vector<Key>> sent, received;
  for (int d = 0; d < static_cast<int>(program.device.size()); ++d)
    for (const ExecAction& e : program.device[d]) {
      const Action& a = e.action;
      switch (a.kind) {
        case ActionKind::kSendF:
          sent[{d, e.peer}].emplace_back(pl.next_stage(a.stage), a.microbatch, 0);
          break;
        case ActionKind::kSendB:
          sent[{d, e.peer}].emplace_back(pl.prev_stage(a.stage), a.microbatch, 1);
          break;
        case ActionKind::kRecvF:
          received[{e.peer, d}].emplace_back(a.stage, a.microbatch, 0);
          break;
        case ActionKind::kRecvB:
          received[{e.peer, d}].emplace_back(a.stage, a.microbatch, 1);
          break;
        default:
          break;
      }
    }
  for (const auto& [edge, keys] : sent) {
    const std::vector<Key>& got = received[edge];
    for (std::size_t i = 0; i < std::max(keys.size(), got.size()); ++i) {
      if (i < keys.size() && i < got.size() && keys[i] == got[i]) continue;
      auto name = [](const std::vector<Key>& v, std::size_t k) {
        if (k >= v.size()) return std::string("nothing");
        return fmt::format("{} stage {} mb {}",
                           std::get<2>(v[k]) ? "gradient for" : "activation for", std::get<0>(v[k]),
                           std::get<1>(v[k]));
      };
      return fmt::format("device {} -> {}: transfer #{} is sent as {} but received as {}",
                         edge.first, edge.second, i, name(keys, i), name(got, i));
    }
  }
  return "";
}

Program build_program(const Schedule& schedule, int data_parallel) {
  Program prog;
  prog.num_microbatches = schedule.num_microbatches;
  prog.lowered = has_explicit_communication(schedule);
  prog.recompute.assign(
      static_cast<std::size_t>(schedule.placement.num_stages()) * schedule.num_microbatches, 0);
  for (const auto& list : schedule.actions)
    for (const Action& a : list)
      if (a.kind == ActionKind::kR)
        prog.recompute[static_cast<std::size_t>(a.stage) * schedule.num_microbatches +
                       a.microbatch] = 1;
  // The IR completed for execution in one place (core/lowering.h), as `plan --emit` writes it.
  std::vector<std::vector<int>> origin;
  const Schedule full = complete_for_execution(schedule, data_parallel, &origin);
  prog.device.resize(full.actions.size());
  for (std::size_t d = 0; d < full.actions.size(); ++d)
    for (std::size_t i = 0; i < full.actions[d].size(); ++i) {
      const Action& a = full.actions[d][i];
      prog.device[d].push_back(ExecAction{a, origin[d][i], peer_of(full.placement, a)});
      if (origin[d][i] < 0) ++prog.num_implied;
    }
  return prog;
}

}  // namespace pw::exec
