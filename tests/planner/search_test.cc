// Tiered search: the screen's bounds hold, pruning never changes the winner, the screen never
// discards the discrete-event simulator's winner, determinism, published configurations,
// memory-limited and zero-bubble rankings, bad input.
#include "planner/search/search.h"

#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdio>

#include "hwmodels/profile.h"
#include "planner/search/plan_emit.h"
#include "search_test_util.h"

namespace pw {
namespace {

using testing::problem;

SearchSpace small_space(const PlanProblem& pr, const GeneratorRegistry& reg, int batch) {
  SearchSpace s = default_space(pr, reg, {batch});
  s.gpu_counts = {pr.num_gpus};
  s.micro_batches = {1, 2};
  s.zero = {0, 1, 3};
  s.end_trim = {0, 1};
  return s;
}

struct Case {
  const char* model;
  int gpus;
  int batch;
  double limit_gb;
};

// Scenarios for the screen-vs-exhaustive comparison: a small model with room to spare, a model
// that only fits with sharding/recomputation, and a memory-limited mid-size model.
const Case kCases[] = {
    {"megatron-1.7b", 16, 64, 0},
    {"megatron-18.4b", 16, 32, 0},
    {"megatron-7.5b", 8, 32, 30},
};

// The screen reuses one schedule's stage costs for the next schedule of the same cost class
// (CostModel::cost_class): the reused costs must be exactly what computing them afresh gives, for
// every option that changes them (recomputation, sequence parallelism, ZeRO stage and gather,
// offload, uneven split) and on a model with the embedding and head stages.
TEST(Screen, SchedulesOfOneCostClassShareExactlyTheSameStageCosts) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("gpt3-175b", 1024);
  const SearchSpace space = default_space(pr, reg, {1536});
  const CostModel model(pr, space);
  int classes_shared = 0, compared = 0;
  for (std::size_t a = 0; a < space.schedules.size(); ++a)
    for (std::size_t b = a + 1; b < space.schedules.size(); ++b) {
      if (model.cost_class(static_cast<int>(a)) != model.cost_class(static_cast<int>(b))) continue;
      ++classes_shared;
      for (int t : {1, 8})
        for (int p : {8, 16})
          for (int rc = 0; rc < 3; ++rc)
            for (int sp = 0; sp < 2; ++sp)
              for (int z : {0, 1, 3})
                for (int z3s = 0; z3s < 2; ++z3s)
                  for (int off = 0; off < 2; ++off)
                    for (int trim = 0; trim < 2; ++trim) {
                      SearchConfig c;
                      c.t = static_cast<std::uint16_t>(t);
                      c.p = static_cast<std::uint16_t>(p);
                      c.d = static_cast<std::uint16_t>(1024 / (t * p));
                      c.micro_batch = 1;
                      c.microbatches = static_cast<std::uint16_t>(1536 / c.d);
                      c.recompute = static_cast<std::uint8_t>(rc);
                      c.sequence_parallel = static_cast<std::uint8_t>(sp);
                      c.zero = static_cast<std::uint8_t>(z);
                      c.zero3_stage = static_cast<std::uint8_t>(z3s);
                      c.offload = static_cast<std::uint8_t>(off);
                      c.end_trim = static_cast<std::uint8_t>(trim);
                      SearchConfig first = c, second = c;
                      first.schedule = static_cast<std::uint8_t>(a);
                      second.schedule = static_cast<std::uint8_t>(b);
                      StageCosts fresh, reused;
                      const ScreenResult want = model.screen(second, &fresh);
                      if (!model.screen(first, &reused).costed) continue;
                      const ScreenResult got = model.screen(second, &reused, true);
                      ASSERT_EQ(got.valid, want.valid);
                      if (!want.costed) continue;
                      ++compared;
                      ASSERT_EQ(got.time_lb, want.time_lb) << describe_config(space, second);
                      ASSERT_EQ(got.mem_lb, want.mem_lb);
                      ASSERT_EQ(reused.f, fresh.f);
                      ASSERT_EQ(reused.b, fresh.b);
                      ASSERT_EQ(reused.w, fresh.w);
                      ASSERT_EQ(reused.act, fresh.act);
                      ASSERT_EQ(reused.static_mem, fresh.static_mem);
                      ASSERT_EQ(reused.tail, fresh.tail);
                      ASSERT_EQ(reused.net_volume, fresh.net_volume);
                      ASSERT_EQ(reused.hop, fresh.hop);
                    }
    }
  EXPECT_GE(classes_shared, 5);  // e.g. the zero-bubble family, the V family, interleaved vK
  EXPECT_GT(compared, 1000);
}

// When nothing fits, "needs at least X GB" must be a true lower bound that is over the limit:
// never the screen's bound of a configuration the evaluator then found not to fit. Set the limit
// between the smallest screen bound and the smallest evaluated peak of a 1F1B-only space (1F1B
// does not read the limit, so the peaks do not move): nothing fits, and the figure lies between
// the limit and that smallest peak.
TEST(Search, NoFeasiblePlanNamesANeedOverTheLimit) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr = problem("megatron-7.5b", 8);
  SearchSpace space = small_space(pr, reg, 32);
  space.schedules.erase(std::remove_if(space.schedules.begin(), space.schedules.end(),
                                       [](const ScheduleOption& o) { return o.name != "1f1b"; }),
                        space.schedules.end());
  ASSERT_EQ(space.schedules.size(), 1u);
  SearchOptions o;
  o.prune = false;
  o.keep_all = true;
  o.max_evaluations = 1 << 30;
  o.des_top = 0;
  const SearchResult all = run_search(pr, space, reg, o);
  double lowest_bound = 1e300, lowest_peak = 1e300;
  for (const Evaluated& e : all.all) {
    if (e.iteration <= 0) continue;
    lowest_bound = std::min(lowest_bound, e.mem_lb);
    lowest_peak = std::min(lowest_peak, e.peak_memory);
  }
  ASSERT_LT(lowest_bound, lowest_peak);
  pr.memory_limit = (lowest_bound + lowest_peak) / 2;
  o.prune = true;
  o.keep_all = false;
  const SearchResult none = run_search(pr, space, reg, o);
  ASSERT_TRUE(none.top.empty());
  EXPECT_GT(none.min_memory_needed, pr.memory_limit);
  EXPECT_LE(none.min_memory_needed, lowest_peak + 1);
}

