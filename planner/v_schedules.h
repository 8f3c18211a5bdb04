#pragma once
/// V-shape building blocks (Qi et al., NeurIPS 2024): device i holds chunk 0 = stage i and chunk 1
/// = stage 2p-1-i. Per device the block has six passes: F (forward of chunk 0), f (forward of
/// chunk 1), B (input-gradient backward of chunk 1), b (of chunk 0), and their weight passes W, w,
/// which are placed greedily in the first free slot after B / b. Period T = 6 slots.
#include <vector>

#include "planner/building_block.h"
#include "planner/generator.h"

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
/// A zero-bubble V block at 1F1B memory (p microbatches): F: i, f: 2p-i-1 (+1 where needed),
/// B: 2p + ..., see v_schedules.cc for the derivation.
VOffsets v_zb_offsets(int p);

/// Generators registered as v-min, v-half, v-zb (GeneratorParams: p >= 2, m >= 1).
Schedule generate_v_min(const GeneratorParams& gp);
Schedule generate_v_half(const GeneratorParams& gp);
Schedule generate_v_zb(const GeneratorParams& gp);

}  // namespace pw
