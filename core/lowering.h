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

/// Each device's compute passes (F, B, W, BW, R, OVERLAP_F_B) in its order: the schedule with
/// its transfers and per-iteration actions left out, as a generator writes it before lowering.
std::vector<std::vector<Action>> compute_passes(const Schedule& schedule);

/// Device 0's leading forwards of the stage it starts with: the microbatches it runs through
/// its first chunk before anything else (Megatron's interleaved microbatch group, read from an
/// order). 0 for a schedule without devices or passes.
int leading_first_stage_forwards(const Schedule& schedule);

/// Appends to each device's list the end-of-iteration work a compute-only plan leaves implied, so
/// that it is predicted, executed and measured like any other action: with `data_parallel` > 1
/// one REDUCE_GRAD per stage the device holds, in the order the device's stages run their last
/// backward (W, BW or the backward of an OVERLAP_F_B: the order the simulator reduces them in);
/// one PAIR_REDUCE per stage replicated across pipelines (BitPipe), in the stage's index order
/// (one global order, so paired devices never wait on each other's different pairs); then one
/// OPT. Missing reductions are inserted before an OPT the list already has; reductions already
/// listed are kept where they are. Idempotent.
void append_end_of_iteration(Schedule* schedule, int data_parallel);

/// The schedule as every rank runs it: communication made explicit (lower_communication) and
/// the end of the iteration appended (append_end_of_iteration). The one place the IR is completed
/// for execution: `plan --emit` writes it, the executor runs it. `origin`, when given, receives
/// per device the input list's index of each output action (-1 for an added one).
Schedule complete_for_execution(const Schedule& schedule, int data_parallel,
                                std::vector<std::vector<int>>* origin = nullptr);

}  // namespace pw