TEST(Search, ScreenBoundsHoldForEveryEvaluatedConfiguration) {
  const GeneratorRegistry reg = default_registry();
  for (const Case& k : kCases) {
    const PlanProblem pr = problem(k.model, k.gpus, k.limit_gb);
    const SearchSpace space = small_space(pr, reg, k.batch);
    SearchOptions o;
    o.prune = false;
    o.keep_all = true;
    o.max_evaluations = 1 << 30;
    o.des_top = 0;
    const SearchResult r = run_search(pr, space, reg, o);
    ASSERT_GT(r.all.size(), 100u) << k.model;
    for (const Evaluated& e : r.all) {
      if (e.iteration <= 0) continue;  // generator refused it
      EXPECT_LE(e.time_lb, e.iteration * (1 + 1e-9)) << describe_config(space, e.config);
      EXPECT_LE(e.mem_lb, e.peak_memory * (1 + 1e-9)) << describe_config(space, e.config);
    }
  }
}

TEST(Search, PruningNeverDiscardsTheExhaustiveWinner) {
  const GeneratorRegistry reg = default_registry();
  for (const Case& k : kCases) {
    const PlanProblem pr = problem(k.model, k.gpus, k.limit_gb);
    const SearchSpace space = small_space(pr, reg, k.batch);
    // The evaluator tier alone (the DES tier is checked below).
    SearchOptions full;
    full.prune = false;
    full.top = 3;
    full.max_evaluations = 1 << 30;
    full.des_top = 0;
    SearchOptions pruned;
    pruned.top = 3;
    pruned.des_top = 0;
    const SearchResult a = run_search(pr, space, reg, full);
    const SearchResult b = run_search(pr, space, reg, pruned);
    ASSERT_FALSE(a.top.empty()) << k.model;
    ASSERT_EQ(a.top.size(), b.top.size()) << k.model;
    for (std::size_t i = 0; i < a.top.size(); ++i)
      EXPECT_DOUBLE_EQ(a.top[i].objective, b.top[i].objective) << k.model << " row " << i;
    EXPECT_EQ(a.top[0].config, b.top[0].config) << k.model;
    EXPECT_LT(b.stats.evaluated, a.stats.evaluated) << k.model;
  }
}

