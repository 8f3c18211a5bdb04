// Discrete-event simulator benchmarks: raw engine throughput (events per second on one core) and
// the full-iteration simulation of GPT-3 175B on 1024 A100 (t=8, p=8 interleaved, d=16, m=96).
#include <benchmark/benchmark.h>

#include <string>

#include "core/cost_table.h"
#include "core/dependency.h"
#include "hwmodels/scenario.h"
#include "planner/schedules/generator.h"
#include "planner/search/scenario_input.h"
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

// GPT-3 175B, t = 8, p = 8 interleaved (v = 3), 96 microbatches per pipeline on `nodes` DGX
// A100 nodes (d = nodes / 8, the global batch growing with it).
std::string gpt3_scenario(int nodes) {
  return "model: {preset: gpt3-175b, attention_backend: unfused}\ncluster: {profile: "
         "dgx-a100-80gb, nodes: " +
         std::to_string(nodes) +
         "}\nparallel:\n  tensor_model_parallel_size: 8\n  pipeline_model_parallel_size: 8\n"
         "  num_layers_per_virtual_pipeline_stage: 4\n  micro_batch_size: 1\n"
         "  global_batch_size: " +
         std::to_string(96 * nodes / 8) +
         "\n  recompute_granularity: full\n  schedule: interleaved\n";
}

pw::IterationInput gpt3_input(int nodes = 128) {
  const pw::hw::Scenario s =
      pw::hw::parse_scenario(gpt3_scenario(nodes), "gpt3-175b-1024-a100", ".");
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

// Every GPU simulated (`simulate --all-ranks`), 1024 and 4096 GPUs: time per simulated GPU
// should stay flat as the cluster grows (issue 19's linear-in-ranks target). Peak memory is
// measured with /usr/bin/time on the CLI (docs/simulator.md).
void BM_Gpt3_175B_AllRanks(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const pw::IterationInput in = gpt3_input(nodes);
  pw::IterationOptions opt;
  opt.representative = false;
  for (auto _ : state) {
    const pw::IterationResult r = pw::simulate_iteration(in, opt);
    benchmark::DoNotOptimize(r.iteration);
  }
  // Seconds of wall time per simulated GPU (GPUs x iterations per second, inverted).
  state.counters["s_per_gpu"] = benchmark::Counter(
      8.0 * nodes, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Gpt3_175B_AllRanks)->Arg(128)->Arg(512)->Unit(benchmark::kSecond)->Iterations(1);

// Llama 3.1 405B as Llama 3 trained it (t8 p16, 7 + 14 x 8 + 7 layers, sequence parallel,
// distributed optimizer), full recompute, 16 microbatches per pipeline, every GPU simulated on
// `nodes` DGX H100 nodes (d = nodes / 16). 98,304 GPUs (12,288 nodes) is measured with
// /usr/bin/time on the CLI (docs/simulator.md).
void BM_Llama405B_AllRanks(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int d = nodes * 8 / 128;
  const pw::hw::Scenario s = pw::hw::parse_scenario(
      "model: {preset: llama3.1-405b, use_flash_attn: true}\n"
      "cluster: {profile: dgx-h100, nodes: " +
          std::to_string(nodes) +
          "}\nparallel: {tensor_model_parallel_size: 8, pipeline_model_parallel_size: 16,\n"
          "  decoder_first_pipeline_num_layers: 7, decoder_last_pipeline_num_layers: 7,\n"
          "  micro_batch_size: 1, global_batch_size: " +
          std::to_string(16 * d) +
          ", sequence_parallel: true,\n  use_distributed_optimizer: true, "
          "recompute_granularity: full}\n",
      "llama405b", ".");
  pw::IterationInput in = pw::scenario_iteration_input(s);
  pw::IterationOptions opt;
  opt.representative = false;
  opt.flash_attention = true;
  for (auto _ : state) {
    const pw::IterationResult r = pw::simulate_iteration(in, opt);
    benchmark::DoNotOptimize(r.iteration);
  }
  state.counters["s_per_gpu"] = benchmark::Counter(
      8.0 * nodes, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Llama405B_AllRanks)->Arg(256)->Arg(2048)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
