#include "sim/iteration.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/trace.h"
#include "hwmodels/collectives.h"
#include "hwmodels/memory.h"
#include "hwmodels/profile.h"
#include "hwmodels/rank_layout.h"
#include "hwmodels/scenario.h"
#include "hwmodels/topology.h"
#include "sim/engine.h"
#include "sim_test_util.h"

namespace pw {
namespace {

using testing::small_scenario;

TEST(Iteration, RepresentativeRanksGiveTheSameTimesAsEveryRank) {
  // 2 DGX nodes, t=2, p=2, d=4: every TP and DP translation maps the cluster onto itself (one
  // NIC per GPU, one leaf per rail), so one GPU per pipeline rank stands for all 16.
  // With overlap_param_gather too, not aligned (1F1B) and aligned (interleaved).
  for (const char* extra :
       {"", "  zero_stage: 1", "  recompute_granularity: full",
        "  zero_stage: 1\n  overlap_grad_reduce: true\n  overlap_param_gather: true",
        "  zero_stage: 1\n  overlap_grad_reduce: true\n  overlap_param_gather: true\n"
        "  num_layers_per_virtual_pipeline_stage: 2"}) {
    const hw::Scenario s = small_scenario(2, 2, 2, 16, extra);
    const IterationInput in = testing::input_for(s);
    IterationOptions rep, full;
    full.representative = false;
    const IterationResult a = simulate_iteration(in, rep);
    const IterationResult b = simulate_iteration(in, full);
    EXPECT_EQ(a.simulated_gpus, 2);
    EXPECT_EQ(b.simulated_gpus, 16);
    // Same answer up to float rounding of the shared-rate arithmetic (a few picoseconds).
    EXPECT_NEAR(static_cast<double>(a.iteration), static_cast<double>(b.iteration), 1000.0)
        << extra;
    for (int k = 0; k < kNumCommKinds; ++k)
      EXPECT_NEAR(static_cast<double>(a.exposed[k]), static_cast<double>(b.exposed[k]), 1000.0)
          << extra << " kind " << k;
    EXPECT_DOUBLE_EQ(a.memory[0].peak, b.memory[0].peak);
  }
}

// An all-ranks run without a trace renumbers its tasks for locality (TaskGraph::finalize); with
// a trace it keeps them as added. Both must give exactly the same run: the same times to the
// picosecond, the same exposed communication, memory and event count (the start-up order and
// every stream, successor and participant order are the insertion ones either way).
TEST(Iteration, RenumberedAllRanksRunEqualsTheRunInInsertionOrder) {
  for (const char* extra : {"", "  zero_stage: 1\n  num_layers_per_virtual_pipeline_stage: 2",
                            "  recompute_granularity: full\n  overlap_grad_reduce: true"}) {
    const hw::Scenario s = small_scenario(2, 4, 2, 16, extra);
    const IterationInput in = testing::input_for(s);
    IterationOptions renumbered, as_added;
    renumbered.representative = as_added.representative = false;
    as_added.trace = true;  // keeps labels, so the ids stay as added
    const IterationResult a = simulate_iteration(in, renumbered);
    const IterationResult b = simulate_iteration(in, as_added);
    EXPECT_EQ(a.simulated_gpus, 16);
    EXPECT_EQ(a.iteration, b.iteration) << extra;
    EXPECT_EQ(a.events, b.events) << extra;
    for (int k = 0; k < kNumCommKinds; ++k) EXPECT_EQ(a.exposed[k], b.exposed[k]) << extra;
    ASSERT_EQ(a.memory.size(), b.memory.size());
    for (std::size_t d = 0; d < a.memory.size(); ++d)
      EXPECT_EQ(a.memory[d].peak, b.memory[d].peak) << extra;
  }
}

// The same symmetry with context and expert parallelism: a small GQA + SwiGLU MoE model on two
// DGX H100 nodes, t=2 cp=2 p=2 d=2 ep=4 (the EP group spans both nodes), FP8.
TEST(Iteration, RepresentativeRanksHoldWithContextAndExpertParallelism) {
  const hw::Scenario s = hw::parse_scenario(
      "model: {num_layers: 4, hidden_size: 512, num_attention_heads: 8, num_query_groups: 2,\n"
      "        swiglu: true, normalization: RMSNorm, num_experts: 8, moe_router_topk: 2,\n"
      "        moe_ffn_hidden_size: 512, seq_length: 2048, vocab_size: 32000,\n"
      "        use_flash_attn: true}\n"
      "cluster: {profile: dgx-h100, nodes: 2}\n"
      "parallel: {tensor_model_parallel_size: 2, context_parallel_size: 2,\n"
      "           pipeline_model_parallel_size: 2, expert_model_parallel_size: 4,\n"
      "           sequence_parallel: true, micro_batch_size: 1, global_batch_size: 8,\n"
      "           fp8: hybrid}\n",
      "moe.yaml", "");
  ASSERT_EQ(s.parallel.data_parallel, 2);
  const IterationInput in = testing::input_for(s);
  IterationOptions rep, full;
  rep.flash_attention = full.flash_attention = true;
  full.representative = false;
  const IterationResult a = simulate_iteration(in, rep);
  const IterationResult b = simulate_iteration(in, full);
  EXPECT_EQ(b.simulated_gpus, 16);
  EXPECT_NEAR(static_cast<double>(a.iteration), static_cast<double>(b.iteration), 1000.0);
  EXPECT_GT(a.exposed[static_cast<int>(CommKind::kEp)], 0);
  for (int k = 0; k < kNumCommKinds; ++k)
    EXPECT_NEAR(static_cast<double>(a.exposed[k]), static_cast<double>(b.exposed[k]), 1000.0)
        << "kind " << k;
  EXPECT_DOUBLE_EQ(a.memory[0].peak, b.memory[0].peak);
}

// And with expert gradients and weights on expert-DP groups of more than one rank: t = 2, p = 2,
// d = 4, ep = 2 with expert TP 1 (expert-DP 2 x 4 / 2 = 4, every other rank of a stage, across
// both nodes), under ZeRO-1 with the parameter gather overlapped and under ZeRO-3 by layer.
TEST(Iteration, RepresentativeRanksHoldWithExpertDataParallelGroups) {
  for (const char* zero : {"zero_stage: 1, overlap_param_gather: true, overlap_grad_reduce: true",
                           "zero_stage: 3, zero3_gather: layer"}) {
    const hw::Scenario s = hw::parse_scenario(
        fmt::format(
            "model: {{num_layers: 4, hidden_size: 512, num_attention_heads: 8, swiglu: true,\n"
            "        normalization: RMSNorm, num_experts: 8, moe_router_topk: 2,\n"
            "        moe_ffn_hidden_size: 512, seq_length: 2048, vocab_size: 32000}}\n"
            "cluster: {{profile: dgx-h100, nodes: 2}}\n"
            "parallel: {{tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2,\n"
            "           expert_model_parallel_size: 2, expert_tensor_parallel_size: 1,\n"
            "           sequence_parallel: true, micro_batch_size: 1, global_batch_size: 16,\n"
            "           {}}}\n",
            zero),
        "moe.yaml", "");
    ASSERT_EQ(hw::rank_layout_of(s.parallel, 8).expert_dp(), 4);
    const IterationInput in = testing::input_for(s);
    IterationOptions rep, full;
    full.representative = false;
    const IterationResult a = simulate_iteration(in, rep);
    const IterationResult b = simulate_iteration(in, full);
    EXPECT_EQ(b.simulated_gpus, 16);
    EXPECT_NEAR(static_cast<double>(a.iteration), static_cast<double>(b.iteration), 1000.0) << zero;
    for (int k = 0; k < kNumCommKinds; ++k)
      EXPECT_NEAR(static_cast<double>(a.exposed[k]), static_cast<double>(b.exposed[k]), 1000.0)
          << zero << " kind " << k;
  }
}

// Slow GPUs (cluster.slow_gpus / slow_nodes). With free communication every task's time is its
// GPU's compute, so: every GPU twice as slow doubles the iteration (to the picosecond rounding of
// each pass); one GPU 1.5x slower in a data-parallel-only job (t = p = 1, d = 8, all GPUs waiting
// for each other at the gradient reduction) makes the iteration 1.5x and names that GPU as the
// busiest; a factor turns on every-GPU simulation even in representative mode.
TEST(Iteration, SlowGpusStretchTheirComputeAndBoundTheIteration) {
  IterationOptions free;
  free.free_communication = true;
  const hw::Scenario base = small_scenario(2, 2, 1, 8);
  const IterationResult b = simulate_iteration(testing::input_for(base), free);
  const hw::Scenario all_slow = hw::parse_scenario(R"(
model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 16, seq_length: 1024,
        vocab_size: 51200}
cluster: {profile: dgx-a100-80gb, nodes: 1, slow_nodes: {0: 2.0}}
parallel: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2, micro_batch_size: 1,
           global_batch_size: 8}
)",
                                                   "slow.yaml", ".");
  ASSERT_EQ(all_slow.topology.gpu_slowdown.size(), 8u);
  const IterationResult s2 = simulate_iteration(testing::input_for(all_slow), free);
  EXPECT_EQ(s2.simulated_gpus, 8);
  EXPECT_NEAR(static_cast<double>(s2.iteration), 2.0 * static_cast<double>(b.iteration), 1e4);

  const hw::Scenario dp = hw::parse_scenario(R"(
model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 16, seq_length: 1024,
        vocab_size: 51200}
