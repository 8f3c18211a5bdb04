#include "core/dependency.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pw {
namespace {

// Which pass an index map refers to; B-grad covers B, BW and the backward half of OVERLAP.
enum Slot {
  kSlotF,
  kSlotBgrad,
  kSlotW,
  kSlotR,
  kSlotSendF,
  kSlotRecvF,
  kSlotSendB,
  kSlotRecvB,
  kNumSlots
};

constexpr bool per_microbatch(ActionKind k) { return k <= ActionKind::kOverlapFB; }

class Builder {
 public:
  Builder(const Schedule& s, const std::string& source, const ActionLocator* locate)
      : s_(s), pl_(s.placement), src_(source), locate_(locate) {}

  DependencyGraph build() {
    check_placement();
    flatten();
    index_passes();
    check_coverage();
    add_dependencies();
    topological_order();
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw ConfigError(src_, key, msg);
  }
  std::string where(int id) const {
    const int d = g_.device_of[id];
    const int k = id - g_.device_begin[d];
    if (locate_ && *locate_)
      return fmt::format("{} (device {} action #{}: {})", (*locate_)(d, k), d, k,
                         describe_action(g_.action[id]));
    return fmt::format("device {} action #{} ({})", d, k, describe_action(g_.action[id]));
  }

  void check_placement() {
    if (pl_.num_devices <= 0) fail("placement.num_devices", "expected a positive device count");
    if (s_.num_microbatches <= 0) fail("num_microbatches", "expected a positive count");
    if (pl_.stages.empty()) fail("placement.stages", "expected at least one stage");
    if (static_cast<int>(s_.actions.size()) != pl_.num_devices)
      fail("actions", fmt::format("expected one action list per device ({}), got {}",
                                  pl_.num_devices, s_.actions.size()));
    const int np = pl_.num_pipelines();
    const int S = pl_.num_stages();
    if (S % np != 0) fail("placement.stages", "every pipeline must have the same stage count");
    std::vector<int> seen(static_cast<std::size_t>(S), 0);
    for (int st = 0; st < S; ++st) {
      const StageInfo& info = pl_.stages[st];
      std::string key = fmt::format("placement.stages[{}]", st);
      if (info.device < 0 || info.device >= pl_.num_devices)
        fail(key + ".device", fmt::format("expected 0..{}", pl_.num_devices - 1));
      if (info.pipeline < 0 || info.index < 0 || info.index >= S / np)
        fail(key + ".index", fmt::format("expected 0..{} within its pipeline", S / np - 1));
      int& taken = seen[static_cast<std::size_t>(info.pipeline * (S / np) + info.index)];
      if (taken++) fail(key, "two stages share the same pipeline and index");
      if (info.layer_end < info.layer_begin) fail(key + ".layers", "expected begin <= end");
    }
  }

  void flatten() {
    std::size_t n = 0;
    for (const auto& list : s_.actions) n += list.size();
    g_.action.reserve(n);
    g_.device_of.reserve(n);
    g_.device_begin.reserve(static_cast<std::size_t>(pl_.num_devices) + 1);
    g_.device_begin.assign(1, 0);
    for (int d = 0; d < pl_.num_devices; ++d) {
      for (const Action& a : s_.actions[d]) {
        g_.action.push_back(a);
        g_.device_of.push_back(d);
        if (a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF ||
            a.kind == ActionKind::kSendB || a.kind == ActionKind::kRecvB)
          lowered_ = true;
        forwards_ += a.kind == ActionKind::kF || a.kind == ActionKind::kOverlapFB;
      }
      g_.device_begin.push_back(static_cast<std::int32_t>(g_.action.size()));
    }
  }

  // The slots of one (microbatch, stage) share a cache line, the stages of one microbatch follow
  // each other: a pass, its stage neighbours and the coverage check read nearby entries.
  int& slot(Slot sl, int stage, int mb) {
    return index_[(static_cast<std::size_t>(mb) * pl_.num_stages() + stage) * kNumSlots + sl];
  }