// The whole pipeline (screen, evaluator, DES on the evaluator's best 32) gives the same ranking,
// figures and tiers on 1 and 8 threads.
TEST(Search, ResultDoesNotDependOnThreadCount) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("gpt3-175b", 1024);
  SearchSpace space = default_space(pr, reg, {1536});
  space.gpu_counts = {1024};
  space.micro_batches = {1, 2};
  space.end_trim = {0};
  SearchOptions one, many;
  one.threads = 1;
  many.threads = 8;
  const SearchResult a = run_search(pr, space, reg, one);
  const SearchResult b = run_search(pr, space, reg, many);
  ASSERT_EQ(a.top.size(), b.top.size());
  ASSERT_FALSE(a.top.empty());
  EXPECT_EQ(a.top[0].tier, Tier::kDes);
  EXPECT_TRUE(a.stats.certified);
  for (std::size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].config, b.top[i].config);
    EXPECT_EQ(a.top[i].tier, b.top[i].tier);
    EXPECT_EQ(a.top[i].iteration, b.top[i].iteration);
    EXPECT_EQ(a.top[i].eval_iteration, b.top[i].eval_iteration);
  }
  ASSERT_EQ(a.pareto.size(), b.pareto.size());
  EXPECT_EQ(a.stats.evaluated, b.stats.evaluated);
  EXPECT_EQ(a.stats.des_simulated, b.stats.des_simulated);
}

struct DesCheck {
  std::size_t checked = 0;  ///< configurations simulated by the DES
  int with_cp = 0, with_ep = 0, with_fp8 = 0, with_overlap = 0;
  int with_etp1 = 0;                     ///< MoE at t > 1 with the experts whole (expert-TP 1)
  int with_mtp_alone = 0;                ///< the depths on a stage of their own (mtp_standalone)
  int with_param_gather = 0;             ///< overlap_param_gather configurations (ZeRO-1/2, d > 1)
  int param_gather_aligned = 0;          ///< ... of them interleaved over pp > 1 (aligned gathers)
  int z3_by_layer = 0, z3_by_stage = 0;  ///< ZeRO-3 configurations of each gather granularity
  /// ZeRO-2/3 configurations whose screen bound is the time their data-parallel bytes keep one
  /// route busy (StageCosts::net_volume), above every other bound of the screen.
  int route_bound = 0;
  /// Configurations whose evaluator memory bound (model state + the schedule's activation peak)
  /// is above the screen's by more than 10% (so the check above can catch it overstating).
  int memory_bound = 0;
};

