#include "sim/schedule_sim.h"

#include <algorithm>

#include "core/error.h"

namespace pw::des {
namespace {

// The dependency graph's edges; a cross-device edge waits its stage boundary's hop latency.
template <typename Hops>
void add_schedule_edges(const DependencyGraph& graph, const Hops& hop_cost, TaskGraph* out) {
  for (std::size_t id = 0; id < graph.size(); ++id) {
    for (std::int32_t k = graph.dep_begin[id]; k < graph.dep_begin[id + 1]; ++k) {
      const std::int16_t hop = graph.dep_hop[k];
      out->add_dep(graph.dep[k], static_cast<std::int32_t>(id), hop >= 0 ? hop_cost[hop] : 0);
    }
  }
  out->finalize();
}

}  // namespace

void build_schedule_graph(const DependencyGraph& graph, const CostTable& costs, TaskGraph* out) {
  const int D = static_cast<int>(graph.device_begin.size()) - 1;
  out->reset(D);
  for (std::size_t id = 0; id < graph.size(); ++id) {
    const Action& a = graph.action[id];
    const int stage = std::max<int>(a.stage, 0);
    const int base = stage * kNumActionKinds;
    int alloc = base + static_cast<int>(a.kind);
    int release = alloc;
    if (a.kind == ActionKind::kOverlapFB) {
      alloc = base + static_cast<int>(ActionKind::kF);
      release = a.stage2 * kNumActionKinds + static_cast<int>(ActionKind::kBW);
    }
    Task t;
    t.device = graph.device_of[id];
    t.stream = StreamKind::kCompute;
    t.is_compute = true;
    t.duration = costs.duration[base + static_cast<int>(a.kind)];
    out->add_task(
        t, {std::max(0.0, costs.mem_delta[alloc]), std::min(0.0, costs.mem_delta[release]), 0, 0});
  }
  add_schedule_edges(graph, costs.comm, out);
}

void build_timed_schedule_graph(const DependencyGraph& graph, const std::vector<TimePs>& duration,
                                const std::vector<TimePs>& hop, TaskGraph* out) {
  PW_ASSERT(duration.size() == graph.size(), "one duration per action");
  out->reset(static_cast<int>(graph.device_begin.size()) - 1);
  for (std::size_t id = 0; id < graph.size(); ++id) {
    Task t;
    t.device = graph.device_of[id];
    t.stream = StreamKind::kCompute;
    t.is_compute = true;
    t.duration = duration[id];
    out->add_task(t);
  }
  add_schedule_edges(graph, hop, out);
}

EngineResult simulate_schedule(const Schedule& schedule, const CostTable& costs) {
  const DependencyGraph graph = build_dependency_graph(schedule);
  TaskGraph g;
  build_schedule_graph(graph, costs, &g);
  Engine engine;
  return engine.run(g);
}

}  // namespace pw::des
