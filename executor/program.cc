#include "executor/program.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

namespace pw::exec {
namespace {

Action make(ActionKind k, int stage, int mb) {
  return Action{k, static_cast<std::int16_t>(stage), mb};
}

class ProgramBuilder {
 public:
  ProgramBuilder(const Schedule& s, int dp) : s_(s), pl_(s.placement), dp_(dp) {}

  Program build() {
    prog_.num_microbatches = s_.num_microbatches;
    prog_.recompute.assign(static_cast<std::size_t>(pl_.num_stages()) * s_.num_microbatches, 0);
    scan();
    prog_.device.resize(static_cast<std::size_t>(pl_.num_devices));
    for (int d = 0; d < pl_.num_devices; ++d) build_device(d);
    return std::move(prog_);
  }

 private:
  void scan() {
    for (const auto& list : s_.actions)
      for (const Action& a : list) {
        if (a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF ||
            a.kind == ActionKind::kSendB || a.kind == ActionKind::kRecvB)
          prog_.lowered = true;
        if (a.kind == ActionKind::kR)
          prog_.recompute[static_cast<std::size_t>(a.stage) * s_.num_microbatches + a.microbatch] =
              1;
      }
  }

  int device_of(int stage) const { return stage < 0 ? -1 : pl_.stages[stage].device; }
  bool remote(int from, int to) const {
    return to >= 0 && from >= 0 && device_of(from) != device_of(to);
  }

  void push(int d, Action a, int plan_index, int peer) {
    prog_.device[d].push_back(ExecAction{a, plan_index, peer});
    if (plan_index < 0) ++prog_.num_implied;
  }

  // Implied RECV before / SEND after the forward of (stage, mb).
  void recv_forward(int d, int st, int mb) {
    const int prev = pl_.prev_stage(st);
    if (remote(prev, st)) push(d, make(ActionKind::kRecvF, st, mb), -1, device_of(prev));
  }
  void send_forward(int d, int st, int mb) {
    const int next = pl_.next_stage(st);
    if (remote(st, next)) push(d, make(ActionKind::kSendF, st, mb), -1, device_of(next));
  }
  void recv_backward(int d, int st, int mb) {
    const int next = pl_.next_stage(st);
    if (remote(next, st)) push(d, make(ActionKind::kRecvB, st, mb), -1, device_of(next));
  }
  void send_backward(int d, int st, int mb) {
    const int prev = pl_.prev_stage(st);
    if (remote(st, prev)) push(d, make(ActionKind::kSendB, st, mb), -1, device_of(prev));
  }

  int peer_of(const Action& a) const {
    switch (a.kind) {
      case ActionKind::kSendF:
        return device_of(pl_.next_stage(a.stage));
      case ActionKind::kRecvF:
        return device_of(pl_.prev_stage(a.stage));
      case ActionKind::kSendB:
        return device_of(pl_.prev_stage(a.stage));
      case ActionKind::kRecvB:
        return device_of(pl_.next_stage(a.stage));
      default:
        return -1;
    }
  }

  void build_device(int d) {
    const auto& list = s_.actions[d];
    std::vector<std::uint8_t> reduced(static_cast<std::size_t>(pl_.num_stages()), 0);
    std::vector<std::uint8_t> paired(static_cast<std::size_t>(pl_.num_stages()), 0);
    bool has_opt = false;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[i];
      const bool implicit = !prog_.lowered;
      switch (a.kind) {
        case ActionKind::kF:
          if (implicit) recv_forward(d, a.stage, a.microbatch);
          push(d, a, i, -1);
          if (implicit) send_forward(d, a.stage, a.microbatch);
          continue;
        case ActionKind::kB:
        case ActionKind::kBW:
          if (implicit) recv_backward(d, a.stage, a.microbatch);
          push(d, a, i, -1);
          if (implicit) send_backward(d, a.stage, a.microbatch);
          continue;
        case ActionKind::kOverlapFB:
          if (implicit) recv_forward(d, a.stage, a.microbatch);
          if (implicit) recv_backward(d, a.stage2, a.microbatch2);
          push(d, a, i, -1);
          if (implicit) send_forward(d, a.stage, a.microbatch);
          if (implicit) send_backward(d, a.stage2, a.microbatch2);
          continue;
        case ActionKind::kReduceGrad:
          reduced[a.stage] = 1;
          break;
        case ActionKind::kPairReduce:
          paired[a.stage] = 1;
          break;
        case ActionKind::kOptStep:
          add_end_of_iteration(d, reduced, paired);
          has_opt = true;
          break;
        default:
          break;
      }
      push(d, a, i, peer_of(a));
    }
    if (!has_opt) {
      add_end_of_iteration(d, reduced, paired);
      push(d, make(ActionKind::kOptStep, -1, -1), -1, -1);
    }
  }

  // Gradient reductions the plan leaves implied; they must precede the optimizer step. Pair
  // reductions go in order of the stage's index within its pipeline, one global order, so two
  // devices never wait on each other's different pairs.
  void add_end_of_iteration(int d, std::vector<std::uint8_t>& reduced,
                            std::vector<std::uint8_t>& paired) {
    for (int st = 0; st < pl_.num_stages(); ++st) {
      if (device_of(st) != d || reduced[st]) continue;
      if (dp_ > 1) push(d, make(ActionKind::kReduceGrad, st, -1), -1, -1);
      reduced[st] = 1;
    }
    for (int index = 0; index < pl_.stages_per_pipeline(); ++index)
      for (int st = 0; st < pl_.num_stages(); ++st) {
        if (device_of(st) != d || pl_.stages[st].index != index || paired[st]) continue;
        if (replica_stages(pl_, st).size() > 1)
          push(d, make(ActionKind::kPairReduce, st, -1), -1, -1);
        paired[st] = 1;
      }
  }

  const Schedule& s_;
  const Placement& pl_;
  int dp_;
  Program prog_;
};

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
  return ProgramBuilder(schedule, data_parallel).build();
}

}  // namespace pw::exec
