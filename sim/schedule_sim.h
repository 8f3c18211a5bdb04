#pragma once
/// The discrete-event engine applied to a bare schedule with fixed costs: one task per action on
/// its device's compute stream, the dependency graph's edges with the cost table's hop latency.
/// With free communication this must agree with the Evaluator exactly (one truth, two engines).
#include "core/cost_table.h"
#include "core/dependency.h"
#include "core/schedule.h"
#include "sim/engine.h"
#include "sim/task_graph.h"

namespace pw::des {

/// Fills `out` with one task per action, numbered like `graph` (device-major), memory deltas
/// from `costs` applied as the Evaluator does (allocations at start, releases at end).
void build_schedule_graph(const DependencyGraph& graph, const CostTable& costs, TaskGraph* out);

/// Validates `schedule`, builds its task graph and runs the engine once.
EngineResult simulate_schedule(const Schedule& schedule, const CostTable& costs);

}  // namespace pw::des
