#include "planner/schedules/order_timing.h"

#include <algorithm>

#include "core/error.h"

namespace pw::detail {

Flat::Flat(const Schedule& s, const CostTable& costs) : g(build_dependency_graph(s)) {
  const std::size_t n = g.size();
  dur.resize(n);
  mem.resize(n);
  for (std::size_t id = 0; id < n; ++id) {
    const Action& a = g.action[id];
    dur[id] = costs.time(std::max<int>(a.stage, 0), a.kind);
    mem[id] = costs.mem(std::max<int>(a.stage, 0), a.kind);
  }
  dep_cost.resize(g.dep.size());
  for (std::size_t k = 0; k < g.dep.size(); ++k)
    dep_cost[k] = g.dep_hop[k] >= 0 ? costs.comm[g.dep_hop[k]] : 0;
  succ_begin.assign(n + 1, 0);
  for (const std::int32_t d : g.dep) ++succ_begin[d + 1];
  for (std::size_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
  succ.resize(g.dep.size());
  std::vector<std::int32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
  for (std::size_t id = 0; id < n; ++id)
    for (int k = g.dep_begin[id]; k < g.dep_begin[id + 1]; ++k)
      succ[fill[g.dep[k]]++] = static_cast<std::int32_t>(id);
}

// Times `ord` by sweeping the devices: each advances through its order while its next pass's data
// is ready (timed), until none can; the orders deadlock if some pass is left. The times do not
// depend on the sweep's order (a pass's start is fixed by its predecessors).
bool time_orders(const Flat& f, const Orders& ord, Timeline& tl) {
  const std::size_t n = f.size();
  tl.start.assign(n, kNever);
  tl.end.assign(n, kNever);
  tl.ready.resize(n);
  tl.head.assign(ord.size(), 0);
  std::size_t timed = 0;
  // Sweeps alternate direction: data flows down the pipeline and back up (V shapes, backwards).
  const std::size_t D = ord.size();
  for (bool progress = true, down = true; progress; down = !down) {
    progress = false;
    for (std::size_t step = 0; step < D; ++step) {
      const std::size_t d = down ? step : D - 1 - step;
      const auto& dev = ord[d];
      std::size_t& h = tl.head[d];
      TimePs free = h > 0 ? tl.end[dev[h - 1]] : 0;
      for (; h < dev.size(); ++h) {
        const std::int32_t id = dev[h];
        const TimePs ready = f.data_ready(id, tl.end);
        if (ready == kNever) break;
        tl.ready[id] = ready;
        tl.start[id] = std::max(free, ready);
        free = tl.end[id] = tl.start[id] + f.dur[id];
        ++timed;
        progress = true;
      }
    }
  }
  if (timed != n) return false;
  TimePs first_all = kNever, last_all = 0;
  tl.cost = 0;
  for (const auto& dev : ord) {
    if (dev.empty()) continue;
    const TimePs first = tl.start[dev.front()], last = tl.end[dev.back()];
    first_all = std::min(first_all, first);
    last_all = std::max(last_all, last);
    tl.cost = std::max(tl.cost, last - first);
  }
  tl.makespan = first_all == kNever ? 0 : last_all - first_all;
  return true;
}

Orders graph_orders(const Flat& f) {
  Orders ord(f.devices());
  for (int d = 0; d < f.devices(); ++d)
    for (std::int32_t id = f.g.device_begin[d]; id < f.g.device_begin[d + 1]; ++id)
      ord[d].push_back(id);
  return ord;
}

void write_orders(const Flat& f, const Orders& ord, Schedule& s) {
  for (int d = 0; d < f.devices(); ++d) {
    auto& out = s.actions[d];
    out.clear();
    for (const std::int32_t id : ord[d]) out.push_back(f.g.action[id]);
  }
}

ActionIds::ActionIds(const Flat& f, int num_stages, int num_microbatches)
    : f_(&f), stages_(num_stages), m_(num_microbatches) {
  id_.assign(static_cast<std::size_t>(num_stages) * kNumActionKinds * num_microbatches, -1);
  for (std::size_t id = 0; id < f.size(); ++id) {
    const Action& a = f.g.action[id];
    PW_ASSERT(a.stage >= 0 && a.stage < stages_ && a.microbatch >= 0 && a.microbatch < m_,
              "ActionIds: a pass outside its stages and microbatches");
    id_[cell(a)] = static_cast<std::int32_t>(id);
  }
}

std::optional<Orders> ActionIds::orders_of(const Schedule& s) const {
  Orders ord(s.actions.size());
  const std::size_t size = f_->size();
  const auto& device_of = f_->g.device_of;
  std::vector<char> seen(size, 0);
  std::size_t mapped = 0;
  for (std::size_t d = 0; d < s.actions.size(); ++d) {
    ord[d].reserve(s.actions[d].size());
    for (const Action& a : s.actions[d]) {
      if (a.stage < 0 || a.stage >= stages_ || a.microbatch < 0 || a.microbatch >= m_)
        return std::nullopt;
      const std::int32_t id = id_[cell(a)];
      if (id < 0 || seen[id] || device_of[id] != static_cast<int>(d)) return std::nullopt;
      seen[id] = 1;
      ord[d].push_back(id);
      ++mapped;
    }
  }
  if (mapped != size) return std::nullopt;
  return ord;
}

}  // namespace pw::detail
