#pragma once
/// An executable plan and a measured run: what the planner emits, the executor runs, and the
/// comparison lines up. Both travel as YAML or JSON (see core/plan_io.h).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "core/units.h"

namespace pw {

/// Model shape (Megatron names). Enough for the executor to build a real model of this shape.
struct ModelShape {
  std::string name;  ///< preset name or "custom"
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int ffn_hidden_size = 0;  ///< 0 = 4 * hidden_size
  int seq_length = 0;
  int vocab_size = 0;
  friend bool operator==(const ModelShape&, const ModelShape&) = default;
};

/// The chosen parallel configuration.
struct ParallelConfig {
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int data_parallel = 1;
  int virtual_stages = 1;  ///< chunks per device
  int micro_batch_size = 1;
  int global_batch_size = 1;
  bool sequence_parallel = false;
  std::string recompute = "none";  ///< none | selective | full
  int zero_stage = 0;
  bool optimizer_offload = false;
  std::string schedule = "1f1b";
  friend bool operator==(const ParallelConfig&, const ParallelConfig&) = default;
};

/// Predicted interval of one action (same numbering as the schedule: device, position).
struct ActionTiming {
  std::int32_t device = 0;
  std::int32_t index = 0;  ///< position in the device's action list
  TimePs start = 0;
  TimePs end = 0;
  friend bool operator==(const ActionTiming&, const ActionTiming&) = default;
};

/// Where a plan came from.
struct Provenance {
  std::string version;         ///< pipewright version
  std::string profile_source;  ///< hardware profile file or name
  std::string created;         ///< ISO date (left empty in tests for byte-stable output)
  std::string command;         ///< command line that produced it
  /// Which engine produced `predicted`: "des" (the discrete-event simulator), "evaluator" (the
  /// fixed-cost evaluator), optionally followed by the reason of a fallback in parentheses;
  /// empty when not recorded (optional in the file).
  std::string prediction_source;
  friend bool operator==(const Provenance&, const Provenance&) = default;
};

/// A plan = scenario + configuration + schedule IR (communication explicit when lowered) +
/// rank-to-GPU map + predicted per-action times + provenance.
struct Plan {
  ModelShape model;
  std::string cluster;  ///< cluster/profile name
  ParallelConfig config;
  Schedule schedule;
  /// rank_to_gpu[pipeline rank] = global GPU index of the first data/tensor replica.
  std::vector<int> rank_to_gpu;
  std::vector<ActionTiming> predicted;  ///< may be empty
  TimePs predicted_iteration = 0;
  Provenance provenance;
  friend bool operator==(const Plan&, const Plan&) = default;
};

/// One measured action of an executed plan.
struct MeasuredAction {
  std::int32_t rank = 0;   ///< pipeline rank (device in the schedule)
  std::int32_t index = 0;  ///< position in that device's action list
  Action action;
  TimePs start = 0;  ///< relative to the iteration start on rank 0's clock
  TimePs end = 0;
};

/// A measured run of one plan (what `pipewright execute --measured` writes).
struct MeasuredRun {
  std::string backend;  ///< "cpu" or "cuda"
  std::string device;   ///< hardware description
  int iterations = 1;
  TimePs iteration_time = 0;            ///< median over measured iterations
  std::vector<MeasuredAction> actions;  ///< from one representative iteration
};

}  // namespace pw