  void claim(Slot sl, int stage, int mb, int id) {
    int& cur = slot(sl, stage, mb);
    if (cur >= 0)
      fail("actions", fmt::format("{} repeats a pass already done by {}", where(id), where(cur)));
    cur = id;
  }

  void check_stage(int id, int stage, bool on_device) {
    if (stage < 0 || stage >= pl_.num_stages())
      fail("actions", fmt::format("{}: stage out of range 0..{}", where(id), pl_.num_stages() - 1));
    if (on_device && pl_.stages[stage].device != g_.device_of[id])
      fail("actions", fmt::format("{}: stage {} is placed on device {}", where(id), stage,
                                  pl_.stages[stage].device));
  }

  void index_passes() {
    // Every microbatch needs a forward on each stage of its pipeline (check_coverage); too few
    // forwards for the microbatch count is refused before the index of every (microbatch, stage)
    // is allocated (a file naming microbatch 99999996 must not allocate gigabytes first).
    const std::size_t stages = static_cast<std::size_t>(pl_.num_stages() / pl_.num_pipelines());
    if (forwards_ < stages * static_cast<std::size_t>(s_.num_microbatches))
      fail("actions", fmt::format("{} forward passes for {} stages x {} microbatches; expected a "
                                  "forward of every stage for each microbatch 0..{}",
                                  forwards_, stages, s_.num_microbatches, s_.num_microbatches - 1));
    index_.assign(static_cast<std::size_t>(kNumSlots) * pl_.num_stages() * s_.num_microbatches, -1);
    for (int id = 0; id < static_cast<int>(g_.size()); ++id) {
      const Action& a = g_.action[id];
      if (!per_microbatch(a.kind)) {
        if (a.kind != ActionKind::kOptStep || a.stage >= 0) check_stage(id, a.stage, true);
        continue;
      }
      check_stage(id, a.stage, true);
      if (a.microbatch < 0 || a.microbatch >= s_.num_microbatches)
        fail("actions",
             fmt::format("{}: microbatch out of range 0..{}", where(id), s_.num_microbatches - 1));
      switch (a.kind) {
        case ActionKind::kF:
          claim(kSlotF, a.stage, a.microbatch, id);
          break;
        case ActionKind::kB:
          claim(kSlotBgrad, a.stage, a.microbatch, id);
          break;
        case ActionKind::kW:
          claim(kSlotW, a.stage, a.microbatch, id);
          break;
        case ActionKind::kBW:
          claim(kSlotBgrad, a.stage, a.microbatch, id);
          claim(kSlotW, a.stage, a.microbatch, id);
          break;
        case ActionKind::kR:
          claim(kSlotR, a.stage, a.microbatch, id);
          break;
        case ActionKind::kSendF:
          claim(kSlotSendF, a.stage, a.microbatch, id);
          break;
        case ActionKind::kRecvF:
          claim(kSlotRecvF, a.stage, a.microbatch, id);
          break;
        case ActionKind::kSendB:
          claim(kSlotSendB, a.stage, a.microbatch, id);
          break;
        case ActionKind::kRecvB:
          claim(kSlotRecvB, a.stage, a.microbatch, id);
          break;
        case ActionKind::kOverlapFB:
          claim(kSlotF, a.stage, a.microbatch, id);
          check_stage(id, a.stage2, true);
          if (a.microbatch2 < 0 || a.microbatch2 >= s_.num_microbatches)
            fail("actions", fmt::format("{}: backward microbatch out of range", where(id)));
          claim(kSlotBgrad, a.stage2, a.microbatch2, id);
          claim(kSlotW, a.stage2, a.microbatch2, id);
          break;
        default:
          break;
      }
    }
  }

  std::string missing(const char* what, int stage, int mb) const {
    return fmt::format("{} of stage {} microbatch {} is missing (stage {} is on device {})", what,
                       stage, mb, stage, pl_.stages[stage].device);
  }

