// The data-parallel side of one iteration: gradient bytes and buckets, the overlap of the
// reduction, ZeRO-2/3's per-microbatch reduce-scatters and ZeRO-3's gathers, measured size
// corrections of collectives, optimizer offload.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "hwmodels/collectives.h"
#include "hwmodels/memory.h"
#include "hwmodels/profile.h"
#include "hwmodels/rank_layout.h"
#include "hwmodels/scenario.h"
#include "hwmodels/transformer.h"
#include "sim/iteration.h"
#include "sim_test_util.h"

namespace pw {
namespace {

using testing::small_scenario;

// `in` with scenario `s`'s pipeline scheduled as ZB-V (one V pipeline: both ends of the model
// on device 0, every chunk once).
IterationInput with_zb_v(const IterationInput& in, const hw::Scenario& s) {
  GeneratorParams gp;
  gp.p = in.schedule.placement.num_devices;
  gp.m = static_cast<int>(s.num_microbatches());
  gp.num_layers = s.model.num_layers;
  IterationInput zbv = in;
  zbv.schedule = generate_schedule(default_registry(), "zb-v", gp);
  return zbv;
}

TEST(Iteration, OverlappedGradientReductionIsNotSlower) {
  IterationInput on = testing::input_for(small_scenario(1, 1, 1, 16));
  IterationInput off = on;
  on.parallel.overlap_grad_reduce = true;
  off.parallel.overlap_grad_reduce = false;
  const IterationResult a = simulate_iteration(on);
  const IterationResult b = simulate_iteration(off);
  EXPECT_LT(a.exposed[static_cast<int>(CommKind::kDp)], b.exposed[static_cast<int>(CommKind::kDp)]);
  EXPECT_LE(a.iteration, b.iteration);
}

// The DP reduction in the frameworks' buckets (hw::grad_bucket_count), counted on the DP
// stream: t = 1, p = 2, d = 8 over two nodes, 8 layers of h = 1024 (s = 1024, V = 51200).
// Stage 0 holds 4 layers (12h^2 + 13h = 12,596,224 each), the embedding (V h = 52,428,800) and
// positions (s h = 1,048,576): 103,862,272 parameters; stage 1 the other 4 layers, the final
// LayerNorm (2h) and the tied output copy: 102,815,744. Without overlap each stage's buffer is
// one all-reduce after the backward; with overlap Megatron cuts stage 0 into buckets of
// max(40M, 1M x 8) = 40M parameters, ceil(103,862,272 / 4e7) = 3, and leaves stage 1 whole.
// (The tied copy's all-reduce with the first stage, stage -1 on the DP stream, is not a bucket.)
TEST(Iteration, GradientBucketsAreTheFrameworksOwn) {
  auto reductions = [](bool overlap) {
    IterationInput in = testing::input_for(small_scenario(1, 2, 2, 64));
    in.parallel.overlap_grad_reduce = overlap;
    IterationOptions o;
    o.trace = true;
    const IterationResult r = simulate_iteration(in, o);
    std::vector<int> n(r.trace.process_names.size(), 0);
    for (const TraceSlice& sl : r.trace.slices)
      if (r.trace.thread_names[sl.pid][sl.tid] == "dp" && sl.stage >= 0) ++n[sl.pid];
    return n;
  };
  EXPECT_EQ(reductions(false), (std::vector<int>{1, 1}));
  EXPECT_EQ(reductions(true), (std::vector<int>{3, 1}));
}

// The last stage's tied copy of the embedding has its gradient summed with the first stage's
// (Megatron's embedding group) after the data-parallel reduction and before the optimizer step:
// t = 1, p = 2 on one DGX A100 node (d = 4), so the pair is GPUs 0 and 4 (gpu = t_rank + t (d_rank
// + d p_rank)). The all-reduce moves the fp32 gradient of V h = 51,200 x 1,024 parameters,
// 209,715,200 bytes, and runs alone (both ends' reductions have ended when it starts), so it
// lasts the collective model's time for that group; each end runs one. Untied, or with both ends
// on one device (ZB-V's V placement), there is none.
TEST(Iteration, TheTiedCopysGradientIsSummedWithTheFirstStagesAfterTheReduction) {
  const hw::Scenario s = small_scenario(1, 2, 1, 16);
  auto embedding_syncs = [](const IterationInput& in) {
    IterationOptions o;
    o.trace = true;
    const IterationResult r = simulate_iteration(in, o);
    std::vector<TraceSlice> out;
    for (const TraceSlice& sl : r.trace.slices)
      if (r.trace.thread_names[sl.pid][sl.tid] == "dp" && sl.stage < 0) out.push_back(sl);
    return std::pair{out, r};
  };
  const IterationInput in = testing::input_for(s);
  const auto [syncs, r] = embedding_syncs(in);
  ASSERT_EQ(syncs.size(), 2u);
  const hw::Topology topo(s.topology);
  const hw::GroupNetwork net = hw::describe_group(topo, s.profile, {0, 4});
  const Bytes bytes{4.0 * 51200 * 1024};
  ASSERT_DOUBLE_EQ(bytes.value, 209715200.0);
  const TimePs expected = hw::collective_time(
      hw::CollectiveKind::kAllReduce,
      hw::choose_algorithm(hw::CollectiveKind::kAllReduce, bytes, net), bytes, net);
  for (const TraceSlice& sl : syncs) {
    EXPECT_NEAR(static_cast<double>(sl.duration), static_cast<double>(expected),
                1e-6 * static_cast<double>(expected));
    EXPECT_EQ(sl.start, syncs[0].start);  // one collective: both ends start it together
  }
  // Untied (its own output layer, no copy) and ZB-V (both ends on device 0): none.
  IterationInput untied = in;
  untied.model.untie_embeddings = true;
  EXPECT_TRUE(embedding_syncs(untied).first.empty());
  EXPECT_TRUE(embedding_syncs(with_zb_v(in, s)).first.empty());
}

// BitPipe runs two opposite pipelines whose chunks of the same layers sit on devices j and p-1-j,
// so each such pair all-reduces its copies' gradients before the optimizer step (PAIR_REDUCE;
// not priced before 2026-11-29, which let BitPipe skip a collective the executor runs). t = 4,
// p = 2, d = 1 on one DGX A100 node: every pipeline has 2p = 4 chunks of 2 layers, each device
// one copy of every chunk, tensor rank 0's devices are GPUs 0 and 4. Each device runs one
// all-reduce per chunk on its DP stream, both devices together (one collective), each lasting at
// least the collective model's time for the chunk's gradient over {0, 4} (its own parameters x
// the gradient bytes per parameter), and the optimizer step starts after the last. ZB-V (one
// pipeline) has none.
TEST(Iteration, BitPipesTwinChunksAllReduceTheirGradientsBeforeTheStep) {
  const hw::Scenario s = small_scenario(4, 2, 1, 16, "  schedule: bitpipe");
  const IterationInput in = testing::input_for(s);
  ASSERT_EQ(in.parallel.data_parallel, 1);
  auto slices = [](const IterationInput& x) {
    IterationOptions o;
    o.trace = true;
    return simulate_iteration(x, o).trace;
  };
  const Trace tr = slices(in);
  const Placement& pl = in.schedule.placement;
  ASSERT_EQ(pl.num_pipelines(), 2);
  const hw::Topology topo(s.topology);
  const hw::GroupNetwork net = hw::describe_group(topo, s.profile, {0, 4});
  const hw::WorkloadOptions wo = hw::workload_options(in.parallel, false);
  for (int pid = 0; pid < 2; ++pid) {
    std::vector<TraceSlice> pairs;
    TimePs opt_start = -1;
    for (const TraceSlice& sl : tr.slices) {
      if (sl.pid != pid) continue;
      if (sl.name.rfind("PAIR_REDUCE", 0) == 0) pairs.push_back(sl);
      if (sl.name.rfind("OPT", 0) == 0 && opt_start < 0) opt_start = sl.start;
    }
    ASSERT_EQ(pairs.size(), 4u) << "device " << pid;
    for (const TraceSlice& sl : pairs) {
      ASSERT_GE(sl.stage, 0);
      const StageInfo& st = pl.stages[sl.stage];
      EXPECT_EQ(st.device, pid);
      const double params =
          hw::stage_parameter_count(in.model, wo, st.layer_begin, st.layer_end,
                                    hw::stage_role(st.index, pl.stages_per_pipeline(), false), 2);
      const Bytes bytes{params * hw::grad_bytes_per_param(in.parallel)};
      const TimePs expected = hw::collective_time(
          hw::CollectiveKind::kAllReduce,
          hw::choose_algorithm(hw::CollectiveKind::kAllReduce, bytes, net), bytes, net);
      EXPECT_GE(static_cast<double>(sl.duration), static_cast<double>(expected) * (1 - 1e-9))
          << sl.name;
      EXPECT_GE(opt_start, sl.start + sl.duration) << sl.name;
      // The twin on the other device starts the same collective at the same time.
      bool twin = false;
      for (const TraceSlice& o : tr.slices)
        twin |= o.pid == 1 - pid && o.name.rfind("PAIR_REDUCE", 0) == 0 && o.start == sl.start &&
                pl.stages[o.stage].index == st.index;
      EXPECT_TRUE(twin) << sl.name;
    }
  }
  for (const TraceSlice& sl : slices(with_zb_v(in, s)).slices)
    EXPECT_NE(sl.name.rfind("PAIR_REDUCE", 0), 0u);
}

// Expert gradients reduce over the expert-data-parallel group (Megatron's expert buffers), the
// rest over the DP group. A small SwiGLU MoE model (4 layers, h = 512, 8 experts of width 512)
// on one DGX H100 node, t = p = 1, d = 8, ZeRO-0 without overlap: one all-reduce per group after
// the backward. A rank holds 8 / ep experts per layer, each 3 x 512 x 512 weights and biases of
// 2 x 512 (gate and up) + 512 (down) = 787,968 parameters: ep = 8 holds 4 x 787,968 = 3,151,872
// expert parameters and no other rank holds them (expert-DP 8 / 8 = 1: no expert reduction);
// ep = 2 holds 4 x 4 x 787,968 = 12,607,488, the
// same as GPUs {0, 2, 4, 6} (expert-DP 8 / 2 = 4), reduced there. Each reduction lasts the
// collective model's time for its bytes (4 per parameter, fp32) on its group; ep = 1 (every rank
// holds every expert) reduces all parameters over the DP group as a dense model does.
TEST(Iteration, ExpertGradientsReduceOverTheExpertDataParallelGroup) {
  auto scenario = [](int ep) {
    return hw::parse_scenario(
        fmt::format(
            "model: {{num_layers: 4, hidden_size: 512, num_attention_heads: 8, swiglu: true,\n"
            "        normalization: RMSNorm, num_experts: 8, moe_router_topk: 2,\n"
            "        moe_ffn_hidden_size: 512, seq_length: 1024, vocab_size: 32000}}\n"
            "cluster: {{profile: dgx-h100, nodes: 1}}\n"
            "parallel: {{expert_model_parallel_size: {}, micro_batch_size: 1,\n"
            "           global_batch_size: 16, overlap_grad_reduce: false}}\n",
            ep),
        "moe.yaml", "");
  };
  for (const auto& [ep, expert_hand, expert_group] :
       {std::tuple{8, 3151872.0, std::vector<int>{0}},
        std::tuple{2, 12607488.0, std::vector<int>{0, 2, 4, 6}},
        std::tuple{1, 0.0, std::vector<int>{}}}) {
    const hw::Scenario s = scenario(ep);
    const IterationInput in = testing::input_for(s);
    ASSERT_EQ(in.parallel.data_parallel, 8);
    const hw::RankLayout lay = hw::rank_layout_of(in.parallel, 8);
    EXPECT_EQ(lay.expert_dp_group(0, 0, 0),
              expert_group.empty() ? lay.dp_group(0, 0) : expert_group);
    double expert = 0;
    const double params =
        hw::stage_parameter_count(in.model, hw::workload_options(in.parallel, false), 0, 4,
                                  hw::stage_role(0, 1, false), 1, &expert);
    if (ep > 1) {
      EXPECT_DOUBLE_EQ(expert, expert_hand);
    }
    const hw::Topology topo(s.topology);
    auto time_of = [&](double n_params, const std::vector<int>& group) {
      const hw::GroupNetwork net = hw::describe_group(topo, s.profile, group);
      const Bytes bytes{4.0 * n_params};
      return static_cast<double>(hw::collective_time(
          hw::CollectiveKind::kAllReduce,
          hw::choose_algorithm(hw::CollectiveKind::kAllReduce, bytes, net), bytes, net));
    };
    std::vector<double> expected{time_of(ep > 1 ? params - expert : params, lay.dp_group(0, 0))};
    if (expert_group.size() > 1) expected.insert(expected.begin(), time_of(expert, expert_group));
    IterationOptions o;
    o.trace = true;
    const IterationResult r = simulate_iteration(in, o);
    std::vector<double> got;
    for (const TraceSlice& sl : r.trace.slices)
      if (sl.pid == 0 && sl.name.rfind("REDUCE_GRAD", 0) == 0)
        got.push_back(static_cast<double>(sl.duration));
    ASSERT_EQ(got.size(), expected.size()) << "ep " << ep;
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-6 * expected[i]) << "ep " << ep << " reduction " << i;
  }
}

// ZeRO-3 gathers the expert weights over the expert-DP group too: the model above at ep = 2,
// ZeRO-3 by stage (one sweep: one stage per device), each gather alone on the gather stream, so
// each lasts the collective model's time: 2 bytes x 12,607,488 expert parameters over GPUs
// {0, 2, 4, 6}, then 2 bytes x the rest over all 8. At ep = 8 the experts are each rank's own
// (expert-DP 1): nothing of them is gathered, only the rest.
TEST(Iteration, Zero3GathersExpertWeightsOverTheExpertDataParallelGroup) {
  for (const auto& [ep, expert_group] :
       {std::pair{2, std::vector<int>{0, 2, 4, 6}}, std::pair{8, std::vector<int>{0}}}) {
    const hw::Scenario s = hw::parse_scenario(
        fmt::format(
            "model: {{num_layers: 4, hidden_size: 512, num_attention_heads: 8, swiglu: true,\n"
            "        normalization: RMSNorm, num_experts: 8, moe_router_topk: 2,\n"
            "        moe_ffn_hidden_size: 512, seq_length: 1024, vocab_size: 32000}}\n"
            "cluster: {{profile: dgx-h100, nodes: 1}}\n"
            "parallel: {{expert_model_parallel_size: {}, micro_batch_size: 1,\n"
            "           global_batch_size: 16, zero_stage: 3, zero3_gather: stage}}\n",
            ep),
        "moe.yaml", "");
    const IterationInput in = testing::input_for(s);
    double expert = 0;
    const double params =
        hw::stage_parameter_count(in.model, hw::workload_options(in.parallel, false), 0, 4,
                                  hw::stage_role(0, 1, false), 1, &expert);
    EXPECT_DOUBLE_EQ(expert, ep == 2 ? 12607488.0 : 3151872.0);
    const hw::Topology topo(s.topology);
    auto time_of = [&](double n_params, const std::vector<int>& group) {
      const hw::GroupNetwork net = hw::describe_group(topo, s.profile, group);
      const Bytes bytes{2.0 * n_params};
      return static_cast<double>(hw::collective_time(
          hw::CollectiveKind::kAllGather,
          hw::choose_algorithm(hw::CollectiveKind::kAllGather, bytes, net), bytes, net));
    };
    std::vector<double> expected;
    if (expert_group.size() > 1) expected.push_back(time_of(expert, expert_group));
    expected.push_back(time_of(params - expert, {0, 1, 2, 3, 4, 5, 6, 7}));
    IterationOptions o;
    o.trace = true;
    const IterationResult r = simulate_iteration(in, o);
    std::vector<double> got;
    for (const TraceSlice& sl : r.trace.slices)
      if (sl.pid == 0 && sl.name.rfind("UNSHARD", 0) == 0)
        got.push_back(static_cast<double>(sl.duration));
    ASSERT_EQ(got.size(), expected.size()) << "ep " << ep;
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-6 * expected[i]) << "ep " << ep << " gather " << i;
  }
}

