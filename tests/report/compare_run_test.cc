#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/schedules/generator.h"
#include "report/build.h"
#include "report/report.h"

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

// Plans from `plan --emit` end every device with REDUCE_GRAD (d > 1) and OPT (planner/
// plan_emit.h): the same 1F1B p=2 m=2 with REDUCE_GRAD of the device's stage (0.25 ms predicted
// and measured) and OPT (0.5 ms predicted, 0.6 ms measured) after its four passes.
TEST(CompareRun, OptimizerAndReduceGradientRows) {
  GeneratorParams gp;
  gp.p = 2;
  gp.m = 2;
  Plan plan;
  plan.schedule = generate_schedule(default_registry(), "1f1b", gp);
  for (int d = 0; d < 2; ++d) {
    plan.schedule.actions[d].push_back({ActionKind::kReduceGrad, static_cast<std::int16_t>(d), -1});
    plan.schedule.actions[d].push_back({ActionKind::kOptStep, -1, -1});
  }
  const TimePs ms = millis_to_ps(1);
  CostTable table =
      make_uniform_cost_table(plan.schedule.placement, UniformCosts{ms, ms, ms, 0, 0});
  for (int st = 0; st < 2; ++st) {
    table.time(st, ActionKind::kReduceGrad) = ms / 4;
    table.time(st, ActionKind::kOptStep) = ms / 2;
  }
  const EvalResult r = evaluate(plan.schedule, table);
  MeasuredRun run;
  std::size_t id = 0;
  for (int d = 0; d < 2; ++d) {
    for (int k = 0; k < 6; ++k, ++id) {
      plan.predicted.push_back({d, k, r.start[id], r.end[id]});
      const Action& a = plan.schedule.actions[d][k];
      const TimePs dur = a.kind == ActionKind::kOptStep ? ms * 6 / 10 : r.end[id] - r.start[id];
      run.actions.push_back({d, k, a, r.start[id], r.start[id] + dur});
    }
  }
  // Device 0: 9 ms of passes (the hand schedule above), then 0.25 + 0.5 ms.
  EXPECT_EQ(r.makespan, millis_to_ps(9) + ms * 3 / 4);
  plan.predicted_iteration = r.makespan;
  run.iteration_time = 10 * ms;
  const RunComparison c = compare_run(plan, run, "run.json");
  ASSERT_EQ(c.kinds.size(), 4u);  // F, BW, collectives, optimizer
  EXPECT_EQ(c.kinds[2].kind, "collectives");
  EXPECT_EQ(c.kinds[2].count, 2);
  EXPECT_EQ(c.kinds[2].predicted, ms / 2);
  EXPECT_DOUBLE_EQ(c.kinds[2].error(), 0.0);
  EXPECT_EQ(c.kinds[3].kind, "optimizer");
  EXPECT_EQ(c.kinds[3].count, 2);
  EXPECT_EQ(c.kinds[3].predicted, ms);
  EXPECT_EQ(c.kinds[3].measured, ms * 12 / 10);
  EXPECT_NEAR(c.kinds[3].error(), -1.0 / 6.0, 1e-12);  // (1 - 1.2) / 1.2
  ReportInput in;
  in.measured = c;
  const std::string text = render_text(in);
  EXPECT_NE(text.find("optimizer"), std::string::npos) << text;
  EXPECT_NE(text.find("collectives"), std::string::npos) << text;
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
