// Kaplan critical batch and steps/examples trade-off, with hand-computed values.
#include "planner/search/scaling_laws.h"

#include <gtest/gtest.h>

#include <cmath>

#include "planner/search/screen.h"
#include "planner/search/search.h"

namespace pw {
namespace {

TEST(CriticalBatch, TwoNatsIsBStarOverTwoToTheOneOverAB) {
  // 1/0.21 = 4.7619; 2^4.7619 = 16 * 2^0.7619 = 16 * 1.69570 = 27.1312;
  // 2.1e8 / 27.1312 = 7.7400e6 tokens.
  EXPECT_NEAR(critical_batch_tokens(2.0), 7.7400e6, 1e3);
  EXPECT_DOUBLE_EQ(critical_batch_tokens(2.0), 2.1e8 / std::pow(2.0, 1 / 0.21));
  // A lower loss needs a larger batch: L = 3.0 -> 2.1e8 / 3^4.7619 = 2.1e8 / 187.07 = 1.1226e6.
  EXPECT_NEAR(critical_batch_tokens(3.0), 1.1226e6, 1e2);
}

TEST(StepsExamples, CriticalBatchTakesTwiceTheMinimumStepsAndExamples) {
  const double s_min = 1000, b_crit = 4e6;
  EXPECT_DOUBLE_EQ(steps_at_batch(s_min, b_crit, b_crit), 2 * s_min);
  EXPECT_DOUBLE_EQ(tokens_at_batch(s_min, b_crit, b_crit), 2 * s_min * b_crit);
  // (S/S_min - 1)(E/E_min - 1) = 1 at any batch: B = B_crit/4 -> S = 5 S_min, E = 1.25 E_min.
  const double s = steps_at_batch(s_min, b_crit, b_crit / 4);
  const double e = tokens_at_batch(s_min, b_crit, b_crit / 4);
  EXPECT_DOUBLE_EQ(s, 5 * s_min);
  EXPECT_DOUBLE_EQ(e, 1.25 * s_min * b_crit);
  EXPECT_NEAR((s / s_min - 1) * (e / (s_min * b_crit) - 1), 1.0, 1e-12);
}

TEST(MinSteps, FollowsKaplanLossVersusSteps) {
  // N = 1e9: floor = (6.5e13/1e9)^0.077 = 65000^0.077 = 2.34744; at L = 3.0 the excess is
  // 0.65256 and S_min = 2100 / 0.65256^(1/0.76) = 2100 / 0.57028 = 3682.5 steps.
  EXPECT_NEAR(loss_floor(1e9), 2.34744, 1e-5);
  EXPECT_NEAR(min_steps(1e9, 3.0), 3682.5, 0.5);
  EXPECT_TRUE(std::isinf(min_steps(1e9, 2.0)));  // below the floor
  TrainingTarget t;
  t.loss = 2.0;
  EXPECT_FALSE(training_need(1e9, t, 1e6).feasible);
}

// With an iteration time T(B) = a + c*B, time to target S_min (1 + Bc/B)(a + cB) is minimal at
// B* = sqrt(a * Bc / c). With a = 1 s and c = 1e-6 s per token:
//   L = 3.0: Bc = 1.1226e6 -> B* = 1.0595e6;  L = 2.5: Bc = 2.6746e6 -> B* = 1.6354e6;
//   L = 2.0: Bc = 7.7400e6 -> B* = 2.7821e6.
TEST(TimeToLoss, ChosenBatchMovesWithTargetLossAsTheLawsSay) {
  PlanProblem pr;
  pr.model = ModelShape{"toy", 48, 8192, 64, 4 * 8192, 1, 51200};  // seq 1: batch = tokens
  pr.objective = Objective::kTimeToLoss;
  const double expected[][2] = {{3.0, 1.0595e6}, {2.5, 1.6354e6}, {2.0, 2.7821e6}};
  double previous = 0;
  for (const auto& [loss, b_star] : expected) {
    pr.target.loss = loss;
    double best_b = 0, best = INFINITY;
    for (double b = 1e5; b < 1e7; b *= 1.001) {
      // A continuous batch: steps(B) * T(B) through training_need, which objective_value uses.
      const double params = hw::non_embedding_parameter_count(pr.model);
      const double v = training_need(params, pr.target, b).steps * (1 + 1e-6 * b);
      if (v < best) best = v, best_b = b;
    }
    EXPECT_NEAR(best_b / b_star, 1.0, 0.002) << "loss " << loss;
    EXPECT_GT(best_b, previous);
    previous = best_b;
  }
}

TEST(TimeToLoss, ObjectiveIsStepsTimesIteration) {
  PlanProblem pr;
  pr.model = ModelShape{"toy", 48, 8192, 64, 4 * 8192, 2048, 51200};
  pr.objective = Objective::kTimeToLoss;
  pr.target.loss = 2.5;
  SearchConfig c;
  c.micro_batch = 1;
  c.d = 8;
  c.microbatches = 64;  // B = 512 sequences = 1048576 tokens
  const double params = hw::non_embedding_parameter_count(pr.model);
  const double s_min = min_steps(params, 2.5);
  const double steps = s_min * (1 + critical_batch_tokens(2.5) / 1048576.0);
  EXPECT_NEAR(objective_value(pr, c, 10.0), steps * 10.0, 1e-6 * steps);
  pr.objective = Objective::kCost;
  c.t = 2;
  c.p = 4;  // 64 GPUs
  EXPECT_NEAR(objective_value(pr, c, 10.0), steps * 10.0 * 64, 1e-6 * steps * 64);
}

}  // namespace
}  // namespace pw
