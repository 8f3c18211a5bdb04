#pragma once
/// The building-block framework of "Pipeline Parallelism with Controllable Memory" (Qi et al.,
/// NeurIPS 2024). A building block is the passes of one microbatch with their start offsets (in
/// slots) on each device. Microbatch j repeats the block shifted by j * period slots; the repeated
/// blocks must never occupy the same slot of a device. The repetition fixes each device's order;
/// squeezing (list scheduling that keeps each device's order and starts every pass as early as its
/// dependencies and the real pass costs allow) is what the fixed-cost Evaluator does with that
/// order. A stage's lifespan (start of its F to the end of its backward) bounds its peak
/// activation memory: at most ceil(lifespan / period) microbatches are alive at once.
#include <optional>
#include <string>
#include <vector>

#include "core/cost_table.h"
#include "core/schedule.h"

namespace pw {

/// One pass of the block: kind (F, B, W, BW or R), global stage, start slot and length in slots.
struct BlockPass {
  ActionKind kind = ActionKind::kF;
  int stage = 0;
  int offset = 0;  ///< start slot relative to the block's start (>= 0)
  int length = 1;  ///< slots the pass occupies (BW usually 2)
};

/// A building block: placement, repetition period T (slots) and the passes of each device.
/// Every (stage, kind) of one microbatch must appear exactly once on the stage's device.
struct BuildingBlock {
  std::string name;
  Placement placement;
  int period = 0;                              ///< T: slots between consecutive microbatches
  std::vector<std::vector<BlockPass>> passes;  ///< passes[device], any order
};

/// Two passes of a device that the repetition puts on the same slot.
struct BlockCollision {
  int device = 0;
  int slot = 0;            ///< the colliding slot modulo the period (0..T-1)
  BlockPass first;         ///< one of the two passes
  BlockPass second;        ///< the other
  int microbatch_gap = 0;  ///< how many periods apart the two colliding copies are
};

/// First collision in device order, or nullopt when the repeated block is collision-free.
/// Passes longer than the period, or more slots than the period on a device, always collide.
std::optional<BlockCollision> find_collision(const BuildingBlock& block);

/// Throws ConfigError(source, "block.device[D]", "...slot S...") for the first collision, a pass on
/// a device that does not hold its stage, a negative offset, or a non-positive period.
void check_block(const BuildingBlock& block, const std::string& source = "building block");

/// Lifespan of one stage in the block: slots from the start of its F to the end of its
/// backward (B or BW; W holds nothing when mw_over_mb is 0) and the bound ceil(lifespan / T).
struct StageLifespan {
  int stage = 0;
  int device = 0;
  int lifespan = 0;      ///< slots
  int microbatches = 0;  ///< ceil(lifespan / period): the most copies alive at once
  double bound = 0;      ///< microbatches * Placement::activation_weight(stage)
};

/// Lifespans of every stage, in stage order. `include_w`: the lifespan ends at the end of W (use
/// it when W still holds memory, i.e. mw_over_mb > 0).
std::vector<StageLifespan> block_lifespans(const BuildingBlock& block, bool include_w = false);

/// Per-device memory bound implied by the lifespans (sum over the device's stages of bound), in
/// microbatch activations of one 1F1B stage.
std::vector<double> block_memory_bound(const BuildingBlock& block, bool include_w = false);

/// Options of block_to_schedule.
struct BlockScheduleOptions {
  /// Reorder the cool-down: once a device has issued its last F, it runs every backward (B, BW)
  /// before the weight passes (W) that the block's order would have put ahead of it. Memory only
  /// falls after the last F, so this never raises a device's peak; it shortens the critical path.
  bool reorder_cooldown = true;
};

/// Repeats `block` for microbatches 0..m-1 (copy j shifted by j * period), orders each device's
/// passes by slot and returns the schedule. Evaluating it with the Evaluator is the squeeze. The
/// block must be collision-free (checked: ConfigError otherwise). m >= 1.
Schedule block_to_schedule(const BuildingBlock& block, int m,
                           const BlockScheduleOptions& options = {});

/// Result of squeeze_block.
struct BlockSqueeze {
  TimePs makespan = 0;       ///< last end - first start over all devices
  TimePs cost = 0;           ///< largest device span (zero-bubble convention)
  double peak_memory = 0;    ///< largest device peak, in the cost table's memory units
  std::vector<double> peak;  ///< per device
};

/// Reusable buffers of squeeze_block (one per thread; no allocation once warmed up).
struct BlockWorkspace {
  std::vector<const BlockPass*> flat;  ///< the block's passes, device by device
  std::vector<int> pass_order, order_key, dep0, dep1, hop1, device, cost_index, q;
  std::vector<TimePs> end, clock, first;
  std::vector<double> mem;
  /// What the hot loop reads of one pass, in its order: one record per pass, read in sequence.
  struct Timed {
    std::size_t row;     ///< the pass's first cell of `end`
    std::size_t dep[3];  ///< its dependencies' first cells (the zero row where there is none)
    TimePs hop[3];       ///< their hop times (0 on the same device)
    TimePs duration;
    double mem_delta;
    int round_offset;  ///< its microbatch j runs in round j + round_offset
    int device;
  };
  std::vector<Timed> timed;
  /// Per pass: rounds in a row it has ended `last_delta` after its copy one round earlier.
  std::vector<int> streak;
  std::vector<TimePs> last_delta;
};

/// Fast squeeze of the plain repetition of `block` (no gap filling) for m microbatches under
/// `costs`: the same timeline the Evaluator gives for block_to_schedule(block, m,
/// {.reorder_cooldown = false}), computed directly on the block in O(passes * m) without
/// building a Schedule. Requires a collision-free block whose passes start after the passes
/// they depend on end (in slots); returns makespan -1 otherwise.
BlockSqueeze squeeze_block(const BuildingBlock& block, int m, const CostTable& costs,
                           BlockWorkspace& ws);

/// Whether squeeze_block times `block`: false exactly where it returns makespan -1. The squeeze
/// is the as-soon-as-possible timeline of each device's order of passes, and that order depends
/// only on the offsets of a device's passes relative to each other: two blocks it times whose
/// devices differ by a shift of all their passes alike give the same BlockSqueeze.
bool squeeze_block_applies(const BuildingBlock& block, BlockWorkspace& ws);

/// Squeeze with gap filling: list scheduling of `schedule` under `costs` that keeps each
/// device's order of non-W passes and starts each as early as dependencies allow, except that a
/// device that would sit idle (its next pass is not ready) runs the oldest weight pass W whose B
/// is already done instead. A W moved earlier only frees memory earlier, so no device's peak
/// rises. Rewrites the action lists to the executed order (the Evaluator then reproduces the
/// same timeline). Returns the makespan. Deterministic: ties go to the lowest device.
/// `stats` (optional) receives the timeline's figures, as squeeze_block reports them.
TimePs squeeze_fill_w(Schedule& schedule, const CostTable& costs, BlockSqueeze* stats = nullptr);

/// Places the W passes of a block greedily: each W of `stage` goes into the first free slot
/// (modulo the period) at or after the end of that stage's B, in stage order of `w_order`.
/// Passes already in the block are left alone. Throws ConfigError when no free slot exists.
void place_w_greedily(BuildingBlock& block, const std::vector<int>& w_order);

/// Parses a block written as text, one device per line:
///   "T=6; 0: F0@0 F7@7 B7@8 W7@10 B0@15 W0@17; 1: ..."
/// i.e. "T=<period>" then "<device>: <KIND><stage>@<slot>[x<length>]..." separated by ';' or
/// newlines. The placement must be given (it decides which device holds which stage). Throws
/// ConfigError(source, key, message) naming the token it cannot read.
BuildingBlock parse_block(const std::string& text, const Placement& placement,
                          const std::string& source = "block");

/// Writes a block in the text form parse_block reads.
std::string format_block(const BuildingBlock& block);

}  // namespace pw
