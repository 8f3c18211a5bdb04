// Fixed-cost evaluator throughput: 1F1B with p=64, m=512 (65,536 actions) evaluated repeatedly by
// one prebuilt Evaluator. items_per_second = actions evaluated per second (one core).
// BM_BuildEvaluator_*: building one (the schedule's dependency graph and flat arrays), as the
// generators that time candidate orders and the search do once per schedule; items = actions.
#include <benchmark/benchmark.h>

#include "core/lowering.h"
#include "planner/schedules/generator.h"
#include "sim/evaluator.h"

namespace {

pw::Schedule make(const char* name, int p, int m, int v = 0) {
  pw::GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  gp.v = v;
  return pw::generate_schedule(pw::default_registry(), name, gp);
}

void run(benchmark::State& state, const pw::Schedule& s) {
  pw::Evaluator ev(s);
  const pw::CostTable costs =
      pw::make_uniform_cost_table(s.placement, pw::UniformCosts{1000, 1000, 1000, 0, 100});
  for (auto _ : state) benchmark::DoNotOptimize(ev.run(costs).makespan);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(s.total_actions()));
  state.counters["actions"] = static_cast<double>(s.total_actions());
}

void BM_Evaluate1F1B_p64_m512(benchmark::State& state) { run(state, make("1f1b", 64, 512)); }
void BM_EvaluateZBH1_p64_m512(benchmark::State& state) { run(state, make("zb-h1", 64, 512)); }
void BM_EvaluateLowered1F1B_p64_m512(benchmark::State& state) {
  run(state, pw::lower_communication(make("1f1b", 64, 512)));
}

void build(benchmark::State& state, const pw::Schedule& s) {
  for (auto _ : state) {
    pw::Evaluator ev(s);
    benchmark::DoNotOptimize(&ev);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(s.total_actions()));
}

void BM_BuildEvaluator_ZBH1_p64_m512(benchmark::State& state) {
  build(state, make("zb-h1", 64, 512));
}
void BM_BuildEvaluator_Interleaved_p16_m96_v6(benchmark::State& state) {
  build(state, make("interleaved", 16, 96, 6));
}

BENCHMARK(BM_BuildEvaluator_ZBH1_p64_m512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BuildEvaluator_Interleaved_p16_m96_v6)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Evaluate1F1B_p64_m512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvaluateZBH1_p64_m512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvaluateLowered1F1B_p64_m512)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