TEST(Iteration, GradientBytesFollowTheConfigurationInMemoryAndReduction) {
  // One pipeline stage, d = 16 over two nodes, ZeRO-1 (distributed optimizer): the gradient
  // buffer holds every parameter of the rank at 4 bytes (grad_reduce_in_fp32, Megatron's
  // default) or 2 (bf16), the optimizer state 12 bytes over d either way, and the reduction
  // moves half the bytes in bf16.
  const IterationInput fp32 = testing::input_for(small_scenario(1, 1, 2, 16, "  zero_stage: 1"));
  IterationInput bf16 = fp32;
  bf16.parallel.grad_reduce_in_fp32 = false;
  const IterationResult a = simulate_iteration(fp32), b = simulate_iteration(bf16);
  const double P = a.memory[0].weights / 2;  // bf16 weights: 2 bytes per parameter
  EXPECT_DOUBLE_EQ(a.memory[0].grads, 4 * P);
  EXPECT_DOUBLE_EQ(b.memory[0].grads, 2 * P);
  EXPECT_DOUBLE_EQ(a.memory[0].optimizer, 12 * P / 16);
  EXPECT_DOUBLE_EQ(a.memory[0].peak - b.memory[0].peak, 2 * P);
  EXPECT_LT(b.exposed[static_cast<int>(CommKind::kDp)], a.exposed[static_cast<int>(CommKind::kDp)]);
}

