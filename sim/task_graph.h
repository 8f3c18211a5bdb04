#pragma once
/// The discrete-event simulator's input: tasks on per-GPU streams, dependencies (with optional
/// latency), collectives made of phases of concurrent flows, and memory effects. Everything is
/// dense ids into flat arrays; it is built once per simulation and never changes while running.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/schedule.h"
#include "core/units.h"
#include "sim/chunked_vector.h"
#include "sim/flow_network.h"

namespace pw::des {

/// Streams of one simulated GPU. Compute, TP, DP and host streams run their tasks in the order
/// they were added; the PP send/receive streams run each transfer as soon as its data is ready.
/// kDp carries gradient reductions (and ZeRO-1/2 re-gathers), kDpGather ZeRO-3's weight
/// all-gathers: separate in-order streams, as Megatron-FSDP and FSDP run them.
enum class StreamKind : std::uint8_t { kCompute, kTp, kPpSend, kPpRecv, kDp, kHost, kDpGather };
inline constexpr int kNumStreamKinds = 7;
/// True for the in-order streams.
constexpr bool stream_is_ordered(StreamKind s) {
  return s != StreamKind::kPpSend && s != StreamKind::kPpRecv;
}

/// Memory categories reported per device.
enum class MemCategory : std::uint8_t { kWeights, kGrads, kOptimizer, kActivations, kBuffers };
inline constexpr int kNumMemCategories = 5;

/// Memory a task allocates or frees (bytes or units). Most tasks have none, so the graph keeps
/// them apart from the tasks (Task::effect indexes them).
struct MemoryEffect {
  double mem_at_start = 0;  ///< change of the task's category when it starts
  double mem_at_end = 0;    ///< change of the task's category when it ends
  double buf_at_start = 0;  ///< working-buffer change at start (category kBuffers)
  double buf_at_end = 0;    ///< working-buffer change at end (category kBuffers)
  bool empty() const {
    return mem_at_start == 0 && mem_at_end == 0 && buf_at_start == 0 && buf_at_end == 0;
  }
};

/// One task (24 bytes: an all-ranks simulation holds thousands per GPU). A compute task lasts
/// `duration` at full speed (longer while SM-using communication overlaps it on the same GPU); a
/// communication task lasts as long as its collective. What the task stands for (its label) is
/// kept beside the tasks, and only when asked for (TaskGraph::keep_labels).
struct Task {
  std::int32_t device = 0;
  StreamKind stream = StreamKind::kCompute;
  bool is_compute = true;
  MemCategory mem_category = MemCategory::kActivations;  ///< of mem_at_start/mem_at_end
  TimePs duration = 0;
  std::int32_t collective = -1;  ///< communication tasks: the collective they take part in
  std::int32_t effect = -1;      ///< its MemoryEffect, or -1 (set by the graph)
};
static_assert(sizeof(Task) <= 24, "tasks must stay within 24 bytes");

/// A collective: starts when all its participant tasks are ready, runs its phases one after
/// another (each: a latency, then its flows concurrently), and ends them all at once. Collectives
/// whose phases are equal (latencies, and each flow's bytes and route) share one stored copy: an
/// all-ranks run repeats each collective for every microbatch, layer and bucket (the engine keeps
/// a collective's progress per collective, never in the phases).
struct Collective {
  std::int32_t phase_begin = 0, phase_end = 0;
  bool uses_sm = true;  ///< slows overlapping compute on the participants' GPUs
};
struct Phase {
  TimePs latency = 0;
  std::int32_t flow_begin = 0, flow_end = 0;
};
struct FlowSpec {
  double bytes = 0;
  std::int32_t hop_begin = 0, hop_end = 0;
};

class TaskGraph {
 public:
  explicit TaskGraph(int num_devices = 0) { reset(num_devices); }
  void reset(int num_devices);
  int num_devices() const { return num_devices_; }

