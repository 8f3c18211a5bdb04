#include "core/lowering.h"

#include <gtest/gtest.h>

#include "core/dependency.h"
#include "core/validator.h"
#include "tests/core/test_schedules.h"

namespace pw {
namespace {

TEST(Lowering, InsertsSendAfterProducerAndRecvBeforeConsumer) {
  Schedule s = lower_communication(testing::hand_1f1b(2, 1));
  // Device 0: F0, SEND_F0, RECV_B0, BW0. Device 1: RECV_F1, F1, BW1, SEND_B1.
  const std::vector<Action> d0 = {{ActionKind::kF, 0, 0},
                                  {ActionKind::kSendF, 0, 0},
                                  {ActionKind::kRecvB, 0, 0},
                                  {ActionKind::kBW, 0, 0}};
  const std::vector<Action> d1 = {{ActionKind::kRecvF, 1, 0},
                                  {ActionKind::kF, 1, 0},
                                  {ActionKind::kBW, 1, 0},
                                  {ActionKind::kSendB, 1, 0}};
  EXPECT_EQ(s.actions[0], d0);
  EXPECT_EQ(s.actions[1], d1);
  EXPECT_EQ(check_schedule(s), "");
}

TEST(Lowering, CountsFourActionsPerCrossingPerMicrobatch) {
  // p=4, m=8: 3 crossings x 8 microbatches x (SEND_F, RECV_F, SEND_B, RECV_B).
  Schedule in = testing::hand_1f1b(4, 8, true);
  Schedule out = lower_communication(in);
  EXPECT_EQ(out.total_actions(), in.total_actions() + 3 * 8 * 4);
  EXPECT_TRUE(has_explicit_communication(out));
  EXPECT_FALSE(has_explicit_communication(in));
  EXPECT_EQ(check_schedule(out), "");
}

TEST(Lowering, IsIdempotentAndDeterministic) {
  Schedule once = lower_communication(testing::hand_1f1b(3, 5));
  EXPECT_EQ(lower_communication(once), once);
  EXPECT_EQ(lower_communication(testing::hand_1f1b(3, 5)), once);
}

TEST(Lowering, SameStageDeviceNeedsNoCommunication) {
  Schedule s = testing::hand_1f1b(1, 4);
  EXPECT_EQ(lower_communication(s), s);
}

// Completing a schedule for execution adds transfers, reductions and the optimizer step and
// moves no pass: its compute passes are the input's, in the input's order (split backward too).
TEST(Lowering, ComputePassesAreTheScheduleBeforeLowering) {
  for (const bool split : {false, true}) {
    const Schedule in = testing::hand_1f1b(4, 8, split);
    const Schedule done = complete_for_execution(in, 2);
    EXPECT_GT(done.total_actions(), in.total_actions());
    EXPECT_EQ(compute_passes(done), in.actions);
    EXPECT_EQ(compute_passes(in), in.actions);
  }
}

// Device 0 of 1F1B runs its p - 1 warm-up forwards and the first steady-state one before its
// first backward: p leading forwards of stage 0 (m >= p), m when m < p; transfers do not count.
TEST(Lowering, LeadingFirstStageForwardsOfDeviceZero) {
  EXPECT_EQ(leading_first_stage_forwards(testing::hand_1f1b(4, 8)), 4);
  EXPECT_EQ(leading_first_stage_forwards(complete_for_execution(testing::hand_1f1b(4, 8), 2)), 4);
  EXPECT_EQ(leading_first_stage_forwards(testing::hand_1f1b(4, 2)), 2);
  EXPECT_EQ(leading_first_stage_forwards(Schedule{}), 0);
}

}  // namespace
}  // namespace pw
