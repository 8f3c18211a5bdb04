#pragma once
/// What one rank executes: the plan's action list of its pipeline device completed for execution
/// by core/lowering.h (complete_for_execution: the communication a compute-only plan leaves
/// implied made explicit, and the end-of-iteration work it does not list: data-parallel
/// REDUCE_GRAD, BitPipe PAIR_REDUCE between replicated stages, OPT), each action with its peer.
/// Pure data, no MPI: shared by every backend and the benchmark.
#include <cstdint>
#include <string>
#include <vector>

#include "core/schedule.h"

namespace pw::exec {

/// One executed action. 24 bytes, trivially copyable.
struct ExecAction {
  Action action;
  std::int32_t plan_index = -1;  ///< position in the plan's device list, -1 when implied
  std::int32_t peer = -1;        ///< pipeline device at the other end of a SEND/RECV, else -1
};

/// The per-device programs of a schedule.
struct Program {
  std::vector<std::vector<ExecAction>> device;  ///< device[d] in execution order
  /// recompute[stage * m + mb]: the plan recomputes this forward (F may drop its activations).
  std::vector<std::uint8_t> recompute;
  int num_microbatches = 0;
  bool lowered = false;  ///< the plan already had explicit SEND/RECV
  int num_implied = 0;   ///< actions added by build_program
};

/// Builds the programs (complete_for_execution with `data_parallel`). The schedule must already
/// be valid.
Program build_program(const Schedule& schedule, int data_parallel);

/// Transfers matched in order (NCCL point-to-point has no tags): for every directed device pair,
/// the sender's SEND sequence must name the same (receiving stage, microbatch, direction) as the
/// receiver's RECV sequence. Returns "" when it holds, else which pair differs and where.
std::string check_transfer_order(const Program& program, const Placement& placement);

/// Stages (global ids) holding the same layers as `stage` in the other pipelines, in pipeline
/// order, `stage` included. Size 1 for single-pipeline placements.
std::vector<int> replica_stages(const Placement& placement, int stage);

}  // namespace pw::exec
