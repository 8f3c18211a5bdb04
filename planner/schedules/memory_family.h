#pragma once
/// Generators of the zero-bubble and memory family that have no header of their own
/// (registered in planner/schedules/memory_generators.cc). Each takes GeneratorParams and returns
/// an unvalidated Schedule (generate_schedule validates), throwing ConfigError on unmet
/// constraints.
#include "planner/schedules/generator.h"

namespace pw {

/// ZB-1p / ZB-2p (linear placement) and ZB-V (V placement): see planner/schedules/zb_auto.h.
Schedule generate_zb_1p(const GeneratorParams& gp);
Schedule generate_zb_2p(const GeneratorParams& gp);
Schedule generate_zb_v(const GeneratorParams& gp);
/// BitPipe: needs m a multiple of p (and p even); 4 chunks per device, two pipelines.
Schedule generate_bitpipe(const GeneratorParams& gp);
/// DualPipeV: needs m >= 2p; OVERLAP_F_B pairs in the steady state.
Schedule generate_dualpipev(const GeneratorParams& gp);
/// ZeroPP-style: v = blocks (chunks) per device (default 2), per-block UNSHARD/RESHARD.
Schedule generate_zeropp(const GeneratorParams& gp);
/// 1F1B with full recomputation: R before each BW.
Schedule generate_1f1b_r(const GeneratorParams& gp);

}  // namespace pw
