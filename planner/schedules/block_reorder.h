#pragma once
/// Warm-up and cool-down reordering of a repeated building block (the last step of the
/// building-block method of Qi et al., NeurIPS 2024): the plain repetition of a block is squeezed
/// and then reordered so that warm-up forwards run early and cool-down backwards overtake weight
/// passes, without raising any device's peak activation memory above a cap (by default the
/// device's own peak in the plain repetition). Several reorderings are tried and the shortest
/// (makespan, then zero-bubble cost) is kept:
///   - the block order with the cool-down reorder and W gap filling (block_to_schedule +
///     squeeze_fill_w), then monotone gap filling (fill_gaps);
///   - memory-capped list schedules guided by the block order (block_list_schedule) with
///     reservations 0..max_reserve, each followed by gap filling.
/// Memory depends only on each device's order, so every candidate's peaks are checked exactly
/// (prefix sums of the cost table's deltas) and re-checked by the Evaluator.
#include <string>
#include <vector>

#include "core/cost_table.h"
#include "core/schedule.h"
#include "planner/schedules/building_block.h"

namespace pw {

/// Options of reorder_block.
struct ReorderOptions {
  /// Per-device activation caps in the cost table's units. Empty: the block's peak, i.e. the
  /// largest device peak of the plain repetition, on every device (or, with per_device_caps,
  /// each device's own peak in the plain repetition).
  std::vector<double> caps;
  /// With empty `caps`: cap each device at its own plain-repetition peak instead of the block's.
  bool per_device_caps = false;
  /// Largest reservation tried by the list scheduler (see block_list_schedule); -1: up to the
  /// number of devices, stopping after two reservations in a row that do not help.
  int max_reserve = -1;
  /// Most waves of gap filling per candidate (each wave is one re-timing; 0: 4 * devices + 16,
  /// enough for the warm-up and cool-down; the cap keeps the time linear in m).
  int max_fill_waves = 0;
  /// For m above this many microbatches (0: 2 * devices + 8) the methods are ranked on this
  /// many and only the two best are run on all m (keeps the time linear in m).
  int probe_microbatches = 0;
  /// Local search after the best candidate: single passes moved up to `search_window` places,
  /// within the first and last `search_edge` positions of each device (0: all), accepting
  /// strict improvements of (makespan, cost, sum of device ends); at most `search_budget`
  /// re-evaluations (0: no search).
  int search_window = 8;
  int search_edge = 0;
  int search_budget = 0;
};

/// Result of reorder_block: the chosen schedule and its figures.
struct ReorderResult {
  Schedule schedule;
  TimePs makespan = 0;       ///< last end - first start over all devices
  TimePs cost = 0;           ///< largest device span (zero-bubble convention)
  std::vector<double> peak;  ///< per device, cost table's memory units
  std::vector<double> caps;  ///< the caps that were enforced
  std::string method;        ///< the winning candidate, e.g. "block+fill" or "list r=2+fill"
};

/// Repeats `block` for m microbatches and returns the shortest reordering found under the caps
/// (see the file comment). Deterministic. The block must be collision-free (ConfigError).
ReorderResult reorder_block(const BuildingBlock& block, int m, const CostTable& costs,
                            const ReorderOptions& options = {});

/// Memory-capped list scheduler guided by `order` (a legal schedule whose device lists give
/// the priorities, e.g. the plain block repetition). Each device, when free, runs the ready pass
/// that comes first in its list among the heads of its (stage, kind) sequences (the passes of
/// one stage and kind keep their order), never exceeding caps[d]; a forward of a stage keeps
/// `reserve` forwards' worth of room for the next stage on the same device (so the V cannot fill
/// its memory with chunk-0 activations and starve chunk 1). Weight passes W only fill time the
/// device would otherwise idle, except with `eager_w`, where a W that frees memory also runs
/// first when memory holds back a pass that comes earlier in the list than the one chosen.
/// Returns a schedule with no actions when the run deadlocks.
Schedule block_list_schedule(const Schedule& order, const CostTable& costs,
                             const std::vector<double>& caps, int reserve, bool eager_w = false);

/// Monotone gap filling: in waves, moves later passes of a device into idle gaps of that device
/// when a pass is ready at the gap's start (in the wave's timeline), fits in the gap and keeps
/// the device's peak within caps[d]; no pass then starts later than before. Stops when a wave
/// moves nothing or after `max_waves` waves. Rewrites `schedule`'s lists and returns the number
/// of moves made.
int fill_gaps(Schedule& schedule, const CostTable& costs, const std::vector<double>& caps,
              int max_waves = 1 << 20);

/// Per-device peak activation of `schedule` under `costs` (prefix sums of the memory deltas in
/// each device's order; equals the Evaluator's peak).
std::vector<double> order_peaks(const Schedule& schedule, const CostTable& costs);

}  // namespace pw