  void check_coverage() {
    const int S = pl_.num_stages();
    for (int mb = 0; mb < s_.num_microbatches; ++mb) {
      int pipe = -1;
      for (int st = 0; st < S && pipe < 0; ++st)
        if (slot(kSlotF, st, mb) >= 0) pipe = pl_.stages[st].pipeline;
      if (pipe < 0) fail("actions", fmt::format("microbatch {} has no forward pass at all", mb));
      for (int st = 0; st < S; ++st) {
        const bool mine = pl_.stages[st].pipeline == pipe;
        const int f = slot(kSlotF, st, mb), b = slot(kSlotBgrad, st, mb), w = slot(kSlotW, st, mb);
        if (!mine) {
          int stray = f >= 0 ? f : b >= 0 ? b : w;
          if (stray >= 0)
            fail("actions", fmt::format("{}: microbatch {} runs in pipeline {}, not this one",
                                        where(stray), mb, pipe));
          continue;
        }
        if (f < 0) fail("actions", missing("F", st, mb));
        if (b < 0) fail("actions", missing("B (backward)", st, mb));
        if (w < 0) fail("actions", missing("W (weight gradient)", st, mb));
        if (lowered_) check_lowered(st, mb);
      }
    }
  }

  void check_lowered(int st, int mb) {
    const int prev = pl_.prev_stage(st);
    if (prev >= 0 && pl_.stages[prev].device != pl_.stages[st].device) {
      if (slot(kSlotRecvF, st, mb) < 0) fail("actions", missing("RECV_F", st, mb));
      if (slot(kSlotSendF, prev, mb) < 0) fail("actions", missing("SEND_F", prev, mb));
      if (slot(kSlotSendB, st, mb) < 0) fail("actions", missing("SEND_B", st, mb));
      if (slot(kSlotRecvB, prev, mb) < 0) fail("actions", missing("RECV_B", prev, mb));
    }
  }

  void add(int id, int hop) {
    g_.dep.push_back(id);
    g_.dep_hop.push_back(static_cast<std::int16_t>(hop));
  }

  bool crosses(int a, int b) const { return pl_.stages[a].device != pl_.stages[b].device; }

  void add_forward_deps(int st, int mb) {
    const int prev = pl_.prev_stage(st);
    if (prev < 0) return;
    if (!crosses(prev, st)) return add(slot(kSlotF, prev, mb), -1);
    if (lowered_) return add(slot(kSlotRecvF, st, mb), -1);
    add(slot(kSlotF, prev, mb), prev);
  }

  void add_backward_deps(int st, int mb) {
    add(slot(kSlotF, st, mb), -1);
    if (int r = slot(kSlotR, st, mb); r >= 0) add(r, -1);
    const int next = pl_.next_stage(st);
    if (next < 0) return;
    if (!crosses(next, st)) return add(slot(kSlotBgrad, next, mb), -1);
    if (lowered_) return add(slot(kSlotRecvB, st, mb), -1);
    add(slot(kSlotBgrad, next, mb), next);
  }

  void add_stage_grad_deps(int st) {
    for (int mb = 0; mb < s_.num_microbatches; ++mb)
      if (int w = slot(kSlotW, st, mb); w >= 0) add(w, -1);
  }

