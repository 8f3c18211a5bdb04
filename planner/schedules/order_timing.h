#pragma once
/// Internal to planner/schedules: re-timing other orders of one schedule's actions, shared by
/// the building-block reordering (block_reorder.cc: gap filling, list scheduling, local search).
/// A Flat holds the schedule's dependency graph with one cost table's durations, memory deltas
/// and hop times; Orders are per-device sequences of its action ids.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "core/cost_table.h"
#include "core/dependency.h"
#include "core/schedule.h"
#include "core/units.h"

namespace pw::detail {

inline constexpr TimePs kNever = std::numeric_limits<TimePs>::max();

// Flat view of a schedule for re-timing other orders of the same actions: ids are the
// DependencyGraph's, durations, memory deltas and hop costs come from one cost table.
struct Flat {
  DependencyGraph g;
  std::vector<TimePs> dur;
  std::vector<double> mem;
  std::vector<TimePs> dep_cost;  // per dependency entry: the hop time (0 on the same device)
  std::vector<std::int32_t> succ_begin, succ;

  Flat(const Schedule& s, const CostTable& costs);
  int devices() const { return static_cast<int>(g.device_begin.size()) - 1; }
  std::size_t size() const { return g.size(); }
  // Earliest start allowed by the data dependencies alone (kNever if one is not timed yet).
  TimePs data_ready(std::int32_t id, const std::vector<TimePs>& end) const {
    TimePs t = 0;
    for (int k = g.dep_begin[id]; k < g.dep_begin[id + 1]; ++k) {
      const TimePs e = end[g.dep[k]];
      if (e == kNever) return kNever;
      t = std::max(t, e + dep_cost[k]);
    }
    return t;
  }
};

// Timeline of one order: each pass starts when its device's previous pass has ended and its data
// has arrived.
struct Timeline {
  std::vector<TimePs> start, end;
  std::vector<TimePs> ready;  // when each pass's data had arrived
  TimePs makespan = 0, cost = 0;
  std::vector<std::size_t> head;  // per device: its next pass to time
};

using Orders = std::vector<std::vector<std::int32_t>>;

/// Times `ord` as soon as possible (each pass when its device's previous pass has ended and its
/// data has arrived); false when the orders deadlock.
bool time_orders(const Flat& f, const Orders& ord, Timeline& tl);
/// The schedule's own orders.
Orders graph_orders(const Flat& f);
/// Writes `ord` back into `s`'s per-device action lists.
void write_orders(const Flat& f, const Orders& ord, Schedule& s);

/// The Flat's action ids by (stage, kind, microbatch), to time other orders of the same passes
/// on its graph: candidates that only reorder one schedule's passes share one Flat. It reads the
/// Flat's devices and size from the Flat, which must outlive it.
class ActionIds {
 public:
  ActionIds(const Flat& f, int num_stages, int num_microbatches);
  /// `s`'s per-device orders as the Flat's ids; nullopt when `s` holds other passes than the
  /// Flat's (one missing, one more, or one of another stage, kind or microbatch).
  std::optional<Orders> orders_of(const Schedule& s) const;

 private:
  std::size_t cell(const Action& a) const {
    return (static_cast<std::size_t>(a.stage) * kNumActionKinds + static_cast<int>(a.kind)) * m_ +
           static_cast<std::size_t>(a.microbatch);
  }
  const Flat* f_;
  int stages_, m_;
  std::vector<std::int32_t> id_;  // -1: no such pass in the Flat
};

}  // namespace pw::detail
