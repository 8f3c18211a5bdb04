// Transformer Engine's delayed scaling in the DES: each model chunk's forward ends with the
// all-reduce of its FP8 tensors' amaxes over the stage's tensor-, data- and context-parallel
// ranks (the exit of Megatron's fp8_autocast around the block), its backward likewise, and the
// compute stream waits for both. Current scaling (tensorwise) has neither.
#include <gtest/gtest.h>

#include "hwmodels/collectives.h"
#include "hwmodels/rank_layout.h"
#include "hwmodels/topology.h"
#include "sim/iteration.h"
#include "sim_test_util.h"
#include "tests/hwmodels/test_util.h"

namespace pw {
namespace {

// Two layers (h = 1024) on two DGX H100 nodes at t = 1, p = 1, d = 16: the amax group is all 16
// GPUs, eight per node. Global batch 32: m = 32 / 16 = 2 microbatches per rank.
TEST(Fp8Amax, DelayedScalingWaitsForTwoAllReducesPerMicrobatch) {
  const hw::Scenario delayed = hw::testing::fp8_scenario("delayed");
  const hw::Scenario current = hw::testing::fp8_scenario("tensorwise");
  ASSERT_EQ(delayed.parallel.data_parallel, 16);
  ASSERT_EQ(delayed.num_microbatches(), 2);
  IterationOptions opt;
  opt.flash_attention = true;
  opt.comm_compute_slowdown = 0;
  const IterationResult d = simulate_iteration(testing::input_for(delayed), opt);
  const IterationResult c = simulate_iteration(testing::input_for(current), opt);

  // Per microbatch one forward and one backward, each ending with an all-reduce over the 16
  // GPUs of 2 layers x 4 FP8 GEMMs x 3 (F) or 2 (B) float32 amaxes: 96 and 64 bytes. Nothing
  // else runs meanwhile (the gradient reduction waits for the last backward), so the step
  // lengthens by their sum, and they count as data-parallel communication.
  const hw::Topology topo(delayed.topology);
  const hw::RankLayout lay = hw::rank_layout_of(delayed.parallel, 8);
  const hw::GroupNetwork net = hw::describe_group(topo, delayed.profile, lay.stage_group(0));
  ASSERT_EQ(net.n, 16);
  ASSERT_EQ(net.nodes, 2);
  auto all_reduce = [&](double bytes) {
    return hw::collective_time(hw::CollectiveKind::kAllReduce, hw::CollectiveAlgo::kAuto,
                               Bytes{bytes}, net);
  };
  const TimePs added = 2 * (all_reduce(96) + all_reduce(64));
  ASSERT_GT(added, 0);
  EXPECT_NEAR(static_cast<double>(d.iteration - c.iteration), static_cast<double>(added), 8.0)
      << "added " << added;
  const int dp = static_cast<int>(CommKind::kDp);
  EXPECT_NEAR(static_cast<double>(d.exposed[dp] - c.exposed[dp]), static_cast<double>(added), 8.0);

  // Every GPU simulated: the same step (the 16 ranks meet at each all-reduce).
  IterationOptions all = opt;
  all.representative = false;
  const IterationResult a = simulate_iteration(testing::input_for(delayed), all);
  EXPECT_EQ(a.simulated_gpus, 16);
  EXPECT_NEAR(static_cast<double>(a.iteration), static_cast<double>(d.iteration), 8.0);
}

}  // namespace
}  // namespace pw