// Megatron's overlap_param_gather: ZeRO-1's all-gather of the updated bf16 weights leaves the
// end of the step for the next step's first forward, in the gradient buckets. One stage of the
// small model, d = 16 over two nodes: 8 x 12,596,224 layer parameters, the embedding (52,428,800),
// positions (1,048,576) and the final LayerNorm (2,048) = 154,249,216, cut into
// ceil(154,249,216 / max(40M, 16M)) = 4 buckets. The first bucket is gathered before the first
// forward starts, the other three beside it (the pass ends when both have), nothing after the
// optimizer step; the iteration changes by what the first forward exposes at the start less
// the whole gather it no longer runs at the end (NCCL's slowing of the compute it runs beside
// is set to 0 here, so the forward's compute keeps its length).
TEST(Iteration, OverlappedParamGatherRunsBeforeTheFirstForwardInTheGradientBuckets) {
  auto run = [](bool overlap) {
    IterationInput in = testing::input_for(small_scenario(1, 1, 2, 64, "  zero_stage: 1"));
    in.parallel.overlap_grad_reduce = true;
    in.parallel.overlap_param_gather = overlap;
    IterationOptions o;
    o.trace = true;
    o.comm_compute_slowdown = 0;
    return simulate_iteration(in, o);
  };
  const IterationResult on = run(true), off = run(false);
  auto slices = [](const IterationResult& r, int pid, const std::string& thread) {
    std::vector<TraceSlice> out;
    for (const TraceSlice& sl : r.trace.slices)
      if (sl.pid == pid && r.trace.thread_names[sl.pid][sl.tid] == thread) out.push_back(sl);
    std::sort(out.begin(), out.end(),
              [](const TraceSlice& a, const TraceSlice& b) { return a.start < b.start; });
    return out;
  };
  const auto gathers = slices(on, 0, "dp gather"), compute = slices(on, 0, "compute");
  ASSERT_EQ(gathers.size(), 2u);  // the first bucket, then the other three
  ASSERT_GE(compute.size(), 2u);
  EXPECT_EQ(gathers[0].start, 0);
  EXPECT_EQ(compute[0].start, gathers[0].start + gathers[0].duration);
  EXPECT_GE(compute[1].start, gathers[1].start + gathers[1].duration);
  // The reduction stream: 4 reduce-scatter buckets, and without the option the gather after.
  EXPECT_EQ(slices(on, 0, "dp").size(), 4u);
  const auto off_dp = slices(off, 0, "dp");
  ASSERT_EQ(off_dp.size(), 5u);
  EXPECT_TRUE(slices(off, 0, "dp gather").empty());
  // The first bucket moves a quarter of the bytes the whole gather does.
  EXPECT_LT(gathers[0].duration, off_dp.back().duration);
  const TimePs f0_end = compute[0].start + compute[0].duration;
  const TimePs exposed =
      gathers[0].duration + std::max<TimePs>(0, gathers[1].start + gathers[1].duration - f0_end);
  EXPECT_EQ(on.iteration - off.iteration, exposed - off_dp.back().duration);
}

