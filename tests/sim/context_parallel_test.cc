// Context parallelism as a ring in the DES (hw::cp_ring_exposed): each pass's attention runs in
// cp blocks and its cp - 1 ring steps each move the next block's keys and values under the
// block before, so what a step needs beyond its block shows as exposed CP time.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "hwmodels/collectives.h"
#include "hwmodels/rank_layout.h"
#include "hwmodels/topology.h"
#include "sim/iteration.h"
#include "sim_test_util.h"

namespace pw {
namespace {

// Two layers, h = 1024 in 8 heads of 128 (multi-head), sequence 2048, on two DGX H100 nodes at
// t = 8, cp = 2 (the CP pair is GPU 0 and GPU 8: one per node), p = 1, d = 1, 4 microbatches,
// fused attention. Per layer and ring step a rank sends its keys and values: 2 x (1024 / 8)
// columns x 1024 local tokens x 2 bytes = 512 KiB (the backward: twice that, with their
// gradients), over one NIC; one head's attention block of 1024 queries is far shorter, so every
// step shows: per pass max(0, ring - attention x (cp - 1) / cp), ring = the pass's messages
// (2 layers x 1 step) x the send/recv time.
hw::Scenario short_context(const std::string& form = "p2p", int heads = 8) {
  return hw::parse_scenario(fmt::format(R"(
model: {{num_layers: 2, hidden_size: 1024, num_attention_heads: {}, seq_length: 2048,
        vocab_size: 32000, use_flash_attn: true}}
cluster: {{profile: dgx-h100, nodes: 2}}
parallel: {{tensor_model_parallel_size: 8, context_parallel_size: 2, micro_batch_size: 1,
           global_batch_size: 4, cp_comm_type: {}}}
)",
                                        heads, form),
                            "cp.yaml", ".");
}

TEST(ContextParallel, RingStepsShowWhereTheyOutlastTheirAttentionBlocks) {
  const hw::Scenario s = short_context();
  ASSERT_EQ(s.parallel.data_parallel, 1);
  IterationOptions opt;
  opt.flash_attention = true;
  // Compute at full speed beside the steps (the default slows it by 5% while SM-using
  // communication runs, which lengthens each block and hides a little more of its step).
  opt.comm_compute_slowdown = 0;
  const IterationResult r = simulate_iteration(testing::input_for(s), opt);

  const hw::Topology topo(s.topology);
  const hw::GroupNetwork net = hw::describe_group(topo, s.profile, {0, 8});
  ASSERT_EQ(net.nodes, 2);
  const double kv = 2.0 * (1024 / 8) * 1024 * 2;  // bytes per layer and step
  auto send = [&](double bytes) {
    return hw::collective_time(hw::CollectiveKind::kSendRecv, hw::CollectiveAlgo::kAuto,
                               Bytes{bytes}, net);
  };
  const hw::StageCosts c =
      hw::stage_costs(s.model, hw::GpuModel(s.profile.gpu), hw::workload_options(s.parallel, true),
                      0, 2, true, true);
  const TimePs ring_f = 2 * send(kv), ring_b = 2 * send(2 * kv);
  ASSERT_GT(ring_f, c.attn_f / 2);  // the forward's steps outlast their blocks
  const TimePs per_microbatch =
      hw::cp_ring_exposed(c.attn_f, ring_f, 2) + hw::cp_ring_exposed(c.attn_b, ring_b, 2);
  EXPECT_NEAR(static_cast<double>(r.exposed[static_cast<int>(CommKind::kCp)]),
              4.0 * static_cast<double>(per_microbatch), 4.0 * 2)
      << "ring_f " << ring_f << " attn_f " << c.attn_f;

  // Full recomputation re-runs the forward inside each backward, with its own ring: one more
  // forward's exposure per microbatch.
  hw::Scenario rc = s;
  rc.parallel.recompute = "full";
  const IterationResult f = simulate_iteration(testing::input_for(rc), opt);
  EXPECT_NEAR(static_cast<double>(f.exposed[static_cast<int>(CommKind::kCp)]),
              4.0 * static_cast<double>(per_microbatch + hw::cp_ring_exposed(c.attn_f, ring_f, 2)),
              4.0 * 3);

  // Every GPU simulated: the same exposure (each CP pair's steps run on their own NICs).
  IterationOptions all = opt;
  all.representative = false;
  const IterationResult a = simulate_iteration(testing::input_for(s), all);
  EXPECT_EQ(a.simulated_gpus, 16);
  EXPECT_NEAR(static_cast<double>(a.exposed[static_cast<int>(CommKind::kCp)]),
              static_cast<double>(r.exposed[static_cast<int>(CommKind::kCp)]), 8.0);
  EXPECT_EQ(a.iteration, r.iteration);
}

// Megatron's other forms are waited for whole (nothing overlaps them): all_gather gathers the
// keys and values before attention, 2 x 128 columns x 1024 tokens x 2 bytes from each of the
// 2 ranks (1 MiB gathered), again in the backward with a reduce-scatter of their gradients;
// a2a (Ulysses) sends each rank's q, k and v (3 x 128 columns) and its output (128 columns)
// for 1024 tokens, in F and again in B (16 heads of 64 here: Ulysses splits each TP rank's 2
// heads over the CP pair; with 8 heads, 1 per rank, the scenario is refused). Per microbatch,
// 2 layers of each.
TEST(ContextParallel, AllGatherAndUlyssesFormsAreWaitedFor) {
  IterationOptions opt;
  opt.flash_attention = true;
  opt.comm_compute_slowdown = 0;
  const hw::Scenario s = short_context("all_gather");
  const hw::Topology topo(s.topology);
  const hw::GroupNetwork net = hw::describe_group(topo, s.profile, {0, 8});
  auto time = [&](hw::CollectiveKind k, double bytes) {
    return static_cast<double>(
        hw::collective_time(k, hw::CollectiveAlgo::kAuto, Bytes{bytes}, net));
  };
  using K = hw::CollectiveKind;
  const double gathered = 2.0 * 128 * 1024 * 2 * 2;
  const double ag = 2 * (2 * time(K::kAllGather, gathered) + time(K::kReduceScatter, gathered));
  const IterationResult g = simulate_iteration(testing::input_for(s), opt);
  EXPECT_NEAR(static_cast<double>(g.exposed[static_cast<int>(CommKind::kCp)]), 4 * ag, 16.0);

  try {
    short_context("a2a");
    ADD_FAILURE() << "a2a with 1 head per TP rank accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.cp_comm_type"), std::string::npos) << e.what();
  }
  const hw::Scenario u = short_context("a2a", 16);
  const double a2a =
      2 * 2 * (time(K::kAllToAll, 3 * 128 * 1024 * 2.0) + time(K::kAllToAll, 128 * 1024 * 2.0));
  const IterationResult a = simulate_iteration(testing::input_for(u), opt);
  EXPECT_NEAR(static_cast<double>(a.exposed[static_cast<int>(CommKind::kCp)]), 4 * a2a, 16.0);
}

// The formula: nothing shows while the steps fit under (cp - 1)/cp of the attention, then each
// picosecond beyond shows; cp = 1 has no ring.
TEST(ContextParallel, RingExposureFormula) {
  EXPECT_EQ(hw::cp_ring_exposed<TimePs>(900, 600, 4), 0);     // 600 <= 900 x 3/4 = 675
  EXPECT_EQ(hw::cp_ring_exposed<TimePs>(900, 700, 4), 25);    // 700 - 675
  EXPECT_EQ(hw::cp_ring_exposed<TimePs>(1000, 700, 2), 200);  // 700 - 500
  EXPECT_EQ(hw::cp_ring_exposed<TimePs>(1000, 700, 1), 0);
  EXPECT_DOUBLE_EQ(hw::cp_ring_exposed(1.0, 0.75, 2), 0.25);
}

}  // namespace
}  // namespace pw
