#pragma once
/// Internal: turns an IterationInput into a TaskGraph (see sim/iteration.h). Split out so the
/// graph construction and the result/trace extraction stay in separate files.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dependency.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/memory.h"
#include "hwmodels/rank_layout.h"
#include "hwmodels/topology.h"
#include "hwmodels/transformer.h"
#include "sim/engine.h"
#include "sim/iteration.h"
#include "sim/task_graph.h"

namespace pw::detail {

/// A simulated GPU and its coordinates.
struct SimRank {
  int gpu = 0;
  int tr = 0, dr = 0, pr = 0;
};

/// Per task: the communication kind (or 255 for compute) and trace extras.
inline constexpr std::uint8_t kComputeTag = 255;

/// The schedule action a task stands for (its label in traces and per-action timings).
inline Action label(ActionKind k, int stage, int mb) {
  return Action{k, static_cast<std::int16_t>(stage), mb};
}

struct BuiltIteration {
  des::TaskGraph graph;
  std::vector<double> link_capacity;  ///< bytes/s, topology links then PCIe links
  /// The cluster the routes run over (for link names). Held by pointer: Boost's adjacency list
  /// has no move constructor, so a by-value member was copied on every move of this struct.
  std::unique_ptr<const hw::Topology> topology;
  std::vector<SimRank> ranks;
  des::ChunkedVector<std::uint8_t> comm_kind;  ///< per task: CommKind or kComputeTag
  des::ChunkedVector<std::int32_t>
      flow_to;  ///< per task with a trace: consumer of a PP send, or -1
  double offload_gpu_share = 1;
  /// Per (simulated rank, action of its pipeline rank), at action_slot(sim, id) (ids device-major,
  /// as core/dependency.h numbers them; a rank holds only its pipeline rank's actions): the task
  /// that starts the action and the task whose end completes it (its compute, or the TP
  /// collective that follows it). Built only for per-action timings (empty otherwise).
  std::size_t num_actions = 0;
  std::vector<std::int64_t> action_offset;  ///< per simulated rank: slot of action id 0
  std::size_t action_slot(int sim, int id) const {
    return static_cast<std::size_t>(action_offset[sim] + id);
  }
  std::vector<std::int32_t> action_first, action_last;
  /// Same indexing: for an explicit SEND_F/SEND_B, the PP send task it feeds (else -1).
  std::vector<std::int32_t> action_send;
};

/// Per-action intervals of `schedule` (the one `b` was built from) on each pipeline rank's
/// representative GPU (tensor rank 0, data rank 0): start of the action's first task to the end
/// of its last; an explicit SEND lasts until its transfer completes; an explicit REDUCE_GRAD of a
/// stage (OPT) spans the first to the last gradient-reduction (optimizer) task of that stage
/// (rank), the DES modelling those apart from the schedule. Device-major order.
void action_timings(const Schedule& schedule, const BuiltIteration& b, const des::EngineResult& er,
                    std::vector<ActionTiming>* out);

class IterationBuilder {
 public:
  /// With `timings`, the graph keeps what action_timings reads (task labels and the task ids of
  /// every action); with opt.trace, what the trace draws (labels, send -> consumer arrows).
  /// Without them neither is stored (16 of a task's bytes in an all-ranks run).
  IterationBuilder(const IterationInput& in, const IterationOptions& opt, bool timings = false);
  BuiltIteration build();

