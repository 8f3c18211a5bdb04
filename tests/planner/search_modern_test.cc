// The search's certificate on modern models and options: the screen's and the evaluator's bounds
// hold against the discrete-event simulator with context and expert parallelism, multi-token
// prediction, ZeRO-3 by layer, overlapped parameter gathers and tensor-parallel communication
// overlap, and each option is searched as its framework dispatches it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "des_check.h"
#include "hwmodels/profile.h"
#include "planner/search/search.h"
#include "search_test_util.h"

namespace pw {
namespace {

using testing::check_bounds_against_des;
using testing::DesCheck;
using testing::problem;

// A GQA (4 groups) + SwiGLU + RMSNorm + RoPE model without biases, untied, on two DGX H100
// nodes with fused attention: the base of the modern-model certificate tests.
PlanProblem llama_style_on_two_h100_nodes(const ModelShape& shape) {
  PlanProblem pr;
  pr.model = shape;
  pr.model.num_query_groups = 4;
  pr.model.swiglu = true;
  pr.model.rmsnorm = true;
  pr.model.rope = true;
  pr.model.bias = false;
  pr.model.untie_embeddings = true;
  pr.profile = hw::resolve_profile("dgx-h100", "", "", "");
  pr.num_gpus = 16;
  pr.sim.flash_attention = true;
  return pr;
}

// The same certificate with context parallelism, expert parallelism (expert-TP t and 1), FP8 and
// ZeRO-0/1/3 in the space: a small GQA + SwiGLU + RMSNorm MoE model (8 experts, top-2, its first
// layer dense) on two DGX H100 nodes. Every bound is below the DES's figure and the search's first
// row is the exhaustive DES winner.
TEST(Search, BoundsHoldWithContextAndExpertParallelism) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr =
      llama_style_on_two_h100_nodes(ModelShape{"tiny-moe", 8, 1024, 16, 2816, 4096, 32000});
  pr.model.num_experts = 8;
  pr.model.moe_router_topk = 2;
  pr.model.moe_ffn_hidden_size = 1408;
  pr.model.moe_first_dense_layers = 1;
  SearchSpace space = default_space(pr, reg, {64});
  space.gpu_counts = {16};
  space.micro_batches = {1};
  space.zero = {0, 1, 3};
  space.end_trim = {0};
  space.offload = {0};
  space.recompute = {Recompute::kNone, Recompute::kFull};
  space.fp8 = {0, 1};
  std::vector<ScheduleOption> kept;
  for (const ScheduleOption& o : space.schedules)
    if (o.name == "1f1b" || (o.name == "interleaved" && o.v == 2) || o.name == "zb-h1")
      kept.push_back(o);
  space.schedules = kept;
  ASSERT_EQ(space.context_parallel, (std::vector<int>{1, 2}));  // 4096 / cp >= 2048
  ASSERT_EQ(space.expert_parallel, (std::vector<int>{1, 2, 4, 8}));
  const DesCheck k = check_bounds_against_des(pr, space, reg);
  EXPECT_GT(k.with_cp, 20);
  EXPECT_GT(k.with_ep, 20);
  EXPECT_GT(k.with_fp8, 20);
  EXPECT_GT(k.with_etp1, 20);
  // ZeRO-3 too: expert weights gathered over the expert-DP group (or not at all).
  EXPECT_GT(k.z3_by_layer + k.z3_by_stage, 20);
}

// The same certificate for a model with a multi-token prediction depth on its last stage (an
// MoE layer, the projection and a second head, and with CP its token rolls), over the end trims
// the search adds for it (the last stage trimmed further, `ends-0/k`, and the depth on a stage
// of its own before the loss's, `ends-0/k mtp-alone`).
TEST(Search, BoundsHoldWithMultiTokenPrediction) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr =
      llama_style_on_two_h100_nodes(ModelShape{"tiny-mtp", 12, 1024, 16, 2816, 4096, 32000});
  pr.model.num_experts = 8;
  pr.model.moe_router_topk = 2;
  pr.model.moe_ffn_hidden_size = 1408;
  pr.model.mtp_num_layers = 1;
  SearchSpace space = default_space(pr, reg, {64});
  // 0, 1, 2; 0, 1 with the last stage trimmed further; the depth alone on a stage
  ASSERT_GT(space.end_trim.size(), 3u);
  ASSERT_TRUE(std::any_of(space.end_trim.begin(), space.end_trim.end(), [](int code) {
    return is_mtp_standalone_code(static_cast<std::uint8_t>(code));
  }));
  space.gpu_counts = {16};
  space.micro_batches = {1};
  space.zero = {0, 1};
  space.offload = {0};
  space.recompute = {Recompute::kNone, Recompute::kFull};
  space.context_parallel = {1, 2};
  space.expert_parallel = {1, 4};
  std::vector<ScheduleOption> kept;
  for (const ScheduleOption& o : space.schedules)
    if (o.name == "1f1b" || o.name == "zb-h1") kept.push_back(o);
  space.schedules = kept;
  const DesCheck k = check_bounds_against_des(pr, space, reg);
  EXPECT_GT(k.checked, 50u);
  EXPECT_GT(k.with_ep, 10);
  EXPECT_GT(k.with_cp, 10);  // the depth's token rolls across the CP ranks, waited in every tier
  EXPECT_GT(k.with_mtp_alone, 10);
}