  /// Appends a task to its (device, stream) with the memory it allocates and frees and what it
  /// stands for (kept only with keep_labels); returns its id (dense, in insertion order).
  std::int32_t add_task(const Task& t, const MemoryEffect& m = {}, const Action& label = {});
  /// Keep each task's label (for traces and per-action timings; 8 bytes per task). Call before
  /// the first add_task; reset() forgets it.
  void keep_labels() { keep_labels_ = true; }
  bool has_labels() const { return keep_labels_; }
  /// What task `id` stands for (only with keep_labels).
  const Action& label(std::int32_t id) const {
    PW_ASSERT(keep_labels_, "task labels were not kept (TaskGraph::keep_labels)");
    return labels_[id];
  }
  /// Adds `delta` to task `id`'s memory effect, field by field (for builders that know a task's
  /// memory only after adding it); an all-zero delta stores nothing.
  void add_effect(std::int32_t id, const MemoryEffect& delta);
  void set_mem_category(std::int32_t id, MemCategory c) { tasks_[id].mem_category = c; }
  /// `succ` may start only `latency` after `pred` has ended.
  void add_dep(std::int32_t pred, std::int32_t succ, TimePs latency = 0);
  /// New collective; phases and flows added next belong to it.
  std::int32_t add_collective(bool uses_sm);
  void add_phase(TimePs latency);
  /// Adds a flow to the last phase of the last collective.
  void add_flow(double bytes, const std::vector<RouteHop>& hops);
  void add_flow(double bytes, const RouteHop* hops, int n);
  /// Adds a flow whose route is resolved later (resolve_pending_flows): `route_key` (>= 0) is the
  /// builder's name for it (e.g. a source-destination pair); `bytes` < 0 means -bytes seconds at
  /// the route's scale.
  void add_pending_flow(double bytes, std::int32_t route_key);
  /// Stores a route once for many flows; returns its first hop (its hops run to the returned
  /// value + hops.size()). For builders that resolve routes after the graph's structure is known.
  std::int32_t add_route(const std::vector<RouteHop>& hops);
  /// Gives every pending flow of key k the stored route [hop_begin[k], hop_end[k]) and, where
  /// its bytes are negative (seconds), -bytes * scale[k] bytes. Call once, before finalize().
  void resolve_pending_flows(const std::vector<std::int32_t>& hop_begin,
                             const std::vector<std::int32_t>& hop_end,
                             const std::vector<double>& scale);
  /// Phases and flows stored (after sharing; for tests and benchmarks).
  std::size_t num_phases() const { return phases_.size(); }
  std::size_t num_flows() const { return flows_.size(); }
  /// A flow of another job over a route stored with add_route: it starts with the iteration and
  /// shares its links for the whole run (FlowNetwork::start_background).
  void add_background_flow(std::int32_t hop_begin, std::int32_t hop_end);
  /// Memory held by a device before the iteration starts (weights, optimizer state).
  void add_initial_memory(int device, MemCategory c, double amount);

  /// Builds the successor and stream arrays and releases the edge lists; call once after the
  /// last add. With `renumbered` (a graph without labels), the tasks are renumbered so that
  /// tasks running at about the same time sit together in memory (each device's k-th task, device
  /// by device, then the (k+1)-th: an all-ranks run touches every GPU's next tasks, which added
  /// rank by rank lie a GPU's whole share apart), and *renumbered gets each task's new id by the
  /// id add_task returned (the caller re-keys what it holds). Stream, successor and participant
  /// orders and the engine's start-up order are those of insertion, so a run gives the same
  /// result either way. Ids given by task(), stream_tasks() and the engine are the new ones.
  void finalize(std::vector<std::int32_t>* renumbered = nullptr);

  std::size_t size() const { return tasks_.size(); }
  const Task& task(std::int32_t id) const { return tasks_[id]; }
  /// Tasks of one (device, stream) in stream order (after finalize()).
  std::span<const std::int32_t> stream_tasks(int device, StreamKind s) const {
    const std::size_t sid =
        static_cast<std::size_t>(device) * kNumStreamKinds + static_cast<int>(s);
    return {stream_tasks_.data() + stream_begin_[sid],
            static_cast<std::size_t>(stream_begin_[sid + 1] - stream_begin_[sid])};
  }

 private:
  friend class Engine;
  int num_devices_ = 0;
  // Appended while building (chunked: no copies, no slack beyond one chunk).
  ChunkedVector<Task> tasks_;
  ChunkedVector<Action> labels_;  ///< per task, with keep_labels_
  bool keep_labels_ = false;
  ChunkedVector<MemoryEffect> effects_;
  ChunkedVector<std::int32_t> edge_pred_, edge_succ_;
  ChunkedVector<TimePs> edge_latency_;  ///< kept once some dependency has a latency
  bool has_latency_ = false;
  ChunkedVector<Collective> collectives_;
  ChunkedVector<Phase> phases_;
  ChunkedVector<FlowSpec> flows_;
  /// Shares the last collective's phases with an earlier equal collective's (see Collective);
  /// collectives before sealed_ are done. Equal ranges are found by hash, then compared.
  void seal_last_collective();
  std::int32_t sealed_ = 0;
  std::unordered_multimap<std::uint64_t, std::int32_t> shared_;  ///< hash -> collective
  std::vector<RouteHop> hops_;
  std::vector<std::pair<std::int32_t, std::int32_t>> background_;  ///< hop ranges
  std::vector<double> initial_memory_;  ///< device * kNumMemCategories + category
  // Built by finalize():
  std::vector<std::int32_t> succ_begin_, succ_;
  std::vector<TimePs> succ_latency_;  ///< empty when every latency is 0
  std::vector<std::int32_t> num_preds_;
  std::vector<std::int32_t> stream_begin_, stream_tasks_;  ///< per stream id, task ids in order
  std::vector<std::int32_t> part_begin_, part_;            ///< per collective, participant tasks
  std::vector<std::int32_t> initial_;  ///< tasks without predecessors, in insertion order
};

}  // namespace pw::des
