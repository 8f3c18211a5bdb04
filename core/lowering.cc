#include "core/lowering.h"

#include <algorithm>
#include <limits>

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

namespace {

// Stages of `pl` held by more than one pipeline (BitPipe's replicated stages).
std::vector<std::uint8_t> replicated_stages(const Placement& pl) {
  std::vector<int> copies(static_cast<std::size_t>(pl.stages_per_pipeline()), 0);
  for (const StageInfo& st : pl.stages) ++copies[st.index];
  std::vector<std::uint8_t> out(static_cast<std::size_t>(pl.num_stages()), 0);
  for (int s = 0; s < pl.num_stages(); ++s) out[s] = copies[pl.stages[s].index] > 1;
  return out;
}

bool same_action(const Action& a, const Action& b) {
  return a.kind == b.kind && a.stage == b.stage && a.microbatch == b.microbatch &&
         a.stage2 == b.stage2 && a.microbatch2 == b.microbatch2;
}

}  // namespace

void append_end_of_iteration(Schedule* schedule, int data_parallel) {
  const Placement& pl = schedule->placement;
  const int S = pl.num_stages();
  const std::vector<std::uint8_t> replicated = replicated_stages(pl);
  for (int d = 0; d < static_cast<int>(schedule->actions.size()); ++d) {
    std::vector<Action>& list = schedule->actions[d];
    std::vector<std::uint8_t> reduced(static_cast<std::size_t>(S), 0), paired(reduced);
    // Position of each stage's last backward on this device; stages without one come last.
    std::vector<int> last_bwd(static_cast<std::size_t>(S), std::numeric_limits<int>::max());
    int opt_at = -1;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[i];
      const bool in_range = a.stage >= 0 && a.stage < S;
      if (a.kind == ActionKind::kReduceGrad && in_range) reduced[a.stage] = 1;
      if (a.kind == ActionKind::kPairReduce && in_range) paired[a.stage] = 1;
      if ((a.kind == ActionKind::kW || a.kind == ActionKind::kBW) && in_range)
        last_bwd[a.stage] = i;
      if (a.kind == ActionKind::kOverlapFB && a.stage2 >= 0 && a.stage2 < S) last_bwd[a.stage2] = i;
      if (a.kind == ActionKind::kOptStep && opt_at < 0) opt_at = i;
    }
    std::vector<int> stages;
    for (int st = 0; st < S; ++st)
      if (data_parallel > 1 && pl.stages[st].device == d && !reduced[st]) stages.push_back(st);
    std::stable_sort(stages.begin(), stages.end(),
                     [&](int a, int b) { return last_bwd[a] < last_bwd[b]; });
    std::vector<Action> tail;
    for (int st : stages)
      tail.push_back(Action{ActionKind::kReduceGrad, static_cast<std::int16_t>(st), -1});
    for (int index = 0; index < pl.stages_per_pipeline(); ++index)
      for (int st = 0; st < S; ++st)
        if (pl.stages[st].device == d && pl.stages[st].index == index && replicated[st] &&
            !paired[st])
          tail.push_back(Action{ActionKind::kPairReduce, static_cast<std::int16_t>(st), -1});
    if (opt_at < 0) {
      tail.push_back(Action{ActionKind::kOptStep, -1, -1});
      list.insert(list.end(), tail.begin(), tail.end());
    } else {
      list.insert(list.begin() + opt_at, tail.begin(), tail.end());
    }
  }
}

std::vector<std::vector<Action>> compute_passes(const Schedule& schedule) {
  std::vector<std::vector<Action>> out(schedule.actions.size());
  for (std::size_t d = 0; d < schedule.actions.size(); ++d)
    for (const Action& a : schedule.actions[d])
      if (is_compute(a.kind)) out[d].push_back(a);
  return out;
}

int leading_first_stage_forwards(const Schedule& schedule) {
  if (schedule.actions.empty()) return 0;
  int n = 0, stage = -1;
  for (const Action& a : schedule.actions[0]) {
    if (!is_compute(a.kind)) continue;
    if (stage < 0) stage = a.stage;
    if (a.kind != ActionKind::kF || a.stage != stage) break;
    ++n;
  }
  return n;
}

Schedule complete_for_execution(const Schedule& schedule, int data_parallel,
                                std::vector<std::vector<int>>* origin) {
  Schedule out = lower_communication(schedule);
  append_end_of_iteration(&out, data_parallel);
  if (origin) {
    origin->assign(out.actions.size(), {});
    for (std::size_t d = 0; d < out.actions.size(); ++d) {
      const std::vector<Action>& in = schedule.actions[d];
      std::size_t next = 0;
      for (const Action& a : out.actions[d]) {
        const bool from_input = next < in.size() && same_action(a, in[next]);
        (*origin)[d].push_back(from_input ? static_cast<int>(next++) : -1);
      }
    }
  }
  return out;
}

}  // namespace pw
