#pragma once
/// One definition of "the discrete-event simulation of a configuration" shared by the planner's
/// DES tier (planner/search/search_des.cc), the predicted times `pipewright plan --emit` writes
/// into a plan (planner/search/plan_emit.cc) and `pipewright simulate --plan`
/// (tools/simulate_plan.cc), so the three simulate the same input and a plan re-simulates to its
/// own prediction.
#include <string>
#include <vector>

#include "core/plan.h"
#include "hwmodels/profile.h"
#include "sim/iteration.h"

namespace pw {

/// The simulator's input for `config` running `schedule` (one device per pipeline rank, layer
/// ranges over model.num_layers) on `profile`: ffn_hidden_size 0 becomes 4 * hidden_size,
/// sequence parallelism is dropped when tensor_parallel is 1 (it needs TP), and the topology has
/// ceil(t * p * d / GPUs per node) nodes of the profile; a configuration smaller than one node
/// uses that many GPUs of it (as `gpus_per_node` in a scenario).
IterationInput plan_iteration_input(const ModelShape& model, const ParallelConfig& config,
                                    const hw::HardwareProfile& profile, const Schedule& schedule);

/// What a plan's prediction says about itself against a re-simulation of it.
struct TimingAgreement {
  std::size_t compared = 0;  ///< actions with a prediction and a simulated interval
  std::size_t exact = 0;     ///< ... whose start and end are identical
  TimePs worst = 0;          ///< largest |difference| of a start or an end, picoseconds
};

/// Compares `predicted` (a plan's ActionTiming list, any order) with `simulated` (device-major,
/// as simulate_iteration fills it for `schedule`). Entries outside the schedule are ignored.
TimingAgreement compare_timings(const Schedule& schedule,
                                const std::vector<ActionTiming>& predicted,
                                const std::vector<ActionTiming>& simulated);

}  // namespace pw
