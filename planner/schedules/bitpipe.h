#pragma once
/// BitPipe (Wu et al. 2024): two V-shaped interleaved pipelines in opposite directions, 4 chunks
/// per device, full backwards, PAIR_REDUCE between devices j and p-1-j. The registered generator
/// is generate_bitpipe (planner/schedules/memory_family.h); these are its parts, for tests and
/// tools.
#include "core/cost_table.h"
#include "core/schedule.h"

namespace pw {

/// Stages 0..2p-1 are the down pipeline (enters at device 0), 2p..4p-1 the up pipeline (enters
/// at device p-1); stage k of the down pipeline is on device k (k < p) or 2p-1-k, the up
/// pipeline's on the mirrored device. `num_layers` <= 0 means one layer per chunk (2p).
Placement bitpipe_placement(int p, int num_layers);

/// The time-expanded BitPipe order: microbatches (first m/2 down, the rest up) are laid down in
/// the order down 0, up 0, down 1, up 1, ...; each one's 2p forwards then 2p full backwards take
/// the earliest free interval of their device after their prerequisite (costs from `costs`,
/// hops included). With `max_in_flight` > 0 the i-th microbatch of a pipeline enters only after
/// the (i - max_in_flight)-th of the same pipeline has finished the backward of chunk
/// `gate_chunk` (0 = its last backward, 2p-1 = its first); <= 0 means unbounded. Each device's
/// order is its passes by planned start. The result has no PAIR_REDUCE actions. Needs an even p
/// and an even m.
Schedule bitpipe_time_expanded(const Placement& placement, int m, const CostTable& costs,
                               int max_in_flight, int gate_chunk = 0);

/// BitPipe's default activation budget per device when no --memory-limit is given, in 1F1B
/// stage-microbatch units: interleaved 1F1B's (v = 2) peak, p + (p-1)/2, the schedule it is
/// measured against.
double bitpipe_default_memory(int p);

}  // namespace pw