// Not aligned (1F1B, p = 2, d = 8): the second stage gathers its whole chunk (one bucket) when
// its first activation arrives, then runs its first forward. Aligned (interleaved, p = 2, two
// chunks per GPU; Megatron's align_param_gather): every GPU gathers its first chunks from the
// start of the step.
TEST(Iteration, OverlappedParamGatherWaitsForTheInputUnlessAligned) {
  auto run = [](const std::string& extra) {
    IterationInput in =
        testing::input_for(small_scenario(1, 2, 2, 64, "  zero_stage: 1\n" + extra));
    in.parallel.overlap_grad_reduce = true;
    in.parallel.overlap_param_gather = true;
    IterationOptions o;
    o.trace = true;
    return simulate_iteration(in, o);
  };
  auto first = [](const IterationResult& r, int pid, const std::string& thread) {
    TraceSlice best;
    best.start = -1;
    for (const TraceSlice& sl : r.trace.slices)
      if (sl.pid == pid && r.trace.thread_names[sl.pid][sl.tid] == thread &&
          (best.start < 0 || sl.start < best.start))
        best = sl;
    return best;
  };
  const IterationResult plain = run("");
  const TraceSlice recv = first(plain, 1, "pp recv"), gather = first(plain, 1, "dp gather");
  ASSERT_GE(recv.start, 0);
  ASSERT_GE(gather.start, 0);
  EXPECT_EQ(gather.start, recv.start + recv.duration);
  EXPECT_EQ(first(plain, 1, "compute").start, gather.start + gather.duration);
  const IterationResult aligned = run("  num_layers_per_virtual_pipeline_stage: 2");
  for (int pid = 0; pid < 2; ++pid) EXPECT_EQ(first(aligned, pid, "dp gather").start, 0);
  // Interleaved with --no-align-param-gather: each chunk's first forward dispatches its own.
  IterationInput in = testing::input_for(
      small_scenario(1, 2, 2, 64, "  zero_stage: 1\n  num_layers_per_virtual_pipeline_stage: 2"));
  in.parallel.overlap_grad_reduce = in.parallel.overlap_param_gather = true;
  in.parallel.align_param_gather = false;
  IterationOptions o;
  o.trace = true;
  const IterationResult unaligned = simulate_iteration(in, o);
  const TraceSlice r1 = first(unaligned, 1, "pp recv"), g1 = first(unaligned, 1, "dp gather");
  EXPECT_EQ(g1.start, r1.start + r1.duration);
  EXPECT_GT(unaligned.iteration, aligned.iteration);
}

