#include "sim/evaluator.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/schedules/generator.h"

namespace pw {
namespace {

Schedule make(const std::string& name, int p, int m) {
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  return generate_schedule(default_registry(), name, gp);
}

TEST(Evaluator, OneFOneBBubbleMatchesBothConventions) {
  // p=4, m=8, F=B=W=1: makespan (m+p-1)*3 = 33, ideal 8*3 = 24.
  Schedule s = make("1f1b", 4, 8);
  CostTable c = make_uniform_cost_table(s.placement, UniformCosts{1, 1, 1, 0, 0});
  EvalResult r = evaluate(s, c);
  EXPECT_EQ(r.cost, 33);
  EXPECT_DOUBLE_EQ(r.bubble_rate, 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 3.0 / 8.0);
}

TEST(Evaluator, OneFOneBDeviceSHoldsPMinusSMicrobatches) {
  Schedule s = make("1f1b", 4, 8);
  EvalResult r = evaluate(s, make_uniform_cost_table(s.placement, UniformCosts{1, 1, 1, 0, 0}));
  for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(r.device[d].peak_memory, 4 - d) << "device " << d;
}

TEST(Evaluator, GPipePeaksAtM) {
  Schedule s = make("gpipe", 4, 8);
  EvalResult r = evaluate(s, make_uniform_cost_table(s.placement, UniformCosts{1, 1, 1, 0, 0}));
  for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(r.device[d].peak_memory, 8);
}

TEST(Validator, SwappedActionsDeadlockAndNameTheDevices) {
  Schedule s = make("1f1b", 2, 2);
  // Device 1 runs BW of mb 0 before F of mb 0: a broken dependency on its own device.
  std::swap(s.actions[1][0], s.actions[1][1]);
  try {
    Evaluator ev(s);
    FAIL() << "expected a deadlock error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("device 1"), std::string::npos) << e.what();
  }
}

TEST(Evaluator, ZeroBubblePaperOneFOneBBubbleRates) {
  // Profiled T_F, T_B, T_W, T_comm (ms) from the zero-bubble paper; T_comm paid on every
  // cross-device hop of both the forward and the backward chain. Published 1F1B bubble rates.
  struct Row {
    int p, m;
    double f, b, w, comm, published;
  };
  const Row rows[] = {{8, 24, 18.522, 18.086, 9.337, 0.601, 0.2431},
                      {8, 32, 18.513, 18.086, 9.331, 0.626, 0.1985},
                      {8, 64, 18.546, 18.097, 9.321, 0.762, 0.1240},
                      {32, 96, 10.419, 10.207, 7.715, 0.408, 0.2646}};
  for (const Row& r : rows) {
    Schedule s = make("1f1b", r.p, r.m);
    UniformCosts c{millis_to_ps(r.f), millis_to_ps(r.b), millis_to_ps(r.w), 0,
                   millis_to_ps(r.comm)};
    EvalResult e = evaluate(s, make_uniform_cost_table(s.placement, c));
    EXPECT_NEAR(e.bubble_rate, r.published, 5e-5) << "p=" << r.p << " m=" << r.m;
  }
}

TEST(Evaluator, ReusedEvaluatorGivesIdenticalResults) {
  Schedule s = make("1f1b", 4, 8);
  Evaluator ev(s);
  CostTable a = make_uniform_cost_table(s.placement, UniformCosts{1, 1, 1, 0, 0});
  CostTable b = make_uniform_cost_table(s.placement, UniformCosts{2, 3, 1, 0, 1});
  const EvalResult first = ev.run(a);
  ev.run(b);
  const EvalResult again = ev.run(a);
  EXPECT_EQ(first.start, again.start);
  EXPECT_EQ(first.end, again.end);
  EXPECT_EQ(first.makespan, again.makespan);
}

}  // namespace
}  // namespace pw
