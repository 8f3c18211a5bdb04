#pragma once
/// One training iteration of a data x tensor x pipeline parallel configuration, simulated by the
/// discrete-event engine: the schedule's passes with costs from the workload model, the TP
/// collectives inside each pass, PP transfers (with Megatron's scatter/gather), the bucketed DP
/// gradient reduction overlapped with the backward, ZeRO-1/2/3 reduce-scatter and all-gather,
/// optional optimizer-state offload and the optimizer step. See docs/simulator.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/schedule.h"
#include "core/trace.h"
#include "core/units.h"
#include "hwmodels/collectives.h"
#include "hwmodels/optimizer.h"
#include "hwmodels/profile.h"
#include "hwmodels/topology.h"
#include "sim/task_graph.h"

namespace pw {

/// How an iteration is simulated (defaults follow Megatron-LM's).
struct IterationOptions {
  /// true: one representative GPU per pipeline rank (tensor rank 0, data rank 0), with each of
  /// its flows weighted by the symmetric copies that share a link; false: every GPU. A topology
  /// with slow GPUs or degraded or failed NICs (not TopologySpec::symmetric()) always simulates
  /// every GPU. Both give the same times when the tensor- and data-parallel translations are
  /// symmetries of the cluster (tests/sim/iteration_test.cc runs both).
  bool representative = true;
  // Gradient buckets, whether they overlap the backward and the bytes per gradient are the
  // configuration's (hw::grad_bucket_count; ParallelConfig::overlap_grad_reduce,
  // grad_reduce_in_fp32).
  /// Megatron's p2p communication blocks: a stage's next pass waits for its send to complete.
  bool blocking_p2p = true;
  /// Megatron's scatter/gather of PP messages across the TP ranks.
  bool scatter_gather = true;
  /// Share by which compute slows while NCCL kernels run on the same GPU.
  double comm_compute_slowdown = 0.05;
  /// Every communication takes no time (for the two-engine equivalence check).
  bool free_communication = false;
  hw::CollectiveAlgo algorithm = hw::CollectiveAlgo::kAuto;
  bool flash_attention = false;
  /// Optimizer offload (Deep Optimizer States): the GPU share of the update (< 0: chosen by the
  /// cost model). The host's Adam rate is the profile's (hw::cpu_adam_rate).
  double offload_gpu_share = -1;
  bool trace = false;  ///< fill IterationResult::trace
};

/// Exposed (not overlapped with compute) communication, per kind.
enum class CommKind : std::uint8_t { kTp, kPp, kDp, kOffload, kCp, kEp };
inline constexpr int kNumCommKinds = 6;
const char* comm_kind_name(CommKind k);  ///< "tp", "pp", "dp", "offload", "cp", "ep"

/// Peak memory of one simulated GPU, by category, at the moment of its total peak (bytes).
struct DeviceMemory {
  int gpu = 0;
  int pipeline_rank = 0;
  double weights = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0;
  double peak = 0;
  double activation_peak = 0;  ///< highest activation value over the iteration
  double capacity = 0;
  bool fits = true;
};

/// A link that bounded the iteration: saturated (its capacity used up) while the job's flows
/// crossed it.
struct LinkLoad {
  std::string name;      ///< endpoints, e.g. "nic9 -> leaf1"
  std::string role;      ///< "in node", "GPU-NIC", "NIC-leaf", "leaf-spine", "host"
  TimePs saturated = 0;  ///< time saturated with the job's flows on it
  double bytes = 0;      ///< the job's bytes over it (symmetric copies included)
  double capacity = 0;   ///< bytes per second
};

struct IterationResult {
  TimePs iteration = 0;  ///< first compute start to the last optimizer step's end
  double tokens_per_sec = 0;
  double tflops_per_gpu = 0;        ///< hardware FLOPs (recomputation counted, as Megatron)
  double model_tflops_per_gpu = 0;  ///< model FLOPs only
  double mfu = 0, hfu = 0;          ///< over the GPU's dense bf16 peak
  /// MFU with the causal convention (attention core halved; Megatron-Bridge's newer tables).
  double mfu_causal = 0;
  double bubble_rate = 0;      ///< (span - busy) / span of the busiest compute stream
  double bubble_fraction = 0;  ///< (span - busy) / busy
  /// Pipeline bubble alone, same convention as bubble_rate: (span - busy - C) / span, where C is
  /// the time the busiest GPU spends inside its compute span on exposed communication (TP, PP, DP)
  /// rather than waiting for another stage. bubble_rate minus this is exposed communication.
  double pipeline_bubble_rate = 0;
  TimePs exposed[kNumCommKinds] = {};  ///< mean over simulated GPUs
  std::vector<DeviceMemory> memory;    ///< one per simulated GPU
  bool fits = true;
  double worst_overflow = 0;  ///< bytes over capacity on the worst GPU (0 if it fits)
  int simulated_gpus = 0;
  /// The simulated GPU with the most compute time (the one that sets the ideal time), global
  /// index and coordinates, and its busy compute time.
  int busiest_gpu = 0, busiest_tp = 0, busiest_dp = 0, busiest_pp = 0;
  TimePs busiest_busy = 0;
  /// The simulated GPU with the most exposed communication (not overlapped by its compute, all
  /// kinds), its coordinates and that time.
  int exposed_gpu = 0, exposed_tp = 0, exposed_dp = 0, exposed_pp = 0;
  TimePs exposed_most = 0;
  /// The link saturated longest in each tier (in node, GPU-NIC, NIC-leaf, leaf-spine, host;
  /// ties: most bytes, then link id), tiers with no saturated link left out, longest first.
  /// With one GPU per pipeline rank a link stands for its symmetric copies.
  std::vector<LinkLoad> busiest_links;
  std::uint64_t events = 0;
  std::size_t tasks = 0;
  double offload_gpu_share = 1;  ///< share of the optimizer update run on the GPU
  Trace trace;
};

/// Inputs of one iteration; the schedule has one device per pipeline rank (placement layer
/// ranges over model.num_layers).
struct IterationInput {
  ModelShape model;
  ParallelConfig parallel;
  hw::HardwareProfile profile;
  hw::TopologySpec topology;
  Schedule schedule;
};

/// Simulates one iteration. Bad configurations are rejected earlier by the scenario loader;
/// here only invariants are asserted.
IterationResult simulate_iteration(const IterationInput& in, const IterationOptions& opt = {});

/// As above, and fills `timings` (when not null) with the simulated interval of every action of
/// `in.schedule` on its pipeline rank's representative GPU (tensor rank 0, data rank 0), in
/// device-major order: from the start of the action's compute to the end of its TP collective;
/// an explicit SEND_F/SEND_B lasts until its transfer completes (Megatron's blocking send); an
/// explicit REDUCE_GRAD of stage s takes the interval of the simulator's own DP reduction of s
/// (first to last gradient bucket) and an explicit OPT that of the optimizer step (first to last
/// optimizer task of the GPU, with offload its GPU share and the host update; tasks that take no
/// time are left out); a RECV and other explicit communication or markers take no time (the
/// simulator models the transfers itself). Every action starts after its prerequisites (core/
/// dependency.h) have ended, and, with blocking_p2p (the default), after its predecessor on the
/// device has (but for an explicit SEND in Megatron's 1F1B and interleaved schedules, whose
/// call the device posts with the next pass's receive, or after the forward-backward pair, and
/// which may end after the next action starts), provided the REDUCE_GRADs are listed in the order
/// the simulator reduces them (the order of their stages' last backward, as `plan --emit` writes
/// them). This is what `pipewright plan --emit` stores as a plan's predicted times (see
/// sim/plan_prediction.h).
IterationResult simulate_iteration(const IterationInput& in, const IterationOptions& opt,
                                   std::vector<ActionTiming>* timings);

}  // namespace pw