// BitPipe's two pipelines start a GPU's chunks out of stage order (its first forward at p = 2
// is not its lowest stage's): the aligned gathers follow the order the chunks' first forwards
// run (chunk k's pre-hook dispatches chunk k + 1's), so the step completes, and gathering
// under the forwards is no slower than after the optimizer step. Stage order deadlocked here:
// a later chunk's gather waited, in the in-order gather stream, for a pre-hook that ran after it.
TEST(Iteration, OverlappedParamGatherFollowsTheChunksFirstForwardsUnderBitPipe) {
  auto run = [](bool overlap) {
    IterationInput in = testing::input_for(small_scenario(
        2, 2, 1, 16, "  zero_stage: 1\n  overlap_grad_reduce: true\n  schedule: bitpipe"));
    in.parallel.overlap_param_gather = overlap;
    return simulate_iteration(in, IterationOptions{});
  };
  const IterationResult plain = run(false), overlapped = run(true);
  EXPECT_GT(overlapped.iteration, 0);
  EXPECT_LE(overlapped.iteration, plain.iteration);
}

// ZeRO-3, one stage of 8 layers, d = 16 over two nodes, 4 microbatches of 128 tokens (little
// compute, so the gathers show), no recomputation. By layer (FSDP): each pass
// holds two layers' gathered bf16 weights, 2 x 2 x P/8 bytes, and every F and B pass
// all-gathers the stage: each of the 7 passes after the first lasts at least the all-gather of
// its layers after the first (7/8 of 2P bytes). By stage (breadth-first): the stage's 2P bytes
// are gathered once and held, so the peak holds 2P of buffers and the iteration is shorter.
TEST(Iteration, Zero3GathersByLayerHoldTwoLayersAndGatherEveryPass) {
  const IterationInput layer = testing::input_for(
      small_scenario(1, 1, 2, 64, "  zero_stage: 3\n  zero3_gather: layer", 128));
  IterationInput stage = layer;
  stage.parallel.zero3_gather = "stage";
  const IterationResult a = simulate_iteration(layer), b = simulate_iteration(stage);
  const double P = a.memory[0].weights * 16 / 2;  // weights: 2 bytes per parameter over d = 16
  EXPECT_DOUBLE_EQ(a.memory[0].buffers, 2 * 2 * P / 8);
  EXPECT_DOUBLE_EQ(b.memory[0].buffers, 2 * P);
  EXPECT_DOUBLE_EQ(b.memory[0].peak - a.memory[0].peak, 2 * P - 2 * 2 * P / 8);
  EXPECT_GT(a.exposed[static_cast<int>(CommKind::kDp)], b.exposed[static_cast<int>(CommKind::kDp)]);
  EXPECT_GT(a.iteration, b.iteration);
  // 4 microbatches x (F + B): the 7 passes after the first each last at least their gather.
  const hw::Scenario s = small_scenario(1, 1, 2, 64);
  const hw::Topology topo(s.topology);
  const RankLayout lay = rank_layout_of(layer.parallel, s.topology.node.gpus_per_node);
  const hw::GroupNetwork net = hw::describe_group(topo, s.profile, lay.dp_group(0, 0));
  const Bytes rest{2 * P * 7 / 8};
  const TimePs g = hw::collective_time(
      hw::CollectiveKind::kAllGather,
      hw::choose_algorithm(hw::CollectiveKind::kAllGather, rest, net), rest, net);
  EXPECT_GE(a.iteration, 7 * g);
}

