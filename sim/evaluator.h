#pragma once
/// The fixed-cost schedule evaluator: one pass over the actions in a dependency-respecting order
/// with per-device clocks in flat arrays. No event queue and no allocation per action; it is the
/// planner's inner loop. Cross-device dependencies pay the cost table's hop time.
#include <cstdint>
#include <vector>

#include "core/cost_table.h"
#include "core/dependency.h"
#include "core/schedule.h"
#include "core/units.h"

namespace pw {

/// Per-device figures of one evaluation.
struct DeviceStats {
  TimePs first_start = 0;  ///< start of the device's first compute action
  TimePs last_end = 0;     ///< end of the device's last action
  TimePs busy = 0;         ///< total time of compute actions (F, B, W, BW, R, OVERLAP)
  double peak_memory = 0;  ///< peak of the running activation sum, in the cost table's units
};

/// One point of a device's activation-memory step function: `value` holds from `time` on.
struct MemoryPoint {
  TimePs time = 0;
  double value = 0;
};

/// Results indexed by action id (DependencyGraph numbering: device-major).
struct EvalResult {
  std::vector<TimePs> start;
  std::vector<TimePs> end;
  std::vector<DeviceStats> device;
  TimePs makespan = 0;  ///< last end - first start over all devices
  /// Zero-bubble convention: the largest device span (last end - first compute start).
  TimePs cost = 0;
  /// Largest per-device busy time (the bubble-free iteration).
  TimePs ideal = 0;
  double bubble_rate = 0;      ///< (cost - ideal) / cost  (zero-bubble papers)
  double bubble_fraction = 0;  ///< (cost - ideal) / ideal (Megatron)
  /// Per device activation memory over time; filled only when asked for.
  std::vector<std::vector<MemoryPoint>> memory;
};

/// Evaluates one schedule under any number of cost tables. Construction validates the schedule
/// (throws ConfigError when it is illegal) and precomputes the flat arrays.
class Evaluator {
 public:
  explicit Evaluator(const Schedule& schedule);
  /// As above; `source` (e.g. a file name) prefixes the message when the schedule is illegal.
  Evaluator(const Schedule& schedule, const std::string& source);

  /// Evaluates under `costs` (which must have one entry per stage). With `memory_timeline` the
  /// per-device memory step functions are recorded too. The result is reused across calls.
  const EvalResult& run(const CostTable& costs, bool memory_timeline = false);

  const DependencyGraph& graph() const { return graph_; }
  const Schedule& schedule() const { return schedule_; }

 private:
  Schedule schedule_;
  DependencyGraph graph_;
  std::vector<std::int32_t> cost_index_;   ///< stage * kNumActionKinds + kind, per action
  std::vector<std::int32_t> pair_index_;   ///< OVERLAP_F_B: stage2's kBW entry, else -1
  std::vector<std::int32_t> alloc_index_;  ///< mem_delta index applied at start (if positive)
  std::vector<std::int32_t> free_index_;   ///< mem_delta index applied at end (if negative)
  std::vector<std::uint8_t> compute_;      ///< 1 for compute actions
  std::vector<TimePs> clock_;
  std::vector<double> mem_now_;
  EvalResult result_;
};

/// Convenience: validate, evaluate once and return a copy.
EvalResult evaluate(const Schedule& schedule, const CostTable& costs, bool memory_timeline = false);

}  // namespace pw
