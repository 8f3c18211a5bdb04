#pragma once
/// The schedule IR: the one language the planner emits, the simulator evaluates, the executor runs
/// and the report draws. A Schedule is a placement (stages and their devices) plus, per device, an
/// ordered list of small POD actions. Costs are not part of the IR (see core/cost_table.h).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pw {

/// What an action does. Compute kinds first; communication kinds only appear after lowering
/// (lower_communication) or when a generator models a collective explicitly.
enum class ActionKind : std::uint8_t {
  kF,           ///< forward of (stage, microbatch)
  kB,           ///< backward for inputs (activation gradient) only
  kW,           ///< backward for weights only; needs the B of the same (stage, microbatch)
  kBW,          ///< full backward (B and W fused)
  kR,           ///< recompute forward before a backward (full recomputation)
  kSendF,       ///< send stage's forward output to the next stage's device
  kRecvF,       ///< receive the previous stage's forward output (stage = receiving stage)
  kSendB,       ///< send stage's input gradient to the previous stage's device
  kRecvB,       ///< receive the next stage's input gradient (stage = receiving stage)
  kOverlapFB,   ///< DualPipeV: F of (stage, microbatch) overlapped with BW of (stage2, microbatch2)
  kReduceGrad,  ///< data-parallel gradient reduction of a stage (microbatch = -1)
  kUnshard,     ///< ZeRO-3 weight all-gather of a stage (microbatch = -1 or the sweep's first)
  kReshard,     ///< ZeRO-3 release of gathered weights
  kPairReduce,  ///< BitPipe all-reduce of a replicated stage's gradients between paired devices
  kOptStep,     ///< optimizer step (stage = -1: whole device)
};
inline constexpr int kNumActionKinds = 15;

/// True for F, B, W, BW, R and OVERLAP (the kinds that occupy the compute stream).
constexpr bool is_compute(ActionKind k) {
  return k <= ActionKind::kR || k == ActionKind::kOverlapFB;
}

/// Short name used in diagrams, YAML and JSON: F B W BW R SEND_F RECV_F SEND_B RECV_B OVERLAP_F_B
/// REDUCE_GRAD UNSHARD RESHARD PAIR_REDUCE OPT.
std::string_view action_kind_name(ActionKind k);
/// Inverse of action_kind_name; returns false if `name` is not a kind.
bool parse_action_kind(std::string_view name, ActionKind* out);

/// One entry of a device's action list. 16 bytes, trivially copyable.
struct Action {
  ActionKind kind = ActionKind::kF;
  std::int16_t stage = 0;         ///< global stage index (-1 for device-wide actions)
  std::int32_t microbatch = 0;    ///< microbatch index (-1 for per-iteration actions)
  std::int16_t stage2 = -1;       ///< OVERLAP_F_B: the backward's stage
  std::int32_t microbatch2 = -1;  ///< OVERLAP_F_B: the backward's microbatch

  friend bool operator==(const Action&, const Action&) = default;
};

/// How stages were laid onto devices (informational; `StageInfo::device` is authoritative).
enum class PlacementKind : std::uint8_t { kLinear, kLoop, kV, kExplicit };
std::string_view placement_kind_name(PlacementKind k);

/// One pipeline stage: a contiguous layer range of one model replica on one device.
struct StageInfo {
  int device = 0;
  int layer_begin = 0;  ///< first layer (inclusive)
  int layer_end = 0;    ///< one past the last layer
  int pipeline = 0;     ///< which model replica (BitPipe/Chimera run 2 opposite pipelines)
  int index = 0;        ///< position of the stage within its pipeline, 0 = holds the input
  friend bool operator==(const StageInfo&, const StageInfo&) = default;
};

/// Stages in global-id order; within each pipeline `index` runs 0..S-1 in model order.
struct Placement {
  PlacementKind kind = PlacementKind::kLinear;
  int num_devices = 0;
  int num_layers = 0;  ///< layers of one model replica
  std::vector<StageInfo> stages;

  int num_stages() const { return static_cast<int>(stages.size()); }
  int num_pipelines() const;
  /// Stages per pipeline (all pipelines have the same count).
  int stages_per_pipeline() const;
  /// Global id of the stage after/before `stage` in its pipeline, or -1 at the ends.
  int next_stage(int stage) const;
  int prev_stage(int stage) const;
  /// Activation weight of a stage: its layers over one 1F1B stage's layers (num_layers /
  /// num_devices); a V-shape chunk counts 0.5.
  double activation_weight(int stage) const;
  friend bool operator==(const Placement&, const Placement&) = default;
};

/// First layer of stage `s` when the generators' placements split `num_layers` layers over
/// `num_stages` stages: floor(s * layers / stages) (stage s holds up to the next one's first).
int even_split_begin(int s, int num_stages, int num_layers);

/// Gives each stage of one pipeline the layers `layers[index]` names, in pipeline order (stage
/// with index i takes the layers after stages 0..i-1's): every tier's way to lay an uneven split
/// onto a placement. `layers` holds one count per stage of the pipeline.
void assign_stage_layers(const std::vector<int>& layers, Placement* pl);

/// p stages of equal size, stage s on device s. `num_layers` defaults to p.
Placement linear_placement(int p, int num_layers = 0);
/// p*v stages, stage s on device s mod p (interleaved / looped).
Placement loop_placement(int p, int v, int num_layers = 0);
/// 2p stages, device i holds stages i and 2p-1-i.
Placement v_placement(int p, int num_layers = 0);

/// A complete schedule: placement, microbatch count and per-device ordered action lists.
struct Schedule {
  std::string name;  ///< generator name, e.g. "1f1b"
  Placement placement;
  int num_microbatches = 0;
  std::vector<std::vector<Action>> actions;  ///< actions[device] in execution order
  /// True when the backward is split into B and W (zero-bubble family).
  bool split_backward() const;
  std::size_t total_actions() const;
  friend bool operator==(const Schedule&, const Schedule&) = default;
};

}  // namespace pw
