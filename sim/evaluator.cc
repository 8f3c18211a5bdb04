#include "sim/evaluator.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace pw {

Evaluator::Evaluator(const Schedule& schedule) : Evaluator(schedule, "") {}

Evaluator::Evaluator(const Schedule& schedule, const std::string& source)
    : schedule_(schedule), graph_(build_dependency_graph(schedule_, source)) {
  const std::size_t n = graph_.size();
  cost_index_.resize(n);
  pair_index_.assign(n, -1);
  alloc_index_.resize(n);
  free_index_.resize(n);
  compute_.resize(n);
  for (std::size_t id = 0; id < n; ++id) {
    const Action& a = graph_.action[id];
    const int stage = std::max<int>(a.stage, 0);
    const int base = stage * kNumActionKinds;
    cost_index_[id] = base + static_cast<int>(a.kind);
    alloc_index_[id] = cost_index_[id];
    free_index_[id] = cost_index_[id];
    if (a.kind == ActionKind::kOverlapFB) {
      alloc_index_[id] = base + static_cast<int>(ActionKind::kF);
      free_index_[id] = a.stage2 * kNumActionKinds + static_cast<int>(ActionKind::kBW);
      pair_index_[id] = free_index_[id];
    }
    compute_[id] = is_compute(a.kind) ? 1 : 0;
  }
  const int D = schedule_.placement.num_devices;
  clock_.resize(D);
  mem_now_.resize(D);
  result_.start.resize(n);
  result_.end.resize(n);
  result_.device.resize(D);
}

const EvalResult& Evaluator::run(const CostTable& costs, bool memory_timeline) {
  PW_ASSERT(costs.num_stages == schedule_.placement.num_stages(),
            "cost table stage count differs from the schedule's");
  const int D = schedule_.placement.num_devices;
  std::fill(clock_.begin(), clock_.end(), TimePs{0});
  std::fill(mem_now_.begin(), mem_now_.end(), 0.0);
  constexpr TimePs kNever = std::numeric_limits<TimePs>::max();
  for (DeviceStats& ds : result_.device) ds = DeviceStats{kNever, 0, 0, 0.0};
  if (memory_timeline) {
    result_.memory.assign(D, {});
  } else {
    result_.memory.clear();
  }
  const TimePs* dur = costs.duration.data();
  const double* mem = costs.mem_delta.data();
  const TimePs* hop = costs.comm.data();
  const std::int32_t* dep = graph_.dep.data();
  const std::int16_t* dep_hop = graph_.dep_hop.data();
  const std::int32_t* dep_begin = graph_.dep_begin.data();
  TimePs* start = result_.start.data();
  TimePs* end = result_.end.data();

  for (const std::int32_t id : graph_.order) {
    const int d = graph_.device_of[id];
    TimePs t = clock_[d];
    for (int k = dep_begin[id]; k < dep_begin[id + 1]; ++k) {
      const TimePs ready = end[dep[k]] + (dep_hop[k] >= 0 ? hop[dep_hop[k]] : 0);
      t = std::max(t, ready);
    }
    TimePs e = t + dur[cost_index_[id]];
    if (costs.overlap_pairs && pair_index_[id] >= 0) e += dur[pair_index_[id]];
    start[id] = t;
    end[id] = e;
    clock_[d] = e;
    DeviceStats& ds = result_.device[d];
    if (compute_[id]) {
      ds.busy += e - t;
      ds.first_start = std::min(ds.first_start, t);
    }
    ds.last_end = e;
    const double up = mem[alloc_index_[id]];
    const double down = mem[free_index_[id]];
    if (up > 0) mem_now_[d] += up;
    ds.peak_memory = std::max(ds.peak_memory, mem_now_[d]);
    if (memory_timeline && up > 0) result_.memory[d].push_back({t, mem_now_[d]});
    if (down < 0) {
      mem_now_[d] += down;
      if (memory_timeline) result_.memory[d].push_back({e, mem_now_[d]});
    }
  }

  TimePs first = kNever, last = 0;
  result_.cost = 0;
  result_.ideal = 0;
  for (DeviceStats& ds : result_.device) {
    if (ds.first_start == kNever) ds.first_start = 0;
    first = std::min(first, ds.first_start);
    last = std::max(last, ds.last_end);
    result_.cost = std::max(result_.cost, ds.last_end - ds.first_start);
    result_.ideal = std::max(result_.ideal, ds.busy);
  }
  result_.makespan = last > first ? last - first : 0;
  const double cost = static_cast<double>(result_.cost);
  const double ideal = static_cast<double>(result_.ideal);
  result_.bubble_rate = cost > 0 ? (cost - ideal) / cost : 0.0;
  result_.bubble_fraction = ideal > 0 ? (cost - ideal) / ideal : 0.0;
  return result_;
}

EvalResult evaluate(const Schedule& schedule, const CostTable& costs, bool memory_timeline) {
  Evaluator ev(schedule);
  return ev.run(costs, memory_timeline);
}

}  // namespace pw