cluster: {profile: dgx-a100-80gb, nodes: 1, slow_gpus: {5: 1.5}}
parallel: {tensor_model_parallel_size: 1, pipeline_model_parallel_size: 1, micro_batch_size: 1,
           global_batch_size: 16}
)",
                                             "dp.yaml", ".");
  hw::Scenario even = dp;
  even.topology.gpu_slowdown.clear();
  const IterationResult e = simulate_iteration(testing::input_for(even), free);
  const IterationResult r = simulate_iteration(testing::input_for(dp), free);
  EXPECT_EQ(r.simulated_gpus, 8);
  EXPECT_NEAR(static_cast<double>(r.iteration), 1.5 * static_cast<double>(e.iteration), 1e4);
  EXPECT_EQ(r.busiest_gpu, 5);
  EXPECT_EQ(r.busiest_dp, 5);
}

// A 2-node job at t = 8, p = 1 (d = 2: each DP pair {i, 8 + i} crosses the fabric on rail i),
// with `extra` appended to its cluster section.
hw::Scenario two_node_tp8_job(const std::string& extra) {
  return hw::parse_scenario(fmt::format(R"(
model: {{num_layers: 4, hidden_size: 2048, num_attention_heads: 16, seq_length: 1024,
        vocab_size: 51200}}
cluster: {{profile: dgx-a100-80gb, nodes: 2{}}}
parallel: {{tensor_model_parallel_size: 8, pipeline_model_parallel_size: 1, micro_batch_size: 1,
           global_batch_size: 4}}
)",
                                        extra),
                            "nic.yaml", ".");
}

