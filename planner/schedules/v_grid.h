#pragma once
/// The building-block method of Qi et al. (NeurIPS 2024, "Pipeline Parallelism with Controllable
/// Memory") as its authors run it (their v_auto_schedule): on the unit slot grid (every pass one
/// slot, no communication), a V building block is repeated, squeezed without changing any
/// device's order, its warm-up re-laid to a fixed pattern, its surplus microbatches dropped, its
/// cool-down re-laid, and its bubbles filled greedily without raising the peak; the weight passes
/// are then relabelled in backward order. Their memory rule: a chunk's activation is held from
/// its forward to its weight pass (F/f +1, W/w -1).
///
/// What it gives is an order per device; `v-adaptive` evaluates that order under the real cost
/// table like any other candidate (planner/schedules/adaptive.h), so the grid is only the method's
/// own working space. Written here from the published method and its reference code's steps.
#include <array>
#include <optional>
#include <vector>

#include "core/schedule.h"
#include "planner/schedules/building_block.h"

namespace pw {

/// Per device, the period-6 slot of each pass of the block, in the order F (chunk 0 forward), f
/// (chunk 1 forward), B (chunk 1 backward), b (chunk 0 backward), W (chunk 1 weight), w (chunk 0
/// weight); the six slots of a device are distinct.
using VGridPattern = std::vector<std::array<int, 6>>;

/// The pattern of a V block of period 6 with one-slot passes (v_block's V-Min, V-Half, V-ZB):
/// each device's F and B of its two chunks and their W where the block puts them, mod 6. Empty
/// (which v_grid_schedule refuses) when the block is not of that shape.
VGridPattern v_grid_pattern(const BuildingBlock& block);

/// The authors' schedule of `pattern` for p devices and m microbatches, under their memory rule
/// and a limit of `max_mem` chunk activations (they pass min(2p, limit); it rejects blocks whose
/// repetition exceeds it and, for m <= p, lets released weight passes use it). nullopt where
/// their method rejects the block (its peak, or an order their checks refuse). The schedule is on
/// v_placement(p, num_layers).
std::optional<Schedule> v_grid_schedule(int p, int m, const VGridPattern& pattern, int max_mem,
                                        int num_layers = 0);

/// v_grid_schedule of many blocks: block k's schedule is `schedules[of[k]]`. The method is a
/// function of the block's first squeezed repetition; blocks whose repetitions squeeze to the
/// same grid (185 distinct of 341 blocks at p=16, m=64) share one answer, finished once. Every
/// refused block shares one empty answer. Deterministic whatever the thread count.
struct VGridSchedules {
  std::vector<std::optional<Schedule>> schedules;
  std::vector<std::size_t> of;
};
VGridSchedules v_grid_schedules(int p, int m, const std::vector<VGridPattern>& patterns,
                                int max_mem, int num_layers = 0);

namespace detail {
/// v_grid_schedule with every column of its squeezes and bubble fill stepped through, none
/// skipped by their steady-state jumps: the reference the jumps are tested against.
std::optional<Schedule> v_grid_schedule_stepped(int p, int m, const VGridPattern& pattern,
                                                int max_mem);
}  // namespace detail

}  // namespace pw