// A calibrated size correction reaches the simulator through hwmodels' steps: t = 8 on one DGX
// A100 node, one stage, one replica, so the only communication is the tensor-parallel
// all-reduce, every one on the critical path. With the single-node all-reduce measured at 2x
// the model at every size, each all-reduce phase's latency and flow time double, and so does
// the exposed TP time (to the picosecond rounding of its phases); compute is untouched.
TEST(Iteration, SizeCorrectionOfTheAllReduceDoublesTheTensorParallelTime) {
  const IterationInput plain = testing::input_for(small_scenario(8, 1, 1, 8));
  IterationInput doubled = plain;
  hw::CollectiveSizeCorrection c;
  c.kind = hw::CollectiveKind::kAllReduce;
  c.table.bytes = {8};
  c.table.factor = {2.0};
  doubled.profile.collective_size_corrections = {c};
  const IterationResult a = simulate_iteration(plain), b = simulate_iteration(doubled);
  const double ta = static_cast<double>(a.exposed[static_cast<int>(CommKind::kTp)]);
  const double tb = static_cast<double>(b.exposed[static_cast<int>(CommKind::kTp)]);
  ASSERT_GT(ta, 0);
  EXPECT_NEAR(tb, 2 * ta, 1e-6 * ta);
  EXPECT_NEAR(static_cast<double>(b.iteration - a.iteration), ta, 1e-6 * ta);
  // A multi-node correction does not touch a one-node group.
  IterationInput other = plain;
  c.multi_node = true;
  other.profile.collective_size_corrections = {c};
  EXPECT_EQ(simulate_iteration(other).iteration, a.iteration);
}

