#include "core/pytorch_csv.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/lowering.h"
#include "tests/core/test_schedules.h"

namespace pw {
namespace {

std::string error_of(const std::string& csv) {
  try {
    schedule_from_pytorch_csv(csv, "s.csv");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PytorchCsv, ExportsComputeOnlyInTimeSlots) {
  // 1F1B p=2 m=2, one slot per action: device 1 waits one slot for its first forward.
  // Slots: d0: F0 F1 . B0 . B1   (B0 needs d1's B0 in slot 2; B1 needs d1's B1 in slot 4)
  //        d1: .  F0 B0 F1 B1
  const std::string csv = schedule_to_pytorch_csv(testing::hand_1f1b(2, 2), CsvForm::kComputeOnly);
  EXPECT_EQ(csv, "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n");
}

TEST(PytorchCsv, SplitBackwardUsesIAndW) {
  const std::string csv =
      schedule_to_pytorch_csv(testing::hand_1f1b(1, 1, true), CsvForm::kComputeOnly);
  EXPECT_EQ(csv, "0F0,0I0,0W0\n");
}

TEST(PytorchCsv, RoundTripIsLosslessInBothForms) {
  for (bool split : {false, true}) {
    Schedule s = testing::hand_1f1b(4, 7, split);
    CsvImportOptions opt;
    opt.name = s.name;
    EXPECT_EQ(
        schedule_from_pytorch_csv(schedule_to_pytorch_csv(s, CsvForm::kComputeOnly), "t", opt), s);
    // compute_comms adds each stage's REDUCE_GRAD after its 7th (last) weight gradient; without
    // them the comms form reads back as the lowered schedule.
    Schedule back =
        schedule_from_pytorch_csv(schedule_to_pytorch_csv(s, CsvForm::kComputeComms), "t", opt);
    for (auto& dev : back.actions) {
      const auto n = std::count_if(dev.begin(), dev.end(), [](const Action& a) {
        return a.kind == ActionKind::kReduceGrad;
      });
      EXPECT_EQ(n, 1);
      dev.erase(std::remove_if(dev.begin(), dev.end(),
                               [](const Action& a) { return a.kind == ActionKind::kReduceGrad; }),
                dev.end());
    }
    EXPECT_EQ(back, lower_communication(s));
  }
}

TEST(PytorchCsv, ComputeCommsGivesEachStageReduceGradAfterItsLastWeightGradient) {
  // PyTorch's runtime scales gradients by 1/M at REDUCE_GRAD, which its compute_only lowering
  // puts right after a stage's M-th W or full backward (_add_reduce_grad); a compute_comms CSV
  // runs as written. Measured with PyTorch 2.11's _PipelineScheduleRuntime (1F1B p=4, m=8):
  // without it every gradient came out 8 times the unpipelined one (relative error 7.00).
  // hand_1f1b(1, 2, true) on one device: F0 I0 W0 F1 I1 W1.
  const std::string split =
      schedule_to_pytorch_csv(testing::hand_1f1b(1, 2, true), CsvForm::kComputeComms);
  EXPECT_EQ(split.substr(split.rfind("0W1")), "0W1,0REDUCE_GRAD\n") << split;
  const std::string full =
      schedule_to_pytorch_csv(testing::hand_1f1b(2, 2), CsvForm::kComputeComms);
  // Device 0's last backward is 0B1, device 1's is 1B1, whose gradient send goes first.
  EXPECT_NE(full.find("0B1,0REDUCE_GRAD"), std::string::npos) << full;
  EXPECT_NE(full.find("1B1,1SEND_B1,1REDUCE_GRAD"), std::string::npos) << full;
  // A schedule that already reduces a stage keeps its own REDUCE_GRAD and gets no second one.
  Schedule s = testing::hand_1f1b(1, 2);
  s.actions[0].push_back(Action{ActionKind::kReduceGrad, 0, -1});
  const std::string own = schedule_to_pytorch_csv(s, CsvForm::kComputeComms);
  EXPECT_EQ(own.find("REDUCE_GRAD"), own.rfind("REDUCE_GRAD")) << own;
}

TEST(PytorchCsv, ComputeOnlyHoldsComputeAlone) {
  // PyTorch refuses any token but F, I, W, B and OVERLAP_F_B in compute_only ("Expected
  // compute-only schedule but found communication action") and inserts REDUCE_GRAD,
  // UNSHARD/RESHARD and SEND/RECV itself: a schedule carrying them writes the same compute_only
  // CSV as one without.
  const Schedule plain = testing::hand_1f1b(1, 2);
  Schedule s = plain;
  s.actions[0].insert(s.actions[0].begin(), Action{ActionKind::kUnshard, 0, -1});
  s.actions[0].push_back(Action{ActionKind::kReduceGrad, 0, -1});
  s.actions[0].push_back(Action{ActionKind::kReshard, 0, -1});
  EXPECT_EQ(schedule_to_pytorch_csv(s, CsvForm::kComputeOnly),
            schedule_to_pytorch_csv(plain, CsvForm::kComputeOnly));
  EXPECT_EQ(schedule_to_pytorch_csv(s, CsvForm::kComputeOnly), "0F0,0B0,0F1,0B1\n");
}

TEST(PytorchCsv, InfersLoopStageMap) {
  // 4 stages on 2 ranks, stage s on rank s mod 2 (rank 1 holds stages 1 and 3).
  Schedule s = schedule_from_pytorch_csv("0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n", "t");
  EXPECT_EQ(s.placement.kind, PlacementKind::kLoop);
  EXPECT_EQ(s.placement.stages[3].device, 1);
  EXPECT_EQ(s.num_microbatches, 1);
}

TEST(PytorchCsv, VMapPlacesStageTwoPMinusOneOnRankZero) {
  // p=2, V: stages 0,1 on ranks 0,1 and stages 2,3 on ranks 1,0.
  Schedule s = schedule_from_pytorch_csv("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n", "t");
  EXPECT_EQ(s.placement.kind, PlacementKind::kV);
  EXPECT_EQ(s.placement.stages[3].device, 0);
}

TEST(PytorchCsv, OverlapTokenRoundTrips) {
  Schedule s = schedule_from_pytorch_csv("0F0,1F0,(0F1;1B0)OVERLAP_F_B,0B0,1F1,1B1,0B1\n", "t");
  ASSERT_EQ(s.actions[0].size(), 7u);
  EXPECT_EQ(s.actions[0][2], (Action{ActionKind::kOverlapFB, 0, 1, 1, 0}));
  // compute_comms gives each stage its REDUCE_GRAD after its last backward (stage 1's second
  // full backward is 1B1, stage 0's is 0B1).
  EXPECT_EQ(schedule_to_pytorch_csv(s, CsvForm::kComputeComms),
            "0F0,1F0,(0F1;1B0)OVERLAP_F_B,0B0,1F1,1B1,1REDUCE_GRAD,0B1,0REDUCE_GRAD\n");
}

TEST(PytorchCsv, UnknownTokenNamesFileLineAndCell) {
  const std::string e = error_of("0F0,0B0\n1F0,1X0,1B0\n");
  EXPECT_NE(e.find("s.csv: line 2, cell 2: unknown action '1X0'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(PytorchCsv, ImpossibleOrderNamesLineAndCell) {
  // Rank 1 runs its backward before its forward.
  const std::string e = error_of("0F0,,,0B0\n,1B0,1F0\n");
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2, cell 2"), std::string::npos) << e;
}

TEST(PytorchCsv, StageOnTwoRanksIsAnError) {
  const std::string e = error_of("0F0,0B0\n0F1,0B1\n");
  EXPECT_NE(e.find("line 2, cell 1: stage 0 appears on rank 0 and rank 1"), std::string::npos) << e;
}

TEST(PytorchCsv, ExportLeavesOutRecomputeAndOptimizerStep) {
  // PyTorch recomputes by activation checkpointing inside the module and steps the optimizer
  // after the schedule: a schedule with R before its backward and a final OPT writes the same
  // CSV as the schedule without them, in both forms.
  const Schedule plain = testing::hand_1f1b(1, 1);
  Schedule s = plain;
  s.actions[0].insert(s.actions[0].begin() + 1, Action{ActionKind::kR, 0, 0});
  s.actions[0].push_back(Action{ActionKind::kOptStep, -1, -1});
  for (CsvForm form : {CsvForm::kComputeOnly, CsvForm::kComputeComms})
    EXPECT_EQ(schedule_to_pytorch_csv(s, form), schedule_to_pytorch_csv(plain, form));
  EXPECT_EQ(schedule_to_pytorch_csv(s, CsvForm::kComputeOnly), "0F0,0B0\n");
}

TEST(PytorchCsv, ExportRejectsPairReduce) {
  Schedule s = testing::hand_1f1b(1, 1);
  s.actions[0].push_back(Action{ActionKind::kPairReduce, 0, -1});
  EXPECT_THROW(schedule_to_pytorch_csv(s, CsvForm::kComputeOnly), ConfigError);
}

}  // namespace
}  // namespace pw
