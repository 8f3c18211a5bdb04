// Registration of the memory-controllable and zero-bubble schedules.
#include "planner/schedules/adaptive.h"
#include "planner/schedules/bitpipe.h"
#include "planner/schedules/generator.h"
#include "planner/schedules/memory_family.h"
#include "planner/schedules/v_schedules.h"

namespace pw {
namespace {

// The activation memory each memory-reading generator is defined with (GeneratorCaps::
// own_budget), in 1F1B-stage units per device: 1F1B's p (ZB-1p's p*M_B; V-ZB, ZB-V and the
// V-shape curve's top at 1F1B memory; ZeroPP's default), ZB-2p's 2p and BitPipe's default
// (interleaved 1F1B's peak).
double one_f_one_b_memory(int p) { return p; }
double twice_one_f_one_b_memory(int p) { return 2.0 * p; }

}  // namespace

void register_memory_generators(GeneratorRegistry& r) {
  r.add({"v-min", "V-Min building block: ~1/3 of 1F1B's activation memory", generate_v_min,
         GeneratorCaps{.chunks = 2,
                       .v_shape = true,
                       .split_backward = true,
                       .reads_costs = true,
                       .max_devices = 16}});
  r.add({"v-half", "V-Half building block: ~1/2 of 1F1B's activation memory", generate_v_half,
         GeneratorCaps{.chunks = 2,
                       .v_shape = true,
                       .split_backward = true,
                       .reads_costs = true,
                       .max_devices = 16}});
  r.add({"v-zb", "V-ZB: V placement, zero bubble at 1F1B memory", generate_v_zb,
         GeneratorCaps{.chunks = 2,
                       .v_shape = true,
                       .split_backward = true,
                       .memory_aware = true,
                       .reads_costs = true,
                       .max_devices = 16,
                       .own_budget = one_f_one_b_memory,
                       .per_device_limits = true}});
  r.add({"v-adaptive", "V-shape offsets searched for the shortest schedule under --memory-limit",
         generate_v_adaptive,
         GeneratorCaps{.chunks = 2,
                       .v_shape = true,
                       .split_backward = true,
                       .memory_aware = true,
                       .reads_costs = true,
                       .max_devices = 16,
                       .own_budget = one_f_one_b_memory}});
  r.add({"zb-1p", "ZB-1p: automatic zero-bubble schedule under memory limit p*M_B", generate_zb_1p,
         GeneratorCaps{.split_backward = true,
                       .memory_aware = true,
                       .reads_costs = true,
                       .max_devices = 16,
                       .own_budget = one_f_one_b_memory,
                       .per_device_limits = true}});
  r.add({"zb-2p", "ZB-2p: automatic zero-bubble schedule under memory limit 2p*M_B", generate_zb_2p,
         GeneratorCaps{.split_backward = true,
                       .memory_aware = true,
                       .reads_costs = true,
                       .max_devices = 16,
                       .own_budget = twice_one_f_one_b_memory,
                       .per_device_limits = true}});
  r.add({"zb-v", "ZB-V: automatic zero-bubble schedule on the V placement at 1F1B memory",
         generate_zb_v,
         GeneratorCaps{.chunks = 2,
                       .v_shape = true,
                       .split_backward = true,
                       .memory_aware = true,
                       .reads_costs = true,
                       .max_devices = 16,
                       .own_budget = one_f_one_b_memory,
                       .per_device_limits = true}});
  r.add({"bitpipe", "BitPipe: two opposite V-shaped interleaved pipelines, 4 chunks per device",
         generate_bitpipe,
         GeneratorCaps{.chunks = 2,
                       .pipelines = 2,
                       .memory_aware = true,
                       .reads_costs = true,
                       .max_devices = 16,
                       .own_budget = bitpipe_default_memory,
                       .placement = bitpipe_placement}});
  r.add({"dualpipev", "DualPipeV: V placement, F of one chunk overlapped with B of the other",
         generate_dualpipev,
         GeneratorCaps{.chunks = 2, .v_shape = true, .split_backward = true, .overlap = true}});
  r.add({"zeropp", "ZeroPP-style blockwise interleaving with per-block UNSHARD/RESHARD",
         generate_zeropp,
         GeneratorCaps{.chunks = 2,
                       .split_backward = true,
                       .takes_v = true,
                       .takes_group_size = true,
                       .memory_aware = true,
                       .reads_costs = true,
                       .max_devices = 16,
                       .own_budget = one_f_one_b_memory}});
  r.add({"1f1b-r", "1F1B with full recomputation (R before each backward)", generate_1f1b_r,
         GeneratorCaps{.explicit_recompute = true}});
}

}  // namespace pw
