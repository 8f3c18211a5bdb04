// The shared simulator input of a plan (sim/plan_prediction.h) and the per-action intervals
// simulate_iteration reports for a schedule.
#include "sim/plan_prediction.h"

#include <gtest/gtest.h>

#include "core/lowering.h"
#include "sim_test_util.h"

namespace pw {
namespace {

TEST(PlanPrediction, InputMatchesTheScenarioLoaderForTheSameConfiguration) {
  // megatron/weak-scaling-76.1b (t8 p4 d32 on 128 DGX A100 nodes): the shared
  // input has the scenario's node count, GPUs per node and configuration, and simulates to the
  // same iteration as the scenario mode.
  const hw::Scenario s =
      hw::load_scenario(testing::scenario_path("megatron/weak-scaling-76.1b.yaml"));
  const IterationInput want = testing::input_for(s);
  const IterationInput got = plan_iteration_input(s.model, s.parallel, s.profile, want.schedule);
  EXPECT_EQ(got.model, want.model);
  EXPECT_EQ(got.parallel, want.parallel);
  EXPECT_EQ(got.topology.nodes, want.topology.nodes);
  EXPECT_EQ(got.topology.node.gpus_per_node, want.topology.node.gpus_per_node);
  EXPECT_EQ(simulate_iteration(got).iteration, simulate_iteration(want).iteration);
}

TEST(PlanPrediction, SmallConfigurationsUsePartOfANodeAndNoSequenceParallelWithoutTp) {
  const hw::Scenario s =
      hw::load_scenario(testing::scenario_path("megatron/weak-scaling-1.7b.yaml"));
  ParallelConfig c = s.parallel;
  c.tensor_parallel = 1;
  c.pipeline_parallel = 1;
  c.data_parallel = 2;
  c.sequence_parallel = true;
  ModelShape m = s.model;
  m.ffn_hidden_size = 0;
  const IterationInput in = plan_iteration_input(m, c, s.profile, Schedule{});
  EXPECT_EQ(in.topology.nodes, 1);
  EXPECT_EQ(in.topology.node.gpus_per_node, 2);  // 2 GPUs of an 8-GPU node
  EXPECT_FALSE(in.parallel.sequence_parallel);
  EXPECT_EQ(in.model.ffn_hidden_size, 4 * m.hidden_size);
  c.data_parallel = 20;  // 20 GPUs: ceil(20 / 8) = 3 whole nodes
  const IterationInput big = plan_iteration_input(m, c, s.profile, Schedule{});
  EXPECT_EQ(big.topology.nodes, 3);
  EXPECT_EQ(big.topology.node.gpus_per_node, 8);
}

TEST(PlanPrediction, ActionTimingsCoverEveryActionAndAgreeWithThemselves) {
  hw::Scenario s = hw::load_scenario(testing::scenario_path("megatron/weak-scaling-76.1b.yaml"));
  IterationInput in = testing::input_for(s);
  in.schedule = lower_communication(in.schedule);
  std::vector<ActionTiming> a, b;
  const IterationResult r = simulate_iteration(in, IterationOptions{}, &a);
  EXPECT_EQ(simulate_iteration(in, IterationOptions{}).iteration, r.iteration);  // same engine
  ASSERT_EQ(a.size(), in.schedule.total_actions());
  std::size_t k = 0;
  for (int d = 0; d < in.schedule.placement.num_devices; ++d)
    for (std::size_t i = 0; i < in.schedule.actions[d].size(); ++i, ++k) {
      EXPECT_EQ(a[k].device, d);
      EXPECT_EQ(a[k].index, static_cast<std::int32_t>(i));
      EXPECT_LE(a[k].start, a[k].end);
      EXPECT_LE(a[k].end, r.iteration);  // the optimizer step ends the iteration
    }
  // Every SEND lasts its transfer (> 0 on a real network). A RECV lasts from where its device
  // left off (the previous action's end at the latest, the step's start for a first action) to
  // the data's arrival, as the executor measures it: device 1's first action receives
  // microbatch 0's activation, so it starts at 0 and ends after device 0's first forward has
  // ended and the activation has crossed the network.
  TimePs waited = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const ActionTiming& t = a[i];
    const ActionKind kind = in.schedule.actions[t.device][t.index].kind;
    if (kind == ActionKind::kSendF || kind == ActionKind::kSendB) {
      EXPECT_GT(t.end, t.start);
    }
    if (kind == ActionKind::kRecvF || kind == ActionKind::kRecvB) {
      EXPECT_LE(t.start, t.end);
      if (t.index > 0) {
        EXPECT_LE(t.start, a[i - 1].end);
      }
      waited += t.end - t.start;
    }
  }
  EXPECT_GT(waited, 0);
  const std::size_t dev1 = in.schedule.actions[0].size();
  ASSERT_EQ(in.schedule.actions[1][0].kind, ActionKind::kRecvF);
  ASSERT_EQ(in.schedule.actions[0][0].kind, ActionKind::kF);
  EXPECT_EQ(a[dev1].start, 0);
  EXPECT_GT(a[dev1].end, a[0].end);
  simulate_iteration(in, IterationOptions{}, &b);
  TimingAgreement same = compare_timings(in.schedule, a, b);
  EXPECT_EQ(same.compared, a.size());
  EXPECT_EQ(same.exact, a.size());
  EXPECT_EQ(same.worst, 0);
  b[3].end += 7;
  b[5].start -= 2;
  same = compare_timings(in.schedule, a, b);
  EXPECT_EQ(same.exact, a.size() - 2);
  EXPECT_EQ(same.worst, 7);
}

}  // namespace
}  // namespace pw