 private:
  struct PassTasks {
    std::int32_t first = -1;  ///< first compute task
    std::int32_t last = -1;   ///< task whose end completes the pass
  };
  void build_passes();
  void build_transfers();
  /// How pipeline transfers are posted and waited for. kDataReady: a transfer starts when its
  /// data is ready and the sender's next pass waits for it (blocking_p2p); the others are
  /// Megatron's calls in its two schedules (schedules.py): kPerPass (1F1B: one blocking call
  /// after each pass), kPairs (interleaved: one per forward-backward pair in the steady state),
  /// kOverlapped (interleaved with overlap_p2p_comm: calls per direction, waited for late).
  enum class P2pModel : std::uint8_t { kDataReady, kPerPass, kPairs, kOverlapped };
  /// Per action id (-1: none): the pass whose end posts the receive of the action's input
  /// (-1: the step's start), the pass whose start waits for that receive, the pass whose send
  /// must complete before the receive is posted, the pass whose end posts the action's own send
  /// (-1: the action's end) and the pass whose start waits for that send. Empty arrays with
  /// kDataReady (other schedules, or an order that is not Megatron's). Explicit SEND/RECV
  /// actions (a lowered plan) stand for the passes next to them.
  struct P2pCalls {
    P2pModel model = P2pModel::kDataReady;
    std::vector<std::int32_t> recv_post, recv_wait, recv_after_send, send_post, send_hold;
  };
  P2pCalls p2p_calls() const;
  /// The gradient reductions after the backward passes, per simulated rank on its in-order DP
  /// stream, stages in the order their last backward ends: a stage replicated across pipelines
  /// (BitPipe's PAIR_REDUCE) first all-reduces its gradients with its copies' devices, then (d >
  /// 1) the data-parallel reduction of its buckets.
  void build_data_parallel();
  void build_embedding_sync();
  void build_optimizer();
  /// overlap_param_gather (ZeRO-1/2, d > 1): one simulated rank's all-gathers of its chunks'
  /// updated weights at the start of the step, on its DP gather stream in chunk order, per
  /// schedule stage: the first bucket's task and the other buckets' (-1 for none), the stage's
  /// chunk index on the device (-1: not on it), and the stage of each chunk. Empty `first`
  /// when the option is off. hw::param_gather_aligned names the dispatch rule.
  struct ParamGathers {
    bool aligned = false;
    std::vector<std::int32_t> first, rest;
    std::vector<int> chunk, by_chunk;
  };
  ParamGathers param_gathers(int sim);
  /// ZeRO-3: the share of stage `st`'s gathered bytes that are expert weights gathered over the
  /// expert-DP group (its expert fraction where that group is another than the DP group and
  /// has more than one rank; 0 otherwise).
  double expert_share(int st) const;
  /// ZeRO-3: the share of stage `st`'s gathered bytes the DP group does not gather: its expert
  /// fraction where expert weights are not gathered over the DP group (expert_share, or none at
  /// all where each rank's experts are its own).
  double dense_drop(int st) const;
  /// ZeRO-1/2: the all-gather of `bytes` of updated expert weights of `stage` (bucket part
  /// `part`, `count` calls) over the rank's expert-DP group, on the stream the dense gather of
  /// the same weights takes next (the DP stream after the step, the gather stream with
  /// overlap_param_gather).
  std::int32_t expert_gather_first(int sim, int stage, int part, double bytes, int count);
  bool param_gather_overlapped() const;
  std::int32_t add_compute(int sim, TimePs dur, double mem_start, double mem_end,
                           const Action& label,
                           des::MemCategory cat = des::MemCategory::kActivations);
  std::int32_t add_comm(int sim, des::StreamKind stream, std::int32_t coll, CommKind kind,
                        const Action& label);
  /// Adds phases for `kind` of `bytes` over `group` (GPU ids in rank order) to the last
  /// collective; flows only for the members that are simulated (all, or member 0).
  void add_collective_phases(hw::CollectiveKind kind, double bytes, int count,
                             const std::vector<int>& group, int only_member = -1);
  /// Collective id for `key` (at most 5 numbers), created (with uses_sm) on first use; `fresh`
  /// tells which.
  std::int32_t keyed_collective(std::initializer_list<int> key, bool* fresh);
  using CollKey = std::array<int, 6>;  ///< the numbers, zero-padded, then their count
  struct CollKeyHash {
    std::size_t operator()(const CollKey& k) const;
  };
  std::unordered_map<CollKey, std::int32_t, CollKeyHash> coll_by_key_;
  /// A collective's algorithm steps over a group and each member's partner in each step, kept
  /// per (kind, bytes, group): an all-ranks build asks for the same ones many times.
  struct StepPlan {
    std::vector<hw::CollectiveStep> steps;
    std::vector<int> partner;  ///< step * group size + member: the member it sends to
  };
  const StepPlan& step_plan(hw::CollectiveKind kind, double bytes, const std::vector<int>& group);
  std::map<std::tuple<int, double, std::vector<int>>, StepPlan, std::less<>> step_plans_;
  void add_point_phase(int src, int dst, double bytes);
  /// One step of a context-parallel ring (hw::cp_ring_exposed), to the last collective: every
  /// simulated member sends to the next member of `group` the messages of `comms` (send/recv,
  /// count over all `steps` steps), after the slowest pair's latency once per message.
  void add_ring_step_phase(const std::vector<hw::TpComm>& comms, int steps,
                           const std::vector<int>& group);
  void add_flow(int src, int dst, double bytes);
  int pair_of(int src, int dst);
  int sim_of(int tr, int dr, int pr) const;
  bool is_member_simulated(int member_index) const;
  void resolve_routes();