// Every configuration of `space` the evaluator ran and the screen let through, simulated by the
// DES: the screen's time and memory bounds and the evaluator's time bound are below the DES's
// figures, and the search (DES tier on) answers the exhaustive DES winner, certified, with every
// row it returns fitting by the DES. `what` labels failures.
DesCheck check_bounds_against_des(const PlanProblem& pr, const SearchSpace& space,
                                  const GeneratorRegistry& reg, const std::string& what = "") {
  DesCheck k;
  SearchOptions all;
  all.prune = false;
  all.keep_all = true;
  all.max_evaluations = 1 << 30;
  all.des_top = 0;
  const SearchResult r = run_search(pr, space, reg, all);
  const CostModel model(pr, space);
  std::vector<Evaluated> runs;
  for (const Evaluated& e : r.all)
    if (e.iteration > 0 && e.mem_lb <= pr.limit()) runs.push_back(e);
  EXPECT_GT(runs.size(), 200u) << what;
  std::vector<Evaluated> des(runs.size());
  tbb::parallel_for(std::size_t{0}, runs.size(), [&](std::size_t i) {
    des[i] = evaluate_config_des(model, reg, runs[i].config);
  });
  const Evaluated* best = nullptr;
  for (std::size_t i = 0; i < des.size(); ++i) {
    const Evaluated& e = des[i];
    const std::string at = what + " " + describe_config(space, e.config);
    EXPECT_EQ(e.tier, Tier::kDes) << at;
    EXPECT_LE(runs[i].time_lb, e.iteration * (1 + 1e-9)) << at;
    EXPECT_LE(runs[i].time_bound, e.iteration * (1 + 1e-9)) << at;
    EXPECT_LE(runs[i].mem_lb, e.peak_memory * (1 + 1e-9)) << at;
    EXPECT_LE(runs[i].mem_bound, e.peak_memory * (1 + 1e-9)) << at;
    ++k.checked;
    k.with_cp += e.config.cp > 1;
    k.with_ep += e.config.ep > 1;
    k.with_etp1 += e.config.etp1 != 0;
    k.with_mtp_alone += is_mtp_standalone_code(e.config.end_trim);
    k.with_fp8 += e.config.fp8;
    k.with_overlap += parallel_from_config(space, e.config).tp_comm_overlap;
    const bool pg =
        parallel_from_config(space, e.config).overlap_param_gather && e.config.d * e.config.cp > 1;
    k.with_param_gather += pg;
    k.param_gather_aligned += pg && e.config.p > 1 && space.schedules[e.config.schedule].v > 1;
    k.z3_by_layer += e.config.zero == 3 && !e.config.zero3_stage;
    k.z3_by_stage += e.config.zero == 3 && e.config.zero3_stage;
    StageCosts sc;
    const ScreenResult scr = model.screen(e.config, &sc);
    double volume = 0;
    for (double v : sc.net_volume) volume = std::max(volume, v);
    k.route_bound += volume > 0 && volume >= scr.time_lb;
    k.memory_bound += runs[i].mem_bound > 1.1 * runs[i].mem_lb;
    if (e.feasible && (!best || e.objective < best->objective)) best = &e;
  }
  EXPECT_NE(best, nullptr);
  if (best == nullptr) return k;
  SearchOptions o;
  o.top = 3;
  const SearchResult s = run_search(pr, space, reg, o);
  EXPECT_FALSE(s.top.empty());
  if (s.top.empty()) return k;
  EXPECT_TRUE(s.stats.certified) << s.stats.des_note;
  for (const Evaluated& e : s.top) {
    EXPECT_EQ(e.tier, Tier::kDes) << what;
    EXPECT_TRUE(e.feasible) << what;
    EXPECT_LE(e.peak_memory, pr.limit()) << what;
  }
  EXPECT_DOUBLE_EQ(s.top[0].objective, best->objective)
      << what << ": exhaustive DES winner " << describe_config(space, best->config)
      << ", search chose " << describe_config(space, s.top[0].config);
  return k;
}

