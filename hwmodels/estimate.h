#pragma once
/// `pipewright estimate`: parameter count, FLOPs per iteration, per-GPU memory of the first and
/// last stage (the simulator's figures, passed in), whether it fits, pass times, and the time of
/// every collective the configuration issues.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hwmodels/collectives.h"
#include "hwmodels/memory.h"
#include "hwmodels/scenario.h"
#include "hwmodels/transformer.h"

namespace pw::hw {

/// One collective the configuration issues.
struct CollectiveEstimate {
  std::string purpose;  ///< e.g. "TP all-reduce (F)"
  CollectiveKind kind = CollectiveKind::kAllReduce;
  CollectiveAlgo algo = CollectiveAlgo::kRing;
  int group_size = 1;
  int group_nodes = 1;
  Bytes bytes{};                      ///< nccl-tests size of one call
  long long calls_per_iteration = 0;  ///< per GPU of the group
  TimePs time = 0;                    ///< one call
  double busbw = 0;                   ///< bytes/s, nccl-tests convention
};

/// Memory of one GPU as the simulator's timeline peaks (sim/iteration.h DeviceMemory): the one
/// memory figure every command reports. Bytes.
struct GpuMemoryFigures {
  double params = 0;  ///< parameters held (before ZeRO sharding), filled by make_estimate
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, buffers = 0;
  double total = 0;     ///< peak of the sum (not the sum of the category peaks)
  double capacity = 0;  ///< usable memory (HBM less the profile's reserve)
  bool fits = false;
};

/// Everything `estimate` prints.
struct Estimate {
  std::string scenario;
  std::string profile;
  std::string model;
  int gpus = 0;
  /// The scale-out fabric: its kind, ports per leaf, oversubscription and the leaf and spine
  /// counts it expands to (what cluster.failed_spine_links indexes).
  FabricSpec fabric;
  FabricSize fabric_size;
  ParallelConfig parallel;
  long long microbatches = 0;
  bool fused_attention = false;  ///< the scenario's attention (Scenario::flash_attention)
  double params = 0;
  double active_params = 0;  ///< parameters one token uses (MoE: top-k experts)
  double mtp_params = 0;     ///< of params: the multi-token prediction depths'
  int mtp_layers = 0;        ///< multi-token prediction depths
  IterationFlops flops;
  GpuMemoryFigures first;  ///< GPU of the first pipeline stage
  GpuMemoryFigures last;   ///< GPU of the last pipeline stage
  StageCosts first_costs;  ///< per microbatch, first stage (one model chunk)
  StageCosts last_costs;   ///< per microbatch, last stage (one model chunk)
  /// Per microbatch, the multi-token prediction depths' stage of their own (the one before the
  /// last, on pipeline rank p - 2 mod p) with ParallelConfig::mtp_standalone; else unset.
  bool has_mtp_stage = false;
  StageCosts mtp_costs;
  /// Per microbatch, a chunk with neither the embedding nor the head: the other v - 1 chunks
  /// of the first and last devices under interleaving, and every chunk of the devices between.
  StageCosts middle_costs;
  /// Exposed TP, CP and EP collectives of F on a middle stage, per microbatch per chunk (with
  /// tp_comm_overlap what exceeds the GEMMs they run under; of a CP ring what outlasts its
  /// attention blocks), and of B, W and R together.
  TimePs tp_comm_f = 0;
  TimePs tp_comm_b = 0;
  std::vector<CollectiveEstimate> collectives;
  /// Analytic 1F1B iteration time: the busiest device's m microbatches (its v chunks each: the
  /// first device's embedding chunk and v - 1 middle ones, the last device's head chunk and
  /// v - 1 middle ones) plus a bubble of p - 1 passes of the slowest chunk, plus exposed DP
  /// communication; with v = 1 that is (m + p - 1) passes of the slowest stage. A quick figure,
  /// not the simulator.
  TimePs iteration_time = 0;
  double tflops_per_gpu = 0;  ///< hardware FLOPs / (GPUs x iteration time)
};

/// Computes the estimate of a validated scenario. Memory is the simulator's (`first` and `last`:
/// the peaks of the first and last pipeline stage's GPU), so that `estimate`, `simulate` and
/// `plan` report one figure; make_estimate fills in the parameters each holds.
Estimate make_estimate(const Scenario& s, const GpuMemoryFigures& first,
                       const GpuMemoryFigures& last);
/// Plain-text table for a terminal.
std::string estimate_table(const Estimate& e);
/// The same as JSON (bytes, seconds and FLOPs in SI units).
nlohmann::ordered_json estimate_json(const Estimate& e);

}  // namespace pw::hw
