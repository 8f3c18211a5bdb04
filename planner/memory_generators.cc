// Registration of the memory-controllable and zero-bubble schedules.
#include "planner/adaptive.h"
#include "planner/generator.h"
#include "planner/memory_family.h"
#include "planner/v_schedules.h"

namespace pw {

void register_memory_generators(GeneratorRegistry& r) {
  r.add({"v-min", "V-Min building block: ~1/3 of 1F1B's activation memory", generate_v_min});
  r.add({"v-half", "V-Half building block: ~1/2 of 1F1B's activation memory", generate_v_half});
  r.add({"v-zb", "V-ZB: V placement, zero bubble at 1F1B memory", generate_v_zb});
  r.add({"v-adaptive", "V-shape offsets searched for the shortest schedule under --memory-limit",
         generate_v_adaptive});
  r.add(
      {"zb-1p", "ZB-1p: automatic zero-bubble schedule under memory limit p*M_B", generate_zb_1p});
  r.add(
      {"zb-2p", "ZB-2p: automatic zero-bubble schedule under memory limit 2p*M_B", generate_zb_2p});
  r.add({"zb-v", "ZB-V: automatic zero-bubble schedule on the V placement at 1F1B memory",
         generate_zb_v});
  r.add({"bitpipe", "BitPipe: two opposite V-shaped interleaved pipelines, 4 chunks per device",
         generate_bitpipe});
  r.add({"dualpipev", "DualPipeV: V placement, F of one chunk overlapped with B of the other",
         generate_dualpipev});
  r.add({"zeropp", "ZeroPP-style blockwise interleaving with per-block UNSHARD/RESHARD",
         generate_zeropp});
  r.add({"1f1b-r", "1F1B with full recomputation (R before each backward)", generate_1f1b_r});
}

}  // namespace pw
