#pragma once
/// The discrete-event engine: runs a TaskGraph on its streams, shares links among flows max-min
/// fairly, slows compute that overlaps SM-using communication, and tracks memory per device and
/// category. One run allocates nothing per event once its arrays have grown.
#include <cstdint>
#include <vector>

#include "core/units.h"
#include "sim/event_queue.h"
#include "sim/flow_network.h"
#include "sim/task_graph.h"

namespace pw::des {

struct EngineOptions {
  /// Share by which compute slows while SM-using communication runs on the same GPU (0 = none;
  /// 0.1 = compute runs at 90% speed).
  double comm_compute_slowdown = 0.0;
  /// Record each device's memory step function (time, total) in EngineResult::memory.
  bool memory_timeline = false;
};

struct MemoryStep {
  TimePs time = 0;
  double total = 0;
};

struct DeviceRun {
  TimePs first_compute_start = 0;
  TimePs last_end = 0;
  TimePs busy = 0;                                  ///< time the compute stream was occupied
  double peak_total = 0;                            ///< peak of the sum over categories
  double peak_by_category[kNumMemCategories] = {};  ///< categories at the moment of peak_total
  double max_by_category[kNumMemCategories] = {};   ///< each category's own maximum
};

struct EngineResult {
  /// Per task; a communication task starts when its collective does (all participants ready).
  std::vector<TimePs> start, end;
  std::vector<DeviceRun> device;
  TimePs makespan = 0;                          ///< last end - first compute start over all devices
  std::uint64_t events = 0;                     ///< events popped (stale ones included)
  std::vector<std::vector<MemoryStep>> memory;  ///< when asked for
  bool completed = true;  ///< false if some task never ran (a cyclic or stuck graph)
};

class Engine {
 public:
  /// Link capacities in bytes per second (link ids as used by the graph's routes).
  explicit Engine(const std::vector<double>& link_bytes_per_sec = {});
  /// Runs `g` (finalized) from time 0 to the end; the result is reused across runs.
  const EngineResult& run(const TaskGraph& g, const EngineOptions& opt = {});
  /// The flow network of the last run (per-link bytes and saturated time).
  const FlowNetwork& network() const { return net_; }

 private:
  enum EventType : std::uint8_t { kTaskEnd, kDepArrive, kFlowEnd, kPhaseReady, kFlowFlush };
  void try_start(std::int32_t task);
  void start_task(std::int32_t task);
  void end_task(std::int32_t task);
  void arrive(std::int32_t succ);
  void start_phase(std::int32_t coll);
  void start_flows(std::int32_t coll);
  void end_collective(std::int32_t coll);
  void set_sm_comm(int device, int delta);
  void apply_memory(int device, MemCategory c, double delta);

  const TaskGraph* g_ = nullptr;
  EngineOptions opt_;
  EventQueue q_;
  FlowNetwork net_;
  EngineResult r_;
  // Per task (a task has started once its start time is set).
  std::vector<std::int32_t> preds_left_;
  // Per device: generation of its running compute task's end event (a rescheduled end makes the
  // older event stale; one compute task runs per device at a time).
  std::vector<std::uint32_t> gen_;
  // Per device (one compute task runs at a time): the running task's nominal ps still to run,
  // and since when at the current rate.
  std::vector<double> work_left_;
  std::vector<TimePs> work_since_;
  // Per stream: position of the next task to run.
  std::vector<std::int32_t> head_;
  // Per collective.
  std::vector<std::int32_t> arrived_, phase_, flows_left_;
  // Per device.
  std::vector<std::int32_t> running_compute_;
  std::vector<std::int32_t> sm_comm_;
  std::vector<double> mem_;  ///< device * kNumMemCategories + category
  std::vector<double> mem_total_;
};

}  // namespace pw::des
