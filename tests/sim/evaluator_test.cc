#include "sim/evaluator.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/generator.h"

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

}  // namespace
}  // namespace pw