// The certificate, checked exhaustively: on small spaces (three models, three profiles),
// simulate EVERY configuration whose schedule generates and whose screen memory bound fits with
// the discrete-event simulator. Every bound the search certifies with is below the DES's figure
// for the same configuration (time: the screen's and the evaluator's; memory: the screen's),
// the default search's first row is the exhaustive DES winner, and every row it returns fits by
// the DES.
TEST(Search, DesTierIsCertifiedAgainstAnExhaustiveDes) {
  const GeneratorRegistry reg = default_registry();
  std::size_t checked = 0;
  int z3_by_layer = 0, z3_by_stage = 0, route_bound = 0, memory_bound = 0;
  for (const char* profile : {"dgx-a100-80gb", "dgx-h100", "h200"}) {
    for (const Case& k : kCases) {
      PlanProblem pr = problem(k.model, k.gpus, k.limit_gb);
      pr.profile = hw::resolve_profile(profile, "", "", "");
      SearchSpace space = small_space(pr, reg, k.batch);
      space.end_trim = {0};  // keeps the exhaustive DES affordable (thousands of simulations)
      const DesCheck d =
          check_bounds_against_des(pr, space, reg, std::string(profile) + " " + k.model);
      checked += d.checked;
      z3_by_layer += d.z3_by_layer;
      z3_by_stage += d.z3_by_stage;
      route_bound += d.route_bound;
      memory_bound += d.memory_bound;
    }
  }
  EXPECT_GE(checked, 3000u);
  // ZeRO-3 in both granularities is among what the bounds were checked on.
  EXPECT_GT(z3_by_layer, 100);
  EXPECT_GT(z3_by_stage, 100);
  // ... and the route bound of ZeRO-2/3's per-microbatch reduce-scatters and gathers is the
  // binding one on some of them (so the check above can catch it overstating).
  EXPECT_GT(route_bound, 20);
  // ... and the evaluator's memory bound, which keeps rows the DES would find too big out of
  // the DES tier, is well above the screen's on some of them.
  EXPECT_GT(memory_bound, 100);
  std::printf("checked %zu, route bound binding %d, memory bound > 1.1 x screen's %d\n", checked,
              route_bound, memory_bound);
}

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
// recomputation, interleaved with v = 2 where p > 1): the planner's choice must be at least as
// fast in the same simulator.
TEST(Search, AtLeastAsFastAsPublishedConfigurations) {
  struct Pub {
    const char* model;
    int t, p, gpus, batch;
  };
  const Pub pubs[] = {{"megatron-1.7b", 1, 1, 32, 512},      {"megatron-18.4b", 8, 1, 256, 1024},
                      {"megatron-39.1b", 8, 2, 512, 1536},   {"megatron-76.1b", 8, 4, 1024, 1792},
                      {"megatron-145.6b", 8, 8, 1536, 2304}, {"gpt3-175b", 8, 8, 1024, 1536}};
  const GeneratorRegistry reg = default_registry();
  for (const Pub& pb : pubs) {
    const PlanProblem pr = problem(pb.model, pb.gpus);
    SearchSpace space = default_space(pr, reg, {pb.batch});
    space.gpu_counts = {pb.gpus};
    ParallelConfig pc;
    pc.tensor_parallel = pb.t;
    pc.pipeline_parallel = pb.p;
    pc.data_parallel = pb.gpus / (pb.t * pb.p);
    pc.global_batch_size = pb.batch;
    pc.recompute = "full";
    pc.schedule = pb.p > 1 ? "interleaved" : "1f1b";
    pc.virtual_stages = pb.p > 1 ? 2 : 1;
    SearchConfig c;
    std::string why;
    ASSERT_TRUE(config_from_parallel(space, pc, &c, &why)) << why;
    // Both scored by the discrete-event simulator (the search's final tier).
    const Evaluated published = evaluate_config_des(CostModel(pr, space), reg, c);
    ASSERT_TRUE(published.feasible) << pb.model << ": " << published.why_not;
    ASSERT_EQ(published.tier, Tier::kDes);
    const SearchResult r = run_search(pr, space, reg, SearchOptions{});
    ASSERT_FALSE(r.top.empty());
    EXPECT_EQ(r.top[0].tier, Tier::kDes);
    EXPECT_LE(r.top[0].iteration, published.iteration) << pb.model;
  }
}

TEST(Search, ModelThatCannotFitSaysHowMuchMemoryItNeeds) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("megatron-1008b", 8);
  const SearchSpace space = default_space(pr, reg, {64});
  const SearchResult r = run_search(pr, space, reg, SearchOptions{});
  EXPECT_TRUE(r.top.empty());
  // 1008B parameters over 8 GPUs with ZeRO-3 and offload still hold 4 bytes per parameter
  // share of weights and gradients: at least 1.0e12 * 4 / 8 / 8 (d = 8 at best) ... the bound
  // must exceed the 80 GB available.
  EXPECT_GT(r.min_memory_needed, 80e9);
}

}  // namespace
}  // namespace pw