// The send/recv correction reaches the simulator's pipeline transfers (add_point_phase): t = 8,
// p = 2 on two nodes, so every activation and gradient transfer crosses nodes. With cross-node
// send/recv measured at 3x the model, the exposed pipeline time grows and the tensor-parallel
// time (single-node all-reduces, no correction) stays as it was; a single-node send/recv
// correction changes nothing here.
TEST(Iteration, SizeCorrectionOfSendRecvSlowsTheCrossNodePipelineTransfersOnly) {
  const IterationInput plain = testing::input_for(small_scenario(8, 2, 2, 16));
  IterationInput slow = plain, local = plain;
  hw::CollectiveSizeCorrection c;
  c.kind = hw::CollectiveKind::kSendRecv;
  c.multi_node = true;
  c.table.bytes = {8};
  c.table.factor = {3.0};
  slow.profile.collective_size_corrections = {c};
  c.multi_node = false;
  local.profile.collective_size_corrections = {c};
  const IterationResult a = simulate_iteration(plain), b = simulate_iteration(slow);
  const int pp = static_cast<int>(CommKind::kPp), tp = static_cast<int>(CommKind::kTp);
  EXPECT_GT(b.exposed[pp], a.exposed[pp]);
  EXPECT_GT(b.iteration, a.iteration);
  EXPECT_EQ(b.exposed[tp], a.exposed[tp]);
  EXPECT_EQ(simulate_iteration(local).iteration, a.iteration);
}

