// Adaptive V-shape scheduler: the whole offset space for p=16, m=64 with the full memory/time
// trade-off curve (target: under 50 ms on one core). Unit pass costs, W holding nothing.
// `OursOnly` leaves out the authors' block parametrisation and reordering (planner/schedules/
// v_grid.h), to compare with the search before they joined it.
#include <benchmark/benchmark.h>

#include "planner/schedules/adaptive.h"
#include "planner/schedules/generator.h"
#include "planner/schedules/v_grid.h"
#include "planner/schedules/v_schedules.h"

namespace {

void run(benchmark::State& state, bool greedy_points, bool authors = true) {
  const int p = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  pw::UniformCosts c{1, 1, 1, 0, 0};
  const pw::CostTable costs = pw::make_uniform_cost_table(pw::v_placement(p), c);
  pw::AdaptiveOptions opt;
  opt.greedy_points = greedy_points;
  opt.pattern_space = opt.grid_method = authors;
  std::size_t points = 0;
  for (auto _ : state) {
    const pw::TradeoffCurve curve = pw::adaptive_tradeoff(p, m, costs, opt);
    points = curve.points.size();
    benchmark::DoNotOptimize(points);
  }
  state.counters["curve_points"] = static_cast<double>(points);
}

void BM_AdaptiveOffsetSpace(benchmark::State& state) { run(state, false); }
void BM_AdaptiveWithGreedyPoints(benchmark::State& state) { run(state, true); }
void BM_AdaptiveOursOnly(benchmark::State& state) { run(state, true, false); }

// The authors' method (planner/schedules/v_grid.h) alone, one thread: its four steps on the
// V-Min, V-Half, V-ZB and V-ZB grid blocks, each finished (no sharing between them). The per-grid
// cost behind the adaptive search's "authors' method" phase, without the thread pool's noise.
void BM_VGridMethod(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  std::vector<pw::VGridPattern> patterns;
  for (const pw::VOffsets& o :
       {pw::v_min_offsets(p), pw::v_half_offsets(p), pw::v_zb_offsets(p), pw::v_zb_grid_offsets(p)})
    patterns.push_back(pw::v_grid_pattern(pw::v_block(p, o, "bench")));
  std::size_t finished = 0;
  for (auto _ : state) {
    finished = 0;
    for (const pw::VGridPattern& pat : patterns)
      finished += pw::v_grid_schedule(p, m, pat, 2 * p).has_value();
    benchmark::DoNotOptimize(finished);
  }
  state.counters["finished"] = static_cast<double>(finished);
}

// Generates `name` with `gp` once per iteration; reports the schedule's action count.
void generate_repeatedly(benchmark::State& state, const char* name, const pw::GeneratorParams& gp) {
  const pw::GeneratorRegistry reg = pw::default_registry();
  std::size_t actions = 0;
  for (auto _ : state) {
    const pw::Schedule s = pw::generate_schedule(reg, name, gp);
    actions = s.total_actions();
    benchmark::DoNotOptimize(actions);
  }
  state.counters["actions"] = static_cast<double>(actions);
}

// The V-Min / V-Half / V-ZB generators with warm-up/cool-down reordering (the planner calls
// them once per (p, m)): unit costs, W holding nothing.
void BM_VGenerator(benchmark::State& state, const char* name) {
  pw::GeneratorParams gp;
  gp.p = static_cast<int>(state.range(0));
  gp.m = static_cast<int>(state.range(1));
  gp.costs = pw::UniformCosts{1, 1, 1, 0, 0};
  gp.costs.mw_over_mb = 0;
  generate_repeatedly(state, name, gp);
}
BENCHMARK_CAPTURE(BM_VGenerator, v_min, "v-min")->Args({16, 64})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VGenerator, v_half, "v-half")->Args({16, 64})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VGenerator, v_zb, "v-zb")->Args({16, 64})->Unit(benchmark::kMillisecond);

// ZB-1p / ZB-2p (the zero-bubble authors' automatic schedules: zb_auto's greedy variants under
// the 1p / 2p activation limits, then its reordering) at p=32, m=96, the size issue 18 asks
// under 1 s: unequal profiled-like costs (F 1, B 1.3, W 0.9, hop 0.05 ms), W holding half of B's
// activation.
void BM_ZbGenerator(benchmark::State& state, const char* name) {
  pw::GeneratorParams gp;
  gp.p = static_cast<int>(state.range(0));
  gp.m = static_cast<int>(state.range(1));
  constexpr pw::TimePs kMs = 1'000'000'000;
  gp.costs = pw::UniformCosts{kMs, kMs * 13 / 10, kMs * 9 / 10, 0, kMs / 20};
  gp.costs.mw_over_mb = 0.5;
  generate_repeatedly(state, name, gp);
}
BENCHMARK_CAPTURE(BM_ZbGenerator, zb_1p, "zb-1p")->Args({32, 96})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ZbGenerator, zb_2p, "zb-2p")->Args({32, 96})->Unit(benchmark::kMillisecond);

// The planner's questions (GPT-3 175B on 1024 A100, t4 p16 d16): pass costs relative to F = 1 ms
// (B 1.0, W 0.75, hop 1/64), W holding a quarter of the activation, a memory limit that binds.
void BM_PlannerQuestion(benchmark::State& state, const char* name) {
  pw::GeneratorParams gp;
  gp.p = static_cast<int>(state.range(0));
  gp.m = static_cast<int>(state.range(1));
  constexpr pw::TimePs kMs = 1'000'000'000;
  gp.costs = pw::UniformCosts{kMs, kMs, kMs * 3 / 4, 0, kMs / 64};
  gp.costs.mw_over_mb = 0.25;
  gp.memory_limit = static_cast<double>(state.range(2));
  generate_repeatedly(state, name, gp);
}
BENCHMARK_CAPTURE(BM_PlannerQuestion, v_adaptive, "v-adaptive")
    ->Args({16, 48, 8})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlannerQuestion, v_zb, "v-zb")
    ->Args({16, 48, 8})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlannerQuestion, zeropp, "zeropp")
    ->Args({16, 24, 4})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_AdaptiveOffsetSpace)->Args({4, 8})->Args({16, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdaptiveWithGreedyPoints)->Args({4, 8})->Args({16, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdaptiveOursOnly)->Args({4, 8})->Args({16, 64})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK(BM_VGridMethod)->Args({16, 64})->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
