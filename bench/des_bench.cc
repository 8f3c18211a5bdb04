// Discrete-event simulator benchmarks: raw engine throughput (events per second on one core) and
// the full-iteration simulation of GPT-3 175B on 1024 A100 (t=8, p=8 interleaved, d=16, m=96).
#include <benchmark/benchmark.h>

#include "core/cost_table.h"
#include "core/dependency.h"
#include "hwmodels/scenario.h"
#include "planner/schedules/generator.h"
#include "sim/engine.h"
#include "sim/iteration.h"
#include "sim/schedule_sim.h"

namespace {

// Engine alone: a 1F1B schedule with a hop latency on every cross-device edge (each action ends
// with an event; each cross-device dependency adds one), p devices x 2m actions.
void BM_EngineEvents(benchmark::State& state) {
  pw::GeneratorParams gp;
  gp.p = static_cast<int>(state.range(0));
  gp.m = static_cast<int>(state.range(1));
  const pw::Schedule s = pw::generate_schedule(pw::default_registry(), "1f1b", gp);
  const pw::CostTable c =
      pw::make_uniform_cost_table(s.placement, pw::UniformCosts{1000, 2000, 0, 0, 100});
  const pw::DependencyGraph dg = pw::build_dependency_graph(s);
  pw::des::TaskGraph g;
  pw::des::build_schedule_graph(dg, c, &g);
  pw::des::Engine engine;
  std::uint64_t events = 0;
  for (auto _ : state) {
    const pw::des::EngineResult& r = engine.run(g);
    events += r.events;
    benchmark::DoNotOptimize(r.makespan);
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events/run"] = static_cast<double>(events) / state.iterations();
}
BENCHMARK(BM_EngineEvents)->Args({8, 1024})->Args({64, 1024})->Unit(benchmark::kMillisecond);

// Engine with contended flows: n concurrent flows over a shared link, started one after another
// (each start/end re-shares the component).
void BM_EngineFlows(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  pw::des::TaskGraph g(n);
  for (int i = 0; i < n; ++i) {
    const std::int32_t c = g.add_collective(false);
    g.add_phase(0);
    g.add_flow(1e6 * (1 + i % 7), {pw::des::RouteHop{i % 16, 1.0f}, pw::des::RouteHop{16, 1.0f}});
    pw::des::Task t;
    t.device = i;
    t.is_compute = false;
    t.stream = pw::des::StreamKind::kDp;
    t.collective = c;
    g.add_task(t);
  }
  g.finalize();
  pw::des::Engine engine(std::vector<double>(17, 25e9));
  std::uint64_t events = 0;
  for (auto _ : state) {
    events += engine.run(g).events;
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineFlows)->Arg(64)->Arg(512)->Unit(benchmark::kMillisecond);

const char* kGpt3 = R"(
model: {preset: gpt3-175b}
cluster: {profile: dgx-a100-80gb, nodes: 128}
parallel:
  tensor_model_parallel_size: 8
  pipeline_model_parallel_size: 8
  num_layers_per_virtual_pipeline_stage: 4
  micro_batch_size: 1
  global_batch_size: 1536
  recompute_granularity: full
  schedule: interleaved
)";

pw::IterationInput gpt3_input() {
  const pw::hw::Scenario s = pw::hw::parse_scenario(kGpt3, "gpt3-175b-1024-a100", ".");
  pw::GeneratorParams gp;
  gp.p = s.parallel.pipeline_parallel;
  gp.m = static_cast<int>(s.num_microbatches());
  gp.v = s.parallel.virtual_stages;
  gp.num_layers = s.model.num_layers;
  pw::IterationInput in;
  in.model = s.model;
  in.parallel = s.parallel;
  in.profile = s.profile;
  in.topology = s.topology;
  in.schedule = pw::generate_schedule(pw::default_registry(), s.parallel.schedule, gp);
  return in;
}

// Whole iteration: build the task graph (stage costs, collectives, routes with symmetric-copy
// weights) and run it; the schedule is generated once outside the loop.
void BM_Gpt3_175B_1024Gpus(benchmark::State& state) {
  const pw::IterationInput in = gpt3_input();
  pw::IterationOptions opt;
  std::uint64_t events = 0;
  for (auto _ : state) {
    const pw::IterationResult r = pw::simulate_iteration(in, opt);
    events += r.events;
    benchmark::DoNotOptimize(r.iteration);
  }
  state.counters["events/run"] = static_cast<double>(events) / state.iterations();
}
BENCHMARK(BM_Gpt3_175B_1024Gpus)->Unit(benchmark::kMillisecond);

// The same including scenario parsing and schedule generation (what `pipewright simulate` does).
void BM_Gpt3_175B_1024Gpus_EndToEnd(benchmark::State& state) {
  for (auto _ : state) {
    const pw::IterationResult r = pw::simulate_iteration(gpt3_input(), {});
    benchmark::DoNotOptimize(r.iteration);
  }
}
BENCHMARK(BM_Gpt3_175B_1024Gpus_EndToEnd)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