  const IterationInput& in_;
  const IterationOptions& opt_;
  bool timings_ = false;  ///< keep the action -> task map and labels
  bool arrows_ = false;   ///< keep the trace's send -> consumer arrows (flow_to)
  std::unique_ptr<hw::Topology> topo_owned_;  ///< built once, handed to out_ by build()
  const hw::Topology& topo_;
  hw::GpuModel gpu_;
  hw::RankLayout layout_;
  hw::WorkloadOptions wo_;
  DependencyGraph dep_;
  std::vector<hw::StageCosts> costs_;
  std::vector<double> stage_params_;         ///< per schedule stage, per rank (experts included)
  std::vector<double> stage_expert_params_;  ///< the expert part of stage_params_
  std::vector<double> stage_layer_params_;   ///< its transformer layers' part (no embedding/head)
  /// ZeRO-3 by layer or tensor: the all-gathers each pass of the stage makes
  /// (hw::zero3_pass_gathers).
  std::vector<hw::Zero3PassGathers> stage_gathers_;
  /// Per schedule stage: the pipeline devices that hold a copy of its layers (BitPipe's two
  /// opposite pipelines: devices j and p-1-j), sorted, when more than one; empty otherwise.
  std::vector<std::vector<int>> stage_copies_;
  bool has_recompute_actions_ = false;
  BuiltIteration out_;
  std::vector<int> sim_of_gpu_;
  // pass_[sim * num_actions + action id]
  std::vector<PassTasks> pass_;
  std::size_t num_actions_ = 0;
  // Last-backward split: per (sim, stage) the sub-task ids of its last backward.
  std::vector<std::vector<std::int32_t>> bucket_tasks_;
  std::vector<std::int32_t> last_compute_;  ///< per sim rank
  /// Per (sim, stage): the stage's last backward task (-1: none on this rank).
  std::vector<std::int32_t> stage_grads_ready_;
  std::vector<std::int32_t> first_backward_;         ///< per sim rank
  std::vector<std::vector<std::int32_t>> dp_tasks_;  ///< per sim rank
  /// Per sim rank: the pipeline sends of its last call, which Megatron waits for before the
  /// step ends (the optimizer step follows them).
  std::vector<std::vector<std::int32_t>> step_waits_;
  // Flow routes: a flow's route key is its (source, destination) pair id, resolved after the
  // graph is built.
  // (src, dst) -> pair id: open addressing with linear probing (a flow of an all-ranks graph
  // looks its pair up once; a node-based map cost 7% of such a run). Keys are
  // src << 32 | dst, kNoPair marks an empty slot; the size is a power of two, under half full.
  static constexpr std::int64_t kNoPair = -1;
  std::vector<std::int64_t> pair_key_;
  std::vector<int> pair_slot_id_;
  std::vector<std::pair<int, int>> pairs_;
  std::vector<TimePs> pair_latency_;  ///< per pair: path latency, -1 until asked
};

}  // namespace pw::detail