// A split code that lays the layers out as an earlier code does is not scored again (the rows
// were twins: DeepSeek-V3's first two read 17.462 s each, `ends-0 mtp-alone` and `ends-0/1
// mtp-alone`, the same 2 x 30, 1, 0 layers). By hand, 12 layers with a depth alone over 8
// stages: the 7 before the loss's take ceil(12/7) = 2, so the depths' stage one below it holds
// 1, which an even split of 12 over 7 (2 on five, 1 on two) gives too; over 4 stages the even
// split is 4/4/4 and the trimmed one 5/4/3: both searched.
TEST(Search, ATrimCodeThatRepeatsAnEarlierSplitIsNotScoredAgain) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr =
      llama_style_on_two_h100_nodes(ModelShape{"tiny-mtp", 12, 1024, 16, 2816, 4096, 32000});
  pr.model.mtp_num_layers = 1;
  const SearchSpace space = default_space(pr, reg, {64});
  const std::uint8_t even = mtp_standalone_code(0, 0), trimmed = mtp_standalone_code(0, 1);
  ASSERT_NE(std::find(space.end_trim.begin(), space.end_trim.end(), even), space.end_trim.end());
  ASSERT_NE(std::find(space.end_trim.begin(), space.end_trim.end(), trimmed), space.end_trim.end());
  std::vector<int> a, b;
  ASSERT_TRUE(split_for_trim_code(12, 8, even, &a) && split_for_trim_code(12, 8, trimmed, &b));
  EXPECT_EQ(a, (std::vector<int>{2, 2, 2, 2, 2, 1, 1, 0}));
  EXPECT_EQ(a, b);
  const CostModel model(pr, space);
  SearchConfig c;
  c.t = 1;
  c.micro_batch = 1;
  c.microbatches = 8;
  for (std::size_t i = 0; i < space.schedules.size(); ++i)
    if (space.schedules[i].name == "1f1b") c.schedule = static_cast<std::uint8_t>(i);
  ASSERT_EQ(space.schedules[c.schedule].name, "1f1b");
  StageCosts sc;
  for (const int p : {8, 4}) {
    c.p = static_cast<std::uint16_t>(p);
    c.d = static_cast<std::uint16_t>(16 / p);
    c.end_trim = even;
    EXPECT_TRUE(model.stage_costs(c, &sc)) << p;
    c.end_trim = trimmed;
    EXPECT_EQ(model.stage_costs(c, &sc), p == 4) << p;
  }
}

// Expert layouts of a cell, by hand: 8 experts, t = 2, cp = 1, d = 4 (8 tensor-and-data
// ranks). Expert-TP t = 2 leaves 4 ranks of experts: ep in {1, 2, 4}; expert-TP 1 spreads the
// experts over all 8: ep in {1, 2, 4, 8}. At t = 1 the two are one layout per ep.
TEST(Search, ExpertLayoutsCoverExpertTpOneAndT) {
  SearchSpace s;
  s.expert_parallel = {1, 2, 4, 8};
  ModelShape m{"moe", 4, 256, 8, 512, 256, 1024};
  m.num_experts = 8;
  m.moe_router_topk = 2;
  auto layouts = [&](int t, int d) {
    std::vector<std::pair<int, int>> v;
    for (const ExpertLayout& x : cell_expert_parallel(s, m, t, 1, d)) v.emplace_back(x.ep, x.etp1);
    return v;
  };
  using L = std::vector<std::pair<int, int>>;
  EXPECT_EQ(layouts(2, 4), (L{{1, 0}, {1, 1}, {2, 0}, {2, 1}, {4, 0}, {4, 1}, {8, 1}}));
  EXPECT_EQ(layouts(1, 8), (L{{1, 0}, {2, 0}, {4, 0}, {8, 0}}));
  s.expert_tp = {1};  // --etp 1: at t = 2 only the whole experts
  EXPECT_EQ(layouts(2, 4), (L{{1, 1}, {2, 1}, {4, 1}, {8, 1}}));
  EXPECT_EQ(layouts(1, 8).size(), 4u);
  s.expert_tp = {2};  // --etp 2: expert-TP t where t = 2; none at t = 1 or 4
  EXPECT_EQ(layouts(2, 4), (L{{1, 0}, {2, 0}, {4, 0}}));
  EXPECT_TRUE(layouts(1, 8).empty());
  EXPECT_TRUE(layouts(4, 2).empty());
  m.num_experts = 0;  // a dense model: one layout
  EXPECT_EQ(layouts(2, 4), (L{{1, 0}}));
}

