#include "core/lowering.h"

namespace pw {
namespace {

bool is_p2p(ActionKind k) {
  return k == ActionKind::kSendF || k == ActionKind::kRecvF || k == ActionKind::kSendB ||
         k == ActionKind::kRecvB;
}

class Lowerer {
 public:
  explicit Lowerer(const Placement& pl) : pl_(pl) {}

  void lower(const std::vector<Action>& in, std::vector<Action>* out) const {
    out->reserve(in.size() * 3);
    for (const Action& a : in) {
      receives(a, out);
      out->push_back(a);
      sends(a, out);
    }
  }

 private:
  bool prev_crosses(int stage) const {
    const int prev = pl_.prev_stage(stage);
    return prev >= 0 && pl_.stages[prev].device != pl_.stages[stage].device;
  }
  bool next_crosses(int stage) const {
    const int next = pl_.next_stage(stage);
    return next >= 0 && pl_.stages[next].device != pl_.stages[stage].device;
  }
  static void emit(ActionKind k, int stage, int mb, std::vector<Action>* out) {
    out->push_back(Action{k, static_cast<std::int16_t>(stage), mb});
  }

  void receives(const Action& a, std::vector<Action>* out) const {
    switch (a.kind) {
      case ActionKind::kF:
        if (prev_crosses(a.stage)) emit(ActionKind::kRecvF, a.stage, a.microbatch, out);
        break;
      case ActionKind::kB:
      case ActionKind::kBW:
        if (next_crosses(a.stage)) emit(ActionKind::kRecvB, a.stage, a.microbatch, out);
        break;
      case ActionKind::kOverlapFB:
        if (prev_crosses(a.stage)) emit(ActionKind::kRecvF, a.stage, a.microbatch, out);
        if (next_crosses(a.stage2)) emit(ActionKind::kRecvB, a.stage2, a.microbatch2, out);
        break;
      default:
        break;
    }
  }

  void sends(const Action& a, std::vector<Action>* out) const {
    switch (a.kind) {
      case ActionKind::kF:
        if (next_crosses(a.stage)) emit(ActionKind::kSendF, a.stage, a.microbatch, out);
        break;
      case ActionKind::kB:
      case ActionKind::kBW:
        if (prev_crosses(a.stage)) emit(ActionKind::kSendB, a.stage, a.microbatch, out);
        break;
      case ActionKind::kOverlapFB:
        if (next_crosses(a.stage)) emit(ActionKind::kSendF, a.stage, a.microbatch, out);
        if (prev_crosses(a.stage2)) emit(ActionKind::kSendB, a.stage2, a.microbatch2, out);
        break;
      default:
        break;
    }
  }

  const Placement& pl_;
};

}  // namespace

bool has_explicit_communication(const Schedule& schedule) {
  for (const auto& dev : schedule.actions)
    for (const Action& a : dev)
      if (is_p2p(a.kind)) return true;
  return false;
}

Schedule lower_communication(const Schedule& schedule) {
  if (has_explicit_communication(schedule)) return schedule;
  Schedule out;
  out.name = schedule.name;
  out.placement = schedule.placement;
  out.num_microbatches = schedule.num_microbatches;
  out.actions.resize(schedule.actions.size());
  Lowerer lowerer(schedule.placement);
  for (std::size_t d = 0; d < schedule.actions.size(); ++d)
    lowerer.lower(schedule.actions[d], &out.actions[d]);
  return out;
}

}  // namespace pw
