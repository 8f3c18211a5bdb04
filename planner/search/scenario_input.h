#pragma once
/// A scenario's configuration as the discrete-event simulator's input: its schedule generated
/// (`parallel.schedule`, m = B / (b d) microbatches, v chunks, Megatron's uneven split applied)
/// on its profile and topology. What `simulate SCENARIO` and `estimate` simulate.
#include "hwmodels/estimate.h"
#include "hwmodels/scenario.h"
#include "planner/search/screen.h"
#include "sim/iteration.h"

namespace pw {

/// Unknown schedules and generator refusals throw ConfigError naming the scenario file and
/// `parallel.schedule`.
IterationInput scenario_iteration_input(const hw::Scenario& s);

/// The planning problem a scenario poses: its model, its profile with the cluster's node and
/// fabric (gpus_per_node, leaf ports, ...), its GPU count, flash attention and the Megatron
/// settings every configuration shares (gradient precision, overlaps). Objective, target and
/// memory limit stay at their defaults (time, none, the profile's usable memory): the CLI's
/// options set them. What `plan` and `compare` price.
PlanProblem plan_problem(const hw::Scenario& s);

/// Adds the scenario's own chunks per device (Megatron's virtual pipeline size, e.g. 5) to the
/// options of its schedule in `space` when the probe left that v out, so that the scenario's
/// own configuration is one of the space's (`plan` scores it, `compare` runs it).
void add_scenario_chunks(const ParallelConfig& pc, SearchSpace* space);

/// The memory figures `estimate` reports for one simulated GPU (its timeline's peaks).
hw::GpuMemoryFigures memory_figures(const DeviceMemory& m);

}  // namespace pw
