#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/generator.h"
#include "report/build.h"

namespace pw {
namespace {

struct Fixture {
  Plan plan;
  MeasuredRun run;
};

// 1F1B p=2 m=2 with F=1 ms, BW=2 ms predicted; the run measures F at 1.5 ms and BW at 2 ms.
Fixture make_fixture() {
  GeneratorParams gp;
  gp.p = 2;
  gp.m = 2;
  Fixture f;
  f.plan.schedule = generate_schedule(default_registry(), "1f1b", gp);
  const TimePs ms = millis_to_ps(1);
  const EvalResult r =
      evaluate(f.plan.schedule,
               make_uniform_cost_table(f.plan.schedule.placement, UniformCosts{ms, ms, ms, 0, 0}));
  std::size_t id = 0;
  for (int d = 0; d < 2; ++d) {
    for (int k = 0; k < 4; ++k, ++id) {
      f.plan.predicted.push_back({d, k, r.start[id], r.end[id]});
      const Action& a = f.plan.schedule.actions[d][k];
      const TimePs dur = a.kind == ActionKind::kF ? ms * 3 / 2 : 2 * ms;
      f.run.actions.push_back({d, k, a, r.start[id], r.start[id] + dur});
    }
  }
  f.plan.predicted_iteration = r.makespan;
  f.run.iteration_time = 10 * ms;
  return f;
}

TEST(CompareRun, PerKindAndIterationErrors) {
  const Fixture f = make_fixture();
  const RunComparison c = compare_run(f.plan, f.run, "run.json");
  ASSERT_EQ(c.kinds.size(), 2u);
  // F: 4 actions, predicted 4 ms, measured 6 ms: (4 - 6) / 6 = -1/3.
  EXPECT_EQ(c.kinds[0].kind, "F");
  EXPECT_EQ(c.kinds[0].count, 4);
  EXPECT_EQ(c.kinds[0].predicted, millis_to_ps(4));
  EXPECT_EQ(c.kinds[0].measured, millis_to_ps(6));
  EXPECT_NEAR(c.kinds[0].error(), -1.0 / 3.0, 1e-12);
  // BW: predicted 8 ms, measured 8 ms.
  EXPECT_EQ(c.kinds[1].kind, "BW");
  EXPECT_DOUBLE_EQ(c.kinds[1].error(), 0.0);
  // Iteration: predicted 9 ms (hand schedule of 1F1B p=2 m=2), measured 10 ms: -10%.
  EXPECT_EQ(c.iteration.predicted, millis_to_ps(9));
  EXPECT_NEAR(c.iteration.error(), -0.1, 1e-12);
}

TEST(CompareRun, RejectsARunOfAnotherPlan) {
  Fixture f = make_fixture();
  f.run.actions[0].action.microbatch = 1;
  try {
    compare_run(f.plan, f.run, "run.json");
    FAIL();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("run.json: actions[0]: rank 0 position 0 ran"), std::string::npos) << msg;
  }
}

TEST(CompareRun, RejectsPositionsOutsideTheSchedule) {
  Fixture f = make_fixture();
  f.run.actions[3].index = 9;
  EXPECT_THROW(compare_run(f.plan, f.run, "run.json"), ConfigError);
}

TEST(CompareRun, NeedsPredictions) {
  Fixture f = make_fixture();
  f.plan.predicted.clear();
  EXPECT_THROW(compare_run(f.plan, f.run, "plan.yaml"), ConfigError);
}

}  // namespace
}  // namespace pw