// `changed` (two_node_tp8_job with a heterogeneity) against the job with `equivalent` in its
// cluster section, as a hand derivation says: the same iteration and exposed reduction averaged
// over the GPUs (0.5% allowed for hop latencies), the same compute, slower than the plain job.
void expect_same_job(const hw::Scenario& changed, const std::string& equivalent) {
  IterationOptions o;
  const IterationResult f = simulate_iteration(testing::input_for(changed), o);
  const IterationResult h = simulate_iteration(testing::input_for(two_node_tp8_job(equivalent)), o);
  const IterationResult base = simulate_iteration(testing::input_for(two_node_tp8_job("")), o);
  EXPECT_EQ(f.simulated_gpus, 16);
  EXPECT_GT(f.iteration, base.iteration);
  EXPECT_NEAR(static_cast<double>(f.iteration), static_cast<double>(h.iteration),
              0.005 * static_cast<double>(h.iteration));
  const int dp = static_cast<int>(CommKind::kDp);
  EXPECT_NEAR(static_cast<double>(f.exposed[dp]), static_cast<double>(h.exposed[dp]),
              0.005 * static_cast<double>(h.exposed[dp]));
  EXPECT_EQ(f.busiest_busy, base.busiest_busy);
}

// Each of `bad` in the cluster section is a one-line ConfigError naming `key`.
void expect_refused(const std::string& key, std::initializer_list<const char*> bad) {
  for (const char* b : bad) {
    try {
      two_node_tp8_job(std::string(", ") + b);
      ADD_FAILURE() << b;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

// Degraded NICs (cluster.degraded_nics: capacity divisor of a NIC's port). Every NIC of a 2-node
// data-parallel job at half rate is the same cluster as a profile whose NIC efficiency is half:
// both simulations agree (the first simulates every GPU, the second one per pipeline rank, which
// agree to float rounding, see RepresentativeRanksGiveTheSameTimesAsEveryRank). One NIC at a
// quarter rate slows the job's gradient reduction without touching compute.
TEST(Iteration, DegradedNicsSlowTheTrafficThatCrossesThem) {
  const auto load = two_node_tp8_job;
  const hw::Scenario even = load("");
  std::string all_half = ", degraded_nics: {";
  for (int k = 0; k < 16; ++k) all_half += fmt::format("{}{}: 2", k ? ", " : "", k);
  all_half += "}";
  const hw::Scenario degraded = load(all_half);
  ASSERT_FALSE(degraded.topology.symmetric());
  hw::Scenario halved = even;
  halved.topology.node.nic.efficiency /= 2;
  IterationOptions o;
  const IterationResult a = simulate_iteration(testing::input_for(degraded), o);
  const IterationResult b = simulate_iteration(testing::input_for(halved), o);
  const IterationResult base = simulate_iteration(testing::input_for(even), o);
  EXPECT_EQ(a.simulated_gpus, 16);
  EXPECT_NEAR(static_cast<double>(a.iteration), static_cast<double>(b.iteration), 1e4);
  EXPECT_GT(a.exposed[static_cast<int>(CommKind::kDp)],
            base.exposed[static_cast<int>(CommKind::kDp)]);
  const IterationResult one =
      simulate_iteration(testing::input_for(load(", degraded_nics: {9: 4}")), o);
  EXPECT_GT(one.iteration, base.iteration);
  EXPECT_EQ(one.busiest_busy, base.busiest_busy);  // compute untouched
}

// Failed NICs (cluster.failed_nics): a GPU whose NIC is down reaches the fabric over NVLink
// through the GPU that owns the next working NIC of its node (NCCL's PXN). In the 2-node
// data-parallel job above (t = 8, d = 2: each DP pair {i, 8 + i} crosses on rail i), NIC 0 of
// node 0 down puts the rings of rails 0 and 1 on NIC 1 of node 0, each at half its rate: by hand,
// the same as NICs 0 and 1 of node 0 at half rate (degraded_nics {0: 2, 1: 2}), up to the NVLink
// hop's latency on each of the reduction's steps (0.5% allowed), in the iteration and in the
// exposed reduction averaged over the GPUs (which one slowed ring, {0: 2}, would not match).
// Compute is untouched.
TEST(Iteration, FailedNicsRerouteThroughTheNextNicOfTheNode) {
  const auto load = two_node_tp8_job;
  const hw::Scenario failed = load(", failed_nics: [0]");
  ASSERT_FALSE(failed.topology.symmetric());
  EXPECT_TRUE(load(", failed_nics: []").topology.symmetric());  // none listed: none failed
  // The route of GPU 0 to its DP peer: NVLink to GPU 1 (GPU 0 -> GPU 1's links), then GPU 1's
  // NIC and port (the first two links of GPU 1 -> GPU 9).
  const hw::Topology topo(failed.topology), healthy(load("").topology);
  const std::vector<hw::LinkId> r0 = topo.route(0, 8), nv = healthy.route(0, 1),
                                r1 = healthy.route(1, 9);
  ASSERT_GE(r0.size(), 4u);
  EXPECT_EQ(r0[0], nv[0]);
  EXPECT_EQ(r0[1], nv[1]);
  EXPECT_EQ(r0[2], r1[0]);
  EXPECT_EQ(r0[3], r1[1]);
  EXPECT_EQ(topo.route(2, 10), healthy.route(2, 10));  // other rails unchanged
  expect_same_job(failed, ", degraded_nics: {0: 2, 1: 2}");
  expect_refused("cluster.failed_nics",
                 {"failed_nics: [16]", "failed_nics: [0, 1, 2, 3, 4, 5, 6, 7]",
                  "failed_nics: {0: 1}", "failed_nics: [a]"});
}

// Background flows (cluster.background_flows): another job's flow from GPU 0 to GPU 8 crosses
// NIC 0 of node 0 and NIC 0 of node 1, as the 2-node job's DP ring of rail 0 does (the job of
// the test above). Max-min fair sharing gives that ring's 0 -> 8 flow half of the ports, and a
// ring step lasts as long as its slowest flow, so by hand the job sees what NIC 0 at half rate
// (degraded_nics {0: 2}) gives it: same iteration and exposed reduction (0.5% allowed), compute
// untouched, slower than alone.
TEST(Iteration, BackgroundFlowsTakeTheirFairShareOfTheLinksTheyCross) {
  const auto load = two_node_tp8_job;
  const hw::Scenario bg = load(", background_flows: [[0, 8]]");
  ASSERT_FALSE(bg.topology.symmetric());
  expect_same_job(bg, ", degraded_nics: {0: 2}");
  expect_refused(
      "cluster.background_flows",
      {"background_flows: [[0, 16]]", "background_flows: [[3, 3]]", "background_flows: [0, 8]",
       "background_flows: {0: 8}", "background_flows: [[0, a]]"});
}

// Failed spine links (cluster.failed_spine_links). With a fat tree of 8-port leaves each node of
// the 2-node job has its own leaf (2 leaves, 8 / oversubscription 1 = 8 spines), and routing is
// destination-mod-k: the DP ring of rail i (GPUs i and 8 + i) crosses spine i. The link between
// leaf 0 and spine 0 down, rail 0 takes the next spine both leaves reach, spine 1, and shares its
// links with rail 1: by hand both rings run at half a spine link's rate (which equals the NIC's:
// 200 Gb/s x 0.9 both), as they do with leaf 0's links to spines 0 and 1 at half rate
// (degraded_spine_links [[0, 0, 2], [0, 1, 2]]): same iteration and exposed reduction, compute
// untouched. The tier that bounds it is leaf-spine, at spine 1: its link carries both rings, at
// half rate each, so it is saturated twice as long as a healthy rail's NIC port (one ring at full
// rate) and carries exactly twice its bytes.
TEST(Iteration, FailedSpineLinksRerouteToTheNextSpineBothLeavesReach) {
  const std::string tree = ", fabric: fat-tree, leaf_ports: 8";
  const hw::Scenario failed = two_node_tp8_job(tree + ", failed_spine_links: [[0, 0]]");
  ASSERT_FALSE(failed.topology.symmetric());
  const hw::Topology topo(failed.topology), healthy(two_node_tp8_job(tree).topology);
  auto names = [](const hw::Topology& t, int src, int dst) {
    std::vector<std::string> out;
    for (const hw::LinkId l : t.route(src, dst))
      if (t.link_role(l) == hw::LinkRole::kLeafToSpine) out.push_back(t.link_name(l));
    return out;
  };
  EXPECT_EQ(names(healthy, 0, 8), (std::vector<std::string>{"leaf0 -> spine0", "spine0 -> leaf1"}));
  EXPECT_EQ(names(topo, 0, 8), (std::vector<std::string>{"leaf0 -> spine1", "spine1 -> leaf1"}));
  EXPECT_EQ(names(topo, 9, 1), (std::vector<std::string>{"leaf1 -> spine1", "spine1 -> leaf0"}));
  EXPECT_EQ(topo.route(2, 10), healthy.route(2, 10));  // other rails unchanged
  expect_same_job(failed, tree + ", degraded_spine_links: [[0, 0, 2], [0, 1, 2]]");
  const IterationResult f = simulate_iteration(testing::input_for(failed), IterationOptions{});
  ASSERT_GE(f.busiest_links.size(), 2u);
  const LinkLoad &spine = f.busiest_links[0], &port = f.busiest_links[1];
  EXPECT_EQ(spine.name, "leaf0 -> spine1");
  EXPECT_EQ(spine.role, "leaf-spine");
  EXPECT_EQ(port.role, "NIC-leaf");
  EXPECT_NEAR(static_cast<double>(spine.saturated), 2.0 * static_cast<double>(port.saturated),
              0.01 * static_cast<double>(spine.saturated));
  EXPECT_DOUBLE_EQ(spine.bytes, 2 * port.bytes);
  expect_refused("cluster.failed_spine_links",
                 {"fabric: fat-tree, failed_spine_links: [[0, 0]]",  // 20-port leaf: no spine
                  "fabric: fat-tree, leaf_ports: 8, failed_spine_links: [[2, 0]]",
                  "fabric: fat-tree, leaf_ports: 8, failed_spine_links: [[0, 8]]",
                  "fabric: fat-tree, leaf_ports: 8, failed_spine_links: [0, 1]",
                  "fabric: fat-tree, leaf_ports: 8, failed_spine_links: [[0, 0], [0, 1], [0, 2], "
                  "[0, 3], [1, 4], [1, 5], [1, 6], [1, 7]]"});
  expect_refused("cluster.failed_spine_links",
                 {"fabric: fat-tree, leaf_ports: 8, failed_spine_links: [[0, 1], [0, 1]]",
                  "fabric: fat-tree, leaf_ports: 8, degraded_spine_links: [[0, 1, 2]], "
                  "failed_spine_links: [[0, 1]]"});
  expect_refused("cluster.degraded_spine_links",
                 {"fabric: fat-tree, leaf_ports: 8, degraded_spine_links: [[0, 0, 2], [0, 0, 2]]",
                  "fabric: fat-tree, leaf_ports: 8, degraded_spine_links: [[0, 0, 0.5]]",
                  "fabric: fat-tree, leaf_ports: 8, degraded_spine_links: [[0, 0]]"});
}

TEST(Iteration, SlowGpuEntriesAreCheckedNamingTheKey) {
  auto load = [](const std::string& cluster_extra) {
    return hw::parse_scenario(fmt::format(R"(
model: {{num_layers: 4, hidden_size: 1024, num_attention_heads: 16, seq_length: 1024,
        vocab_size: 51200}}
cluster: {{profile: dgx-a100-80gb, nodes: 1, {}}}
parallel: {{tensor_model_parallel_size: 1, pipeline_model_parallel_size: 1, micro_batch_size: 1,
           global_batch_size: 16}}
)",
                                          cluster_extra),
                              "bad.yaml", ".");
  };
  for (const char* bad : {"slow_gpus: {8: 1.5}", "slow_gpus: {0: 0.5}", "slow_nodes: [1, 2]",
                          "slow_gpus: {a: 2}", "slow_nodes: {1: 2}", "degraded_nics: {8: 2}"}) {
    try {
      load(bad);
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_TRUE(std::string(e.what()).find("cluster.slow_") != std::string::npos ||
                  std::string(e.what()).find("cluster.degraded_nics") != std::string::npos)
          << bad << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
  EXPECT_DOUBLE_EQ(load("slow_gpus: {3: 1.5}, slow_nodes: {0: 2}").topology.gpu_slowdown[3], 3.0);
}

TEST(Iteration, SameScenarioGivesAByteIdenticalTrace) {
  const IterationInput in = testing::input_for(small_scenario(2, 2, 1, 8));
  IterationOptions opt;
  opt.trace = true;
  const std::string a = trace_to_json(simulate_iteration(in, opt).trace);
  const std::string b = trace_to_json(simulate_iteration(in, opt).trace);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("\"displayTimeUnit\""), std::string::npos);
  EXPECT_NE(a.find("\"ph\":\"s\""), std::string::npos);  // send -> receive arrows
  EXPECT_NE(a.find("\"ph\":\"f\""), std::string::npos);
  EXPECT_NE(a.find("\"ph\":\"C\""), std::string::npos);  // memory counters
  EXPECT_NE(a.find("thread_name"), std::string::npos);
}

TEST(Iteration, ATraceOrTimingsChangeOnlyWhatIsKeptNotTheRun) {
  // Labels, trace arrows and the action -> task map are kept only for a trace or per-action
  // timings; the simulated run is the same with or without them.
  const IterationInput in = testing::input_for(small_scenario(2, 4, 2, 8));
  IterationOptions bare;
  bare.representative = false;
  IterationOptions traced = bare;
  traced.trace = true;
  const IterationResult a = simulate_iteration(in, bare);
  std::vector<ActionTiming> timings;
  const IterationResult b = simulate_iteration(in, traced, &timings);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.tasks, b.tasks);
  EXPECT_EQ(a.events, b.events);
  ASSERT_EQ(a.memory.size(), b.memory.size());
  for (std::size_t d = 0; d < a.memory.size(); ++d) EXPECT_EQ(a.memory[d].peak, b.memory[d].peak);
  for (int k = 0; k < kNumCommKinds; ++k) EXPECT_EQ(a.exposed[k], b.exposed[k]);
  EXPECT_TRUE(a.trace.slices.empty());
  // The trace names its slices from the labels ("F0", "B3", ...) and draws send arrows; every
  // action of the schedule has its timing.
  bool named = false, arrow = false;
  for (const TraceSlice& s : b.trace.slices) {
    named |= s.name == "F0";
    arrow |= s.flow_out >= 0;
  }
  EXPECT_TRUE(named);
  EXPECT_TRUE(arrow);
  std::size_t actions = 0;
  for (const auto& dev : in.schedule.actions) actions += dev.size();
  EXPECT_EQ(timings.size(), actions);
}

TEST(Iteration, ASelectionOfGpusKeepsTheirSlicesAndTheArrowsBetweenThem) {
  // p = 4 1F1B, one GPU per pipeline rank: pipeline ranks 0 and 2 kept. Every kept slice is
  // theirs (renumbered 0 and 1), every counter too, and no arrow survives: each transfer joins
  // neighbouring ranks, and 0 and 2 are not neighbours. Keeping 0 and 1 keeps exactly the
  // arrows between them.
  const IterationInput in = testing::input_for(small_scenario(1, 4, 1, 8));
  IterationOptions opt;
  opt.trace = true;
  const Trace all = simulate_iteration(in, opt).trace;
  ASSERT_EQ(all.process_names.size(), 4u);
  std::size_t on0 = 0, on2 = 0, arrows01 = 0;
  std::vector<int> flow_pid_out(all.slices.size() * 2, -1);
  for (const TraceSlice& s : all.slices) {
    on0 += s.pid == 0;
    on2 += s.pid == 2;
    if (s.flow_out >= 0) flow_pid_out[s.flow_out] = s.pid;
  }
  for (const TraceSlice& s : all.slices)
    if (s.flow_in >= 0) {
      const int from = flow_pid_out[s.flow_in];
      arrows01 += (from == 0 && s.pid == 1) || (from == 1 && s.pid == 0);
    }
  const Trace sel = select_processes(all, {0, 2});
  ASSERT_EQ(sel.process_names.size(), 2u);
  EXPECT_EQ(sel.process_names[1], all.process_names[2]);
  EXPECT_EQ(sel.slices.size(), on0 + on2);
  std::size_t counters = 0;
  for (const TraceCounter& c : all.counters) counters += c.pid == 0 || c.pid == 2;
  EXPECT_EQ(sel.counters.size(), counters);
  for (const TraceSlice& s : sel.slices) {
    EXPECT_TRUE(s.pid == 0 || s.pid == 1);
    EXPECT_EQ(s.flow_out, -1);
    EXPECT_EQ(s.flow_in, -1);
  }
  ASSERT_GT(arrows01, 0u);
  std::size_t kept = 0;
  for (const TraceSlice& s : select_processes(all, {0, 1}).slices) kept += s.flow_in >= 0;
  EXPECT_EQ(kept, arrows01);
}

TEST(Iteration, WithoutAPipelineIdleTimeIsExposedCommunicationNotBubble) {
  // t=8, p=1: a single stage never waits for another one, so every idle moment of its compute
  // stream is spent on (exposed) TP or DP communication: pipeline bubble 0, total idle > 0.
  const IterationResult r = simulate_iteration(testing::input_for(small_scenario(8, 1, 1, 8)));
  EXPECT_GT(r.bubble_rate, 0.01);
  EXPECT_GT(r.exposed[static_cast<int>(CommKind::kTp)], 0);
  EXPECT_EQ(r.pipeline_bubble_rate, 0.0);
}

TEST(Iteration, WithFreeCommunicationAllIdleTimeIsPipelineBubble) {
  // p=4 1F1B with communication taking no time: the only reason to idle is waiting for another
  // stage, so the pipeline bubble is the whole idle share (and positive: (p-1) slots of warm-up).
  IterationOptions opt;
  opt.free_communication = true;
  const IterationResult r = simulate_iteration(testing::input_for(small_scenario(1, 4, 1, 8)), opt);
  EXPECT_GT(r.pipeline_bubble_rate, 0.1);
  EXPECT_NEAR(r.pipeline_bubble_rate, r.bubble_rate, 1e-12);
}

// --- Memory: Korthikanti et al. activation formulas ------------------------------------------

struct KorthikantiCase {
  const char* file;
  double a, h, L, t, p, v, b, V;
  bool selective;
};

TEST(Iteration, KorthikantiActivationTotalsMatchTheFormulas) {
  const double s = 2048;
  const KorthikantiCase cases[] = {
      {"megatron/korthikanti-22b-full.yaml", 64, 6144, 48, 8, 1, 1, 4, 51200, false},
      {"megatron/korthikanti-22b-selective.yaml", 64, 6144, 48, 8, 1, 1, 4, 51200, true},
      {"megatron/korthikanti-175b-full.yaml", 96, 12288, 96, 8, 8, 3, 1, 51200, false},
      {"megatron/korthikanti-175b-selective.yaml", 96, 12288, 96, 8, 8, 3, 1, 51200, true},
      {"megatron/korthikanti-530b-full.yaml", 128, 20480, 105, 8, 35, 3, 1, 51200, false},
      {"megatron/korthikanti-530b-selective.yaml", 128, 20480, 105, 8, 35, 3, 1, 51200, true},
      {"megatron/korthikanti-1t-full.yaml", 160, 25600, 128, 8, 64, 1, 1, 51200, false},
      {"megatron/korthikanti-1t-selective.yaml", 160, 25600, 128, 8, 64, 1, 1, 51200, true},
  };
  for (const KorthikantiCase& c : cases) {
    const IterationResult r = simulate_iteration(testing::input_for(c.file));
    const double sbh = s * c.b * c.h;
    // Per layer: selective + SP keeps 34sbh/t; full recompute keeps the layer input 2sbh.
    const double per_layer = c.selective ? sbh * 34.0 / c.t : 2.0 * sbh;
    // The first stage holds L layers' worth (1F1B), times 1 + (p-1)/(pv) when interleaved.
    const double held = c.L * (c.v > 1 ? 1.0 + (c.p - 1) / (c.p * c.v) : 1.0);
    const double sp_div = c.selective ? 1.0 / c.t : 1.0;
    const double peak = r.memory[0].activation_peak;
    if (c.p == 1) {
      // One stage, one microbatch: the layers, the embedding dropout mask (sbh bytes), and, as
      // it is also the last stage, the final LN input (2sbh) and the fp32 logits (4sbV/t).
      const double expected =
          held * per_layer + sbh * sp_div + 2.0 * sbh * sp_div + 4.0 * s * c.b * c.V / c.t;
      EXPECT_NEAR(peak / expected, 1.0, 1e-9) << c.file;
    } else {
      // The layers, plus one embedding mask (sbh bytes, /t with SP) per microbatch whose
      // first-chunk forward has run: Megatron's warm-up on rank 0 runs W = 2(p-1) + (v-1)p + 1
      // forwards (W = p for 1F1B), the k-th of them on chunk (k / p) mod v.
      const int W =
          c.v > 1 ? static_cast<int>(2 * (c.p - 1) + (c.v - 1) * c.p + 1) : static_cast<int>(c.p);
      int first_chunk = 0;
      for (int k = 0; k < W; ++k)
        first_chunk += (k / static_cast<int>(c.p)) % static_cast<int>(c.v) == 0;
      // In the steady state the chunk mix of the W in-flight forwards shifts, which can hold
      // one more first-chunk microbatch than the warm-up: allow one more mask.
      const double expected = held * per_layer + first_chunk * sbh * sp_div;
      EXPECT_GE(peak, expected * (1 - 1e-12)) << c.file;
      EXPECT_LE(peak, expected + sbh * sp_div * (1 + 1e-9)) << c.file;
    }
  }
}

TEST(Iteration, AConfigurationThatDoesNotFitSaysByHowMuch) {
  // Korthikanti 1T without recomputation would hold L*(34+5as/h)sbh/t of activations: far more
  // than 80 GB.
  hw::Scenario s = hw::load_scenario(testing::scenario_path("megatron/korthikanti-1t-full.yaml"));
  s.parallel.recompute = "none";
  const IterationResult r = simulate_iteration(testing::input_for(s));
  EXPECT_FALSE(r.fits);
  EXPECT_GT(r.worst_overflow, 0);
  EXPECT_FALSE(r.memory[0].fits);
  // Against the usable memory: 80 GB of HBM less the profile's 2 GB reserve.
  EXPECT_DOUBLE_EQ(r.memory[0].capacity, 78e9);
  EXPECT_NEAR(r.worst_overflow, r.memory[0].peak - 78e9, 1e6);
}

}  // namespace
}  // namespace pw