  void add_dependencies() {
    g_.dep_begin.reserve(g_.size() + 1);
    g_.dep.reserve(g_.size() * 2);
    g_.dep_hop.reserve(g_.size() * 2);
    for (int id = 0; id < static_cast<int>(g_.size()); ++id) {
      g_.dep_begin.push_back(static_cast<std::int32_t>(g_.dep.size()));
      const Action& a = g_.action[id];
      const int st = a.stage, mb = a.microbatch;
      switch (a.kind) {
        case ActionKind::kF:
          add_forward_deps(st, mb);
          break;
        case ActionKind::kB:
        case ActionKind::kBW:
          add_backward_deps(st, mb);
          break;
        case ActionKind::kW:
          if (slot(kSlotBgrad, st, mb) != id) add(slot(kSlotBgrad, st, mb), -1);
          break;
        case ActionKind::kR:
          add(slot(kSlotF, st, mb), -1);
          break;
        case ActionKind::kSendF:
          add(slot(kSlotF, st, mb), -1);
          break;
        case ActionKind::kSendB:
          add(slot(kSlotBgrad, st, mb), -1);
          break;
        case ActionKind::kRecvF: {
          int prev = pl_.prev_stage(st);
          if (prev < 0) fail("actions", where(id) + ": the first stage receives no forward input");
          add(slot(kSlotSendF, prev, mb), prev);
          break;
        }
        case ActionKind::kRecvB: {
          int next = pl_.next_stage(st);
          if (next < 0) fail("actions", where(id) + ": the last stage receives no gradient");
          add(slot(kSlotSendB, next, mb), next);
          break;
        }
        case ActionKind::kOverlapFB:
          add_forward_deps(st, mb);
          add_backward_deps(a.stage2, a.microbatch2);
          break;
        case ActionKind::kReduceGrad:
        case ActionKind::kPairReduce:
          add_stage_grad_deps(st);
          break;
        default:
          break;
      }
      // A missing counterpart (e.g. RECV_F whose SEND_F does not exist) shows up as -1.
      for (std::size_t k = g_.dep_begin.back(); k < g_.dep.size(); ++k)
        if (g_.dep[k] < 0) fail("actions", where(id) + ": its matching send does not exist");
    }
    g_.dep_begin.push_back(static_cast<std::int32_t>(g_.dep.size()));
  }

  void topological_order() {
    const int D = pl_.num_devices;
    std::vector<std::int32_t> cursor(g_.device_begin.begin(), g_.device_begin.end() - 1);
    std::vector<std::uint8_t> done(g_.size(), 0);
    g_.order.reserve(g_.size());
    bool progress = true;
    while (progress) {
      progress = false;
      for (int d = 0; d < D; ++d) {
        while (cursor[d] < g_.device_begin[d + 1] && ready(cursor[d], done)) {
          done[cursor[d]] = 1;
          g_.order.push_back(cursor[d]++);
          progress = true;
        }
      }
    }
    if (g_.order.size() != g_.size()) report_deadlock(cursor, done);
  }

  bool ready(int id, const std::vector<std::uint8_t>& done) const {
    for (int k = g_.dep_begin[id]; k < g_.dep_begin[id + 1]; ++k)
      if (!done[g_.dep[k]]) return false;
    return true;
  }

  [[noreturn]] void report_deadlock(const std::vector<std::int32_t>& cursor,
                                    const std::vector<std::uint8_t>& done) const {
    std::string msg = "deadlock:";
    for (int d = 0; d < pl_.num_devices; ++d) {
      int id = cursor[d];
      if (id >= g_.device_begin[d + 1]) continue;
      for (int k = g_.dep_begin[id]; k < g_.dep_begin[id + 1]; ++k) {
        if (done[g_.dep[k]]) continue;
        msg += fmt::format(" {} waits for {};", where(id), where(g_.dep[k]));
        break;
      }
    }
    msg.pop_back();
    fail("actions", msg);
  }

  const Schedule& s_;
  const Placement& pl_;
  const std::string& src_;
  const ActionLocator* locate_;
  DependencyGraph g_;
  std::vector<int> index_;
  bool lowered_ = false;
  std::size_t forwards_ = 0;  ///< F and OVERLAP_F_B actions (flatten)
};

}  // namespace

std::string describe_action(const Action& a) {
  if (a.kind == ActionKind::kOverlapFB)
    return fmt::format("OVERLAP F stage {} mb {} with BW stage {} mb {}", a.stage, a.microbatch,
                       a.stage2, a.microbatch2);
  if (!per_microbatch(a.kind)) return fmt::format("{} stage {}", action_kind_name(a.kind), a.stage);
  return fmt::format("{} stage {} mb {}", action_kind_name(a.kind), a.stage, a.microbatch);
}

DependencyGraph build_dependency_graph(const Schedule& schedule, const std::string& source) {
  return Builder(schedule, source, nullptr).build();
}

DependencyGraph build_dependency_graph(const Schedule& schedule, const std::string& source,
                                       const ActionLocator& locate) {
  return Builder(schedule, source, &locate).build();
}

}  // namespace pw
