#pragma once
/// V-shape building blocks (Qi et al., NeurIPS 2024): device i holds chunk 0 = stage i and chunk 1
/// = stage 2p-1-i. Per device the block has six passes: F (forward of chunk 0), f (forward of
/// chunk 1), B (input-gradient backward of chunk 1), b (of chunk 0), and their weight passes W, w,
/// which are placed greedily in the first free slot after B / b. Period T = 6 slots.
#include <vector>

#include "planner/schedules/building_block.h"
#include "planner/schedules/generator.h"

namespace pw {

/// Start slots of the four chained passes on every device (index = device).
struct VOffsets {
  std::vector<int> F, f, B, b;
};

/// Builds the V block from explicit start slots (W and w placed greedily after B and b).
/// Throws ConfigError when the passes collide or no free slot is left for a W.
BuildingBlock v_block(int p, const VOffsets& offsets, const std::string& name, int num_layers = 0);

/// The published V-Min block: x = 2 if p % 3 == 0 else 0; F: i, f: 2p-i-1, B: 2p+x+i,
/// b: 4p+x-i-1. Peak (p+4)//3 microbatches per device.
VOffsets v_min_offsets(int p);
/// The published V-Half block: x = 3 if p % 2 == 0 else 0; F: 2i, f: 3p-i-2, B: 3p+x+2i-1,
/// b: 6p+x-i-2. Peak (p+2)//2 microbatches per device.
VOffsets v_half_offsets(int p);
/// The V-ZB block: F: i, f: 2p-1-i, B: 6p-4+i, b: 8p-5-i (the tightest chain with a turn gap
/// of 4p-3 slots at device 0). Collision-free for every p; its lifespan bound and its plain
/// repetition's peak are 2p chunk activations (1F1B's p microbatches); the steady state is
/// bubble-free and the reordering (planner/schedules/block_reorder.h) removes the warm-up and
/// cool-down bubbles (zero-bubble cost 6m with F = B = W = 1).
VOffsets v_zb_offsets(int p);
/// The authors' V-ZB block, the one their method (planner/schedules/v_grid.h) makes
/// zero-bubble under their memory rule (an activation held until its W) at 2p chunk
/// activations: F_0 = 0, F_i = 3i-2; f_i = 6p-7-3i; B_0 = 6p-4, B_i = 6p-6+3i; b_i = 12p-11-3i
/// (each chain's first hop one slot, the others three).
VOffsets v_zb_grid_offsets(int p);

/// Generators registered as v-min, v-half, v-zb (GeneratorParams: p >= 2, m >= 1). Each repeats
/// its block, squeezes it and reorders warm-up and cool-down with reorder_block: v-min and
/// v-half under the block's own peak, v-zb under GeneratorParams::memory_limit (default 1F1B's
/// p microbatches); v-zb returns the greedy ZB-V schedule, or the authors' order of their V-ZB
/// block (v_zb_grid_offsets, v_grid.h) within the same caps, instead when that has a lower
/// zero-bubble cost (uneven costs or communication; W holding the activation).
Schedule generate_v_min(const GeneratorParams& gp);
Schedule generate_v_half(const GeneratorParams& gp);
Schedule generate_v_zb(const GeneratorParams& gp);

}  // namespace pw