// Megatron's overlaps and bf16 gradients as the scenario's settings: tensor-parallel
// communication under the paired GEMMs (per workload pass, F, B, W and recompute apart), the
// gradient reduction overlapped with the backward at 2 bytes per gradient. The screen's bounds
// stay lower bounds of the DES and the search still certifies the DES winner.
// GPT-3 175B with ZeRO-3 and neither tensor nor pipeline parallelism on 384 A100s (the
// comparison point of Narayanan et al. SC21): gathering the one stage's weights for a sweep
// needs 2 bytes x 175B = 350 GB of buffers, so only gathering layer by layer (two layers,
// 4 x 175B/96 = 7.3 GB) fits, and the search answers that.
TEST(Search, Zero3WithoutModelParallelismFitsOnlyByLayer) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("gpt3-175b", 384);
  SearchSpace space = default_space(pr, reg, {1536});
  SearchConstraints c;
  c.gpus = 384;
  c.tp = {1};
  c.pp = {1};
  c.zero = {3};
  c.micro_batch = {1};
  constrain_space(c, pr.model, 384, &space);
  ASSERT_EQ(space.zero3_gather, (std::vector<int>{0, 1}));
  const SearchResult r = run_search(pr, space, reg, SearchOptions{});
  ASSERT_FALSE(r.top.empty());
  const Evaluated& e = r.top[0];
  EXPECT_EQ(e.config.zero, 3);
  EXPECT_EQ(e.config.zero3_stage, 0);
  EXPECT_TRUE(e.feasible);
  for (const Evaluated& x : r.top)
    EXPECT_EQ(x.config.zero3_stage, 0) << describe_config(space, x.config);
  SearchConfig stage = e.config;
  stage.zero3_stage = 1;
  const Evaluated s = evaluate_config_des(CostModel(pr, space), reg, stage);
  EXPECT_FALSE(s.feasible);
  EXPECT_GT(s.peak_memory - e.peak_memory, 2 * 174e9 - 4 * 175e9 / 96);
}

// The overlap checks' space: 16 GPUs, microbatches of 1 and 2, the given ZeRO stages, no
// trim, offload or CP, no or full recomputation, and 1F1B, interleaved v2 and ZB-H1.
SearchSpace overlap_check_space(const PlanProblem& pr, const GeneratorRegistry& reg,
                                std::vector<int> zero) {
  SearchSpace space = default_space(pr, reg, {64});
  space.gpu_counts = {16};
  space.micro_batches = {1, 2};
  space.zero = std::move(zero);
  space.end_trim = {0};
  space.offload = {0};
  space.context_parallel = {1};
  space.recompute = {Recompute::kNone, Recompute::kFull};
  std::vector<ScheduleOption> kept;
  for (const ScheduleOption& o : space.schedules)
    if (o.name == "1f1b" || (o.name == "interleaved" && o.v == 2) || o.name == "zb-h1")
      kept.push_back(o);
  space.schedules = kept;
  return space;
}

// overlap_param_gather moves ZeRO-1/2's re-gather before the forwards (stage 0's first bucket
// is certain, each later device's chunk waits after its input or, interleaved, from the start):
// the screen's and the evaluator's bounds stay below the DES's figure, aligned and not.
TEST(Search, BoundsHoldWithParamGatherOverlap) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr =
      llama_style_on_two_h100_nodes(ModelShape{"tiny-llama", 8, 2048, 16, 5632, 4096, 32000});
  pr.overlap_grad_reduce = true;
  pr.overlap_param_gather = true;
  SearchSpace space = overlap_check_space(pr, reg, {0, 1, 2});
  ASSERT_EQ(space.param_gather, std::vector<int>{1});
  space.param_gather = {0, 1};  // both, as `plan --overlap-param-gather both`
  const DesCheck k = check_bounds_against_des(pr, space, reg);
  EXPECT_GT(k.with_param_gather, 50);
  EXPECT_GT(k.param_gather_aligned, 10);
  // On four nodes the data-parallel groups of small t cross nodes, so stage 0's whole gather
  // can outlast its first bucket and first forward: the screen must not start that device after
  // the whole gather (its first forward starts after the first bucket, ends after the rest).
  pr.num_gpus = 32;
  space = overlap_check_space(pr, reg, {1, 2});
  space.gpu_counts = {32};
  space.param_gather = {1};
  const DesCheck wide = check_bounds_against_des(pr, space, reg, "32 GPUs");
  EXPECT_GT(wide.param_gather_aligned, 10);
}

