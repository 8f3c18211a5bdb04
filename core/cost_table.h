#pragma once
/// Per-(stage, kind) pass costs and memory effects, kept apart from the IR so one schedule can
/// be scored under many cost models without copying it.
#include <string>
#include <vector>

#include "core/schedule.h"
#include "core/units.h"

namespace pw {

/// Costs of every action kind for every stage, flat: index stage * kNumActionKinds + kind.
/// Memory deltas are in arbitrary units chosen by the caller (1.0 = one microbatch's activations
/// of one 1F1B stage, or bytes); an action's delta applies at its start if positive (allocation)
/// and at its end if negative (release).
struct CostTable {
  int num_stages = 0;
  std::vector<TimePs> duration;   ///< time of one action of (stage, kind)
  std::vector<double> mem_delta;  ///< activation memory change of one action of (stage, kind)
  /// Time of one cross-device point-to-point hop (per stage boundary, sender side index).
  std::vector<TimePs> comm;
  /// false: an OVERLAP_F_B action costs time(stage, kOverlapFB) (a fixed pair cost). true: it
  /// costs time(stage, kOverlapFB) + time(stage2, kBW), the forward of its stage and the backward
  /// of the stage it is paired with, as the discrete-event simulator runs it.
  bool overlap_pairs = false;

  TimePs time(int stage, ActionKind k) const {
    return duration[static_cast<std::size_t>(stage) * kNumActionKinds + static_cast<int>(k)];
  }
  TimePs& time(int stage, ActionKind k) {
    return duration[static_cast<std::size_t>(stage) * kNumActionKinds + static_cast<int>(k)];
  }
  double mem(int stage, ActionKind k) const {
    return mem_delta[static_cast<std::size_t>(stage) * kNumActionKinds + static_cast<int>(k)];
  }
  double& mem(int stage, ActionKind k) {
    return mem_delta[static_cast<std::size_t>(stage) * kNumActionKinds + static_cast<int>(k)];
  }
};

/// Uniform pass costs for every stage (times in picoseconds).
struct UniformCosts {
  TimePs f = 0, b = 0, w = 0, r = 0, comm = 0;
  /// OVERLAP_F_B cost; 0 means f + b + w (no gain from overlapping).
  TimePs overlap = 0;
  /// Activation held after B until W, as a share of what F allocates (zero-bubble: M_W/M_B).
  double mw_over_mb = 0.0;
  /// Activation kept by F when the stage recomputes (share of M_B; the layer input only).
  double recompute_keep = 0.0;
};

/// Throws ConfigError(key `flag`) when `passes` passes of these costs could overflow the 64-bit
/// picosecond clock (their sum above 4e18 ps, about 46 days): absurd costs are refused instead of
/// wrapping into negative times.
void check_clock_headroom(double passes, const UniformCosts& costs, const std::string& flag);

/// Builds a cost table for `placement` from uniform per-stage pass costs (every stage, whatever
/// its size, costs the same time per pass); activation memory scales with
/// Placement::activation_weight (a V-shape chunk holds half a 1F1B stage's activations).
/// F allocates weight*1.0; B releases all but mw_over_mb of it; W releases the rest; BW releases
/// all; R allocates weight*(1 - recompute_keep) (and F then only keeps recompute_keep when the
/// schedule contains R actions: pass `with_recompute`).
/// Appends an exact key of `table` to `key` (every duration, memory delta and hop, bit for bit):
/// equal keys mean equal tables, for memoising work that depends on a table.
void append_cost_key(const CostTable& table, std::string* key);

CostTable make_uniform_cost_table(const Placement& placement, const UniformCosts& c,
                                  bool with_recompute = false);

}  // namespace pw