// ZeRO-2/3 reduce-scatter every microbatch's gradients (Megatron-FSDP: "accumulated during every
// backward pass"; DeepSpeed: every micro-step), ZeRO-1 only the last microbatch's. t = p = 1 on
// two nodes: d = 16, B = 64, so m = 4 microbatches per replica and one stage. The DP stream of
// ZeRO-2 carries m - 1 = 3 more reduce-scatters than ZeRO-1's, each of the stage's whole
// gradients (hw::grad_bytes_per_param a weight) and at least as long as hwmodels' reduce-scatter
// of those bytes; ZeRO-3 by layer carries them too, its gathers on their own stream.
TEST(Iteration, Zero2And3ReduceScatterEveryMicrobatchZero1OnlyTheLast) {
  auto run = [](const std::string& zero) {
    IterationInput in = testing::input_for(small_scenario(1, 1, 2, 64, zero));
    IterationOptions o;
    o.trace = true;
    return std::make_pair(in, simulate_iteration(in, o));
  };
  auto slices = [](const IterationResult& r, const std::string& stream, TimePs* shortest) {
    int n = 0;
    *shortest = std::numeric_limits<TimePs>::max();
    for (const TraceSlice& s : r.trace.slices)
      if (s.pid == 0 && r.trace.thread_names[0][s.tid] == stream) {
        ++n;
        *shortest = std::min(*shortest, s.duration);
      }
    return n;
  };
  const auto [in1, z1] = run("  zero_stage: 1");
  const auto [in2, z2] = run("  zero_stage: 2");
  const auto [in3, z3] = run("  zero_stage: 3");
  TimePs s1 = 0, s2 = 0, s3 = 0, g3 = 0;
  const int n1 = slices(z1, "dp", &s1), n2 = slices(z2, "dp", &s2), n3 = slices(z3, "dp", &s3);
  EXPECT_EQ(n2 - n1, 3);
  EXPECT_EQ(n3, n2 - 1);  // ZeRO-3 re-gathers nothing after the optimizer step
  EXPECT_GT(slices(z3, "dp gather", &g3), 0);
  EXPECT_EQ(slices(z1, "dp gather", &g3), 0);
  const double P = z1.memory[0].weights / 2;  // ZeRO-1 keeps every bf16 weight
  const hw::Scenario s = small_scenario(1, 1, 2, 64);
  const hw::Topology topo(s.topology);
  const RankLayout lay = rank_layout_of(in2.parallel, s.topology.node.gpus_per_node);
  const hw::GroupNetwork net = hw::describe_group(topo, s.profile, lay.dp_group(0, 0));
  const Bytes grad{P * hw::grad_bytes_per_param(in2.parallel)};
  const TimePs rs = hw::collective_time(
      hw::CollectiveKind::kReduceScatter,
      hw::choose_algorithm(hw::CollectiveKind::kReduceScatter, grad, net), grad, net);
  // The longest slices are the per-microbatch ones (the tail's are buckets of the same bytes).
  TimePs longest = 0;
  for (const TraceSlice& sl : z2.trace.slices)
    if (sl.pid == 0 && z2.trace.thread_names[0][sl.tid] == "dp")
      longest = std::max(longest, sl.duration);
  EXPECT_GE(longest, rs);
  EXPECT_GT(z2.iteration, z1.iteration);
}

// Narayanan et al. SC21's comparison (GPT-3 175B, batch 1536, A100s): at a fixed batch,
// ZeRO-3 without model parallelism loses throughput per GPU as GPUs are added, because every
// pass still all-gathers the whole model while each GPU's share of the batch shrinks (4, 2, 1
// sequences at 384, 768, 1536 GPUs); PTD-P (t8 p8 interleaved) keeps it nearly flat, its
// bubble growing only as (p-1)/(v m). The published trend, not the published values (those
// are not in shared/reference).
TEST(Iteration, Zero3ThroughputFallsWithGpusAtAFixedBatchWhilePtdpStaysFlat) {
  auto tflops = [](int nodes, const std::string& parallel) {
    const std::string text = fmt::format(
        "model: {{preset: gpt3-175b}}\ncluster: {{profile: dgx-a100-80gb, nodes: {}}}\n"
        "parallel:\n  micro_batch_size: 1\n  global_batch_size: 1536\n"
        "  recompute_granularity: full\n{}",
        nodes, parallel);
    const IterationResult r =
        simulate_iteration(testing::input_for(hw::parse_scenario(text, "sc21.yaml", ".")));
    EXPECT_TRUE(r.fits) << parallel << " on " << nodes << " nodes";
    return r.model_tflops_per_gpu;
  };
  const std::string zero3 = "  zero_stage: 3\n";
  const std::string ptdp =
      "  tensor_model_parallel_size: 8\n  pipeline_model_parallel_size: 8\n"
      "  num_layers_per_virtual_pipeline_stage: 4\n  schedule: interleaved\n";
  const double z384 = tflops(48, zero3), z1536 = tflops(192, zero3);
  const double p384 = tflops(48, ptdp), p1536 = tflops(192, ptdp);
  EXPECT_LT(z1536, 0.75 * z384);
  EXPECT_GT(p1536, 0.85 * p384);
  EXPECT_GT(p1536, z1536);
}

TEST(Iteration, OffloadChoosesASplitAndKeepsOptimizerStateOffTheGpu) {
  const IterationInput in =
      testing::input_for(small_scenario(1, 1, 1, 16, "  optimizer_offload: true"));
  const IterationResult r = simulate_iteration(in);
  EXPECT_GE(r.offload_gpu_share, 0.0);
  EXPECT_LE(r.offload_gpu_share, 1.0);
  // At the peak only the GPU share's state is resident, never the whole 12 bytes/param.
  const IterationResult plain = simulate_iteration(testing::input_for(small_scenario(1, 1, 1, 16)));
  EXPECT_LT(r.memory[0].optimizer, plain.memory[0].optimizer);
}

}  // namespace
}  // namespace pw