// `plan --overlap-param-gather both` searches the setting per configuration, and the answer
// follows Megatron's dispatch: over p = 4 without interleaving each later pipeline rank gathers
// its whole chunk on the fill path (three chunks' gathers in series, where the re-gather after
// the step runs once, every rank at the same time), so the best 1F1B row leaves it off;
// interleaved, the gathers start with the step and hide under the fill, so the best row has it.
TEST(Search, ParamGatherOverlapIsSearchedAndFollowsTheDispatchRule) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr =
      llama_style_on_two_h100_nodes(ModelShape{"tiny-llama", 8, 2048, 16, 5632, 4096, 32000});
  pr.overlap_grad_reduce = true;
  auto best = [&](const char* schedule, int v) {
    SearchSpace space = default_space(pr, reg, {64});
    space.param_gather = {0, 1};
    space.gpu_counts = {16};
    space.micro_batches = {1};
    space.zero = {1};
    space.end_trim = {0};
    space.offload = {0};
    space.context_parallel = {1};
    space.recompute = {Recompute::kNone};
    std::vector<ScheduleOption> kept;
    for (const ScheduleOption& o : space.schedules)
      if (o.name == schedule && (!o.takes_v || o.v == v)) kept.push_back(o);
    space.schedules = kept;
    SearchConstraints c;
    c.tp = {1};
    c.pp = {4};
    constrain_space(c, pr.model, pr.num_gpus, &space);
    const SearchResult r = run_search(pr, space, reg, SearchOptions{});
    EXPECT_FALSE(r.top.empty()) << schedule;
    return r.top.empty() ? SearchConfig{} : r.top[0].config;
  };
  EXPECT_EQ(best("1f1b", 1).param_gather, 0);
  EXPECT_EQ(best("interleaved", 2).param_gather, 1);
}

TEST(Search, BoundsHoldWithTensorParallelCommOverlap) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr =
      llama_style_on_two_h100_nodes(ModelShape{"tiny-llama", 8, 2048, 16, 5632, 4096, 32000});
  pr.tp_comm_overlap = true;
  pr.overlap_grad_reduce = true;
  pr.grad_reduce_in_fp32 = false;
  const SearchSpace space = overlap_check_space(pr, reg, {0, 1});
  ASSERT_TRUE(space.tp_comm_overlap);
  const DesCheck k = check_bounds_against_des(pr, space, reg);
  EXPECT_GT(k.with_overlap, 50);
}

TEST(Search, TensorParallelCommOverlapHidesTheCollectivesItCan) {
  // The same 4-way TP configuration with and without the overlap: the DES exposes less TP
  // communication with it, and is never slower.
  PlanProblem pr = problem("megatron-18.4b", 8);
  pr.profile = hw::resolve_profile("dgx-h100", "", "", "");
  const GeneratorRegistry reg = default_registry();
  SearchSpace space = default_space(pr, reg, {32});
  SearchConfig c{};
  c.t = 4;
  c.p = 2;
  c.d = 1;
  c.cp = 1;
  c.ep = 1;
  c.micro_batch = 1;
  c.microbatches = 32;
  c.sequence_parallel = 1;
  c.recompute = static_cast<int>(Recompute::kNone);
  for (std::size_t i = 0; i < space.schedules.size(); ++i)
    if (space.schedules[i].name == "1f1b") c.schedule = static_cast<int>(i);
  const Evaluated off = evaluate_config_des(CostModel(pr, space), reg, c);
  space.tp_comm_overlap = true;
  const Evaluated on = evaluate_config_des(CostModel(pr, space), reg, c);
  ASSERT_GT(off.iteration, 0);
  EXPECT_LT(on.iteration, off.iteration);
}

// Megatron SC21 configurations (t, p, GPUs, B from the weak-scaling table; microbatch 1, full
}  // namespace
}  // namespace pw
