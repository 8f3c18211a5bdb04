#pragma once
/// Lowering: makes the point-to-point communication that a placement implies explicit, so the
/// executor (and PyTorch's "compute_comms" form) can run it as written.
#include "core/schedule.h"

namespace pw {

/// True when any device list holds SEND_F, RECV_F, SEND_B or RECV_B.
bool has_explicit_communication(const Schedule& schedule);

/// Returns a copy of `schedule` with SEND/RECV actions inserted: right after every action whose
/// output goes to a stage on another device (F -> SEND_F, B/BW -> SEND_B, both halves of an
/// OVERLAP_F_B) and right before every action that consumes such an output (RECV_F before F,
/// RECV_B before B/BW). W and R never communicate. The result passes validate_schedule whenever
/// the input does, and, with zero-duration sends and receives and the hop cost on the send ->
/// receive edge (CostTable::comm of the sending stage, as the evaluator charges it), evaluates to
/// the same start and end for every compute action. A schedule that already has explicit
/// communication is returned unchanged. Deterministic.
Schedule lower_communication(const Schedule& schedule);

}  // namespace pw
