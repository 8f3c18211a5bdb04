#pragma once
/// A scenario's configuration as the discrete-event simulator's input: its schedule generated
/// (`parallel.schedule`, m = B / (b d) microbatches, v chunks, Megatron's uneven split applied)
/// on its profile and topology. What `simulate SCENARIO` and `estimate` simulate.
#include "hwmodels/estimate.h"
#include "hwmodels/scenario.h"
#include "sim/iteration.h"

namespace pw {

/// Unknown schedules and generator refusals throw ConfigError naming the scenario file and
/// `parallel.schedule`.
IterationInput scenario_iteration_input(const hw::Scenario& s);

/// The memory figures `estimate` reports for one simulated GPU (its timeline's peaks).
hw::GpuMemoryFigures memory_figures(const DeviceMemory& m);

}  // namespace pw
