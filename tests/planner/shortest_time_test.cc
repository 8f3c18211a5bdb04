// `plan --shortest-time`: the critical batch and S_min it reports, the steps and days of every
// point of the sweep, and the choice of the fastest point, against hand-computed values.
#include "planner/search/shortest_time.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pw {
namespace {

// megatron-1.7b: h = 2304, 24 layers. Non-embedding parameters N = 24 (12 h^2 + 13 h)
// = 24 x 63,730,944 = 1.5295e9 (the layer formula of planner/search/search_space.h).
// Target L = 2.5 nats:
//   B_crit = 2.1e8 / 2.5^(1/0.21) = 2.1e8 / 78.515 = 2.6746e6 tokens (1306 sequences of 2048)
//   loss floor (N_c/N)^a_N = (6.5e13 / 1.5295e9)^0.077 = 2.2719
//   S_min = 2100 / (2.5 - 2.2719)^(1/0.76) = 14,679 steps
//   batches swept: 2^k for k = round(log2 1306) +- 3 = 7..13
//   steps(B) = S_min (1 + B_crit / (B x 2048)): B = 128 -> 164,454; 1024 -> 33,401; 8192 -> 17,020
constexpr double kBcrit = 2.6746e6, kSmin = 14679, kRel = 1e-3;

PlanProblem problem_1_7b(double loss) {
  PlanProblem pr;
  EXPECT_TRUE(model_preset("megatron-1.7b", &pr.model));
  pr.profile = hw::resolve_profile("dgx-a100-80gb", "", "", "");
  pr.target.loss = loss;
  return pr;
}

ShortestTimeResult run(const PlanProblem& pr) {
  ShortestTimeOptions o;
  o.max_gpus = 64;  // 8, 16, 32, 64 GPUs per batch: enough points, a few seconds
  return shortest_time(pr, default_registry(), o);
}

// One sweep to 2.5 nats (each sweep plans 28 points: one per test keeps the sanitized suite
// short), checked three ways: the reported laws, the points, and the choice.
TEST(ShortestTime, ReportsTheLawsSweepsAroundTheCriticalBatchAndChoosesTheFastestPoint) {
  const ShortestTimeResult r = run(problem_1_7b(2.5));
  ASSERT_TRUE(r.feasible) << r.note;
  // The laws: B_crit and S_min as computed above.
  EXPECT_NEAR(r.target_loss, 2.5, 1e-12);
  EXPECT_NEAR(r.b_crit_tokens / kBcrit, 1.0, kRel);
  EXPECT_NEAR(r.s_min / kSmin, 1.0, kRel);
  // The sweep: batches 2^7..2^13, steps(B) = S_min (1 + B_crit / (B x 2048)), days from them.
  ASSERT_FALSE(r.points.empty());
  int lo = 1 << 30, hi = 0;
  for (const ShortestTimePoint& p : r.points) {
    lo = std::min(lo, p.global_batch);
    hi = std::max(hi, p.global_batch);
    EXPECT_LE(p.gpus, 64);
    const double steps = kSmin * (1 + kBcrit / (p.global_batch * 2048.0));
    EXPECT_NEAR(p.steps / steps, 1.0, 2 * kRel) << p.global_batch;
    if (p.global_batch == 128) {
      EXPECT_NEAR(p.steps / 164454, 1.0, 2 * kRel);
    }
    if (p.global_batch == 1024) {
      EXPECT_NEAR(p.steps / 33401, 1.0, 2 * kRel);
    }
    if (p.global_batch == 8192) {
      EXPECT_NEAR(p.steps / 17020, 1.0, 2 * kRel);
    }
    if (!p.feasible) continue;
    EXPECT_EQ(p.best.config.global_batch(), p.global_batch);
    EXPECT_EQ(p.best.config.gpus(), p.gpus);
    // days = steps x seconds per step / 86400
    EXPECT_NEAR(p.days, p.steps * p.best.iteration / 86400.0, 1e-9 * p.days);
    // The choice: no feasible point is faster.
    EXPECT_LE(r.best.days, p.days) << p.global_batch << " x " << p.gpus;
  }
  EXPECT_EQ(lo, 128);
  EXPECT_EQ(hi, 8192);
  EXPECT_TRUE(r.best.feasible);
  // The bound line quotes the critical batch and the step count relative to S_min, which is
  // 1 + B_crit / B at the chosen batch.
  EXPECT_NE(r.bound.find("critical batch"), std::string::npos) << r.bound;
  const double ratio = 1 + kBcrit / (r.best.global_batch * 2048.0);
  EXPECT_NEAR(r.best.steps / r.s_min, ratio, 2 * kRel);
  // With GPUs capped at 64 the fastest point uses all of them (a 1.7B model scales well to 64).
  EXPECT_EQ(r.best.gpus, 64);
}

// A lower target loss needs a larger critical batch, and the sweep moves up with it:
// B_crit(2.35) = 2.1e8 / 2.35^(1/0.21) = 2.1e8 / 58.478 = 3.591e6 tokens = 1753 sequences,
// round(log2 1753) = 11, so the batches start at 2^(11-3) = 256 (2.5 nats: 128).
TEST(ShortestTime, LowerTargetLossMovesTheSweepToLargerBatches) {
  const ShortestTimeResult r = run(problem_1_7b(2.35));
  ASSERT_TRUE(r.feasible);
  EXPECT_NEAR(r.b_crit_tokens / 3.591e6, 1.0, kRel);
  int lo = 1 << 30;
  for (const ShortestTimePoint& p : r.points) lo = std::min(lo, p.global_batch);
  EXPECT_EQ(lo, 256);
}

TEST(ShortestTime, LossBelowTheFloorIsInfeasibleWithTheReason) {
  const ShortestTimeResult r = run(problem_1_7b(2.2));  // floor 2.2719
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.note.find("below"), std::string::npos) << r.note;
}

}  // namespace
}  // namespace pw
