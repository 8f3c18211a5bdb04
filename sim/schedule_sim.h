#pragma once
/// The discrete-event engine applied to a bare schedule with fixed costs: one task per action on
/// its device's compute stream, the dependency graph's edges with the cost table's hop latency.
/// With free communication this must agree with the Evaluator exactly (one truth, two engines).
#include <vector>

#include "core/cost_table.h"
#include "core/dependency.h"
#include "core/schedule.h"
#include "sim/engine.h"
#include "sim/task_graph.h"

namespace pw::des {

/// Fills `out` with one task per action, numbered like `graph` (device-major), memory deltas
/// from `costs` applied as the Evaluator does (allocations at start, releases at end).
void build_schedule_graph(const DependencyGraph& graph, const CostTable& costs, TaskGraph* out);

/// Fills `out` with one compute task per action of `graph` lasting `duration[id]` (no memory), and
/// the graph's edges, a cross-device edge waiting `hop[h]` for its stage boundary h: a schedule
/// replayed with given per-action times (an emitted plan's predictions).
void build_timed_schedule_graph(const DependencyGraph& graph, const std::vector<TimePs>& duration,
                                const std::vector<TimePs>& hop, TaskGraph* out);

/// Validates `schedule`, builds its task graph and runs the engine once.
EngineResult simulate_schedule(const Schedule& schedule, const CostTable& costs);

}  // namespace pw::des
