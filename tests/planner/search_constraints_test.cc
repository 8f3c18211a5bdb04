// Search constraints (`pipewright plan --tp ... --schedules ...`): every configuration the
// search scores satisfies them, a subset of the space never beats the whole space, the result
// stays deterministic, and contradictions are refused naming the flags.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "hwmodels/profile.h"
#include "planner/search/screen.h"
#include "planner/search/search.h"

namespace pw {
namespace {

PlanProblem problem(const std::string& model, int gpus) {
  PlanProblem pr;
  EXPECT_TRUE(model_preset(model, &pr.model));
  pr.profile = hw::resolve_profile("dgx-a100-80gb", "", "", "");
  pr.num_gpus = gpus;
  return pr;
}

SearchOptions exhaustive_evaluator() {
  SearchOptions o;
  o.des_top = 0;  // the evaluator's ranking: branch and bound makes it exact
  o.keep_all = true;
  o.max_evaluations = 1 << 30;
  return o;
}

bool in(const std::vector<int>& list, int x) {
  return list.empty() || std::find(list.begin(), list.end(), x) != list.end();
}

// The ConfigError's key (the flags it names) for `c`, or "" when constrain_space accepts it.
std::string refused(const SearchConstraints& c, const PlanProblem& pr, SearchSpace space) {
  try {
    constrain_space(c, pr.model, pr.num_gpus, &space);
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "";
}

TEST(SearchConstraints, EveryScoredConfigurationSatisfiesThem) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("megatron-1.7b", 16);  // 24 heads, 24 layers
  SearchSpace space = default_space(pr, reg, {64});
  SearchConstraints c;
  c.tp = {1, 2};
  c.pp = {2, 4};
  c.micro_batch = {1, 2};
  c.schedules = {"1f1b", "zb-h1", "interleaved"};
  c.recompute = {Recompute::kNone, Recompute::kFull};
  c.zero = {0, 1};
  c.sequence_parallel = {0};
  c.offload = {0};
  constrain_space(c, pr.model, pr.num_gpus, &space);
  const SearchResult r = run_search(pr, space, reg, exhaustive_evaluator());
  ASSERT_GT(r.all.size(), 10u);
  ASSERT_FALSE(r.top.empty());
  for (const Evaluated& e : r.all) {
    const SearchConfig& x = e.config;
    const std::string what = describe_config(space, x);
    EXPECT_TRUE(in(c.tp, x.t) && in(c.pp, x.p) && in(c.micro_batch, x.micro_batch)) << what;
    EXPECT_NE(std::find(c.schedules.begin(), c.schedules.end(), space.schedules[x.schedule].name),
              c.schedules.end())
        << what;
    EXPECT_NE(static_cast<Recompute>(x.recompute), Recompute::kSelective) << what;
    EXPECT_LE(x.zero, 1) << what;
    EXPECT_EQ(x.sequence_parallel, 0) << what;
    EXPECT_EQ(x.offload, 0) << what;
    EXPECT_EQ(x.global_batch(), 64) << what;
    EXPECT_LE(x.gpus(), 16) << what;
  }
}

TEST(SearchConstraints, GpusUsesExactlyThatCount) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("megatron-1.7b", 32);
  SearchSpace space = default_space(pr, reg, {64});
  ASSERT_GT(space.gpu_counts.size(), 1u);  // the default sweeps 32, 16, 8
  SearchConstraints c;
  c.gpus = 16;
  c.pp = {2};
  constrain_space(c, pr.model, pr.num_gpus, &space);
  EXPECT_EQ(space.gpu_counts, std::vector<int>{16});
  const SearchResult r = run_search(pr, space, reg, exhaustive_evaluator());
  ASSERT_FALSE(r.all.empty());
  for (const Evaluated& e : r.all) {
    EXPECT_EQ(e.config.gpus(), 16);
    EXPECT_EQ(e.config.p, 2);
  }
}

// A subset of the space cannot win: the constrained best is at best equal to the unconstrained
// best (same evaluator, exact ranking), and it is the best of the constrained rows of an
// unconstrained exhaustive search.
TEST(SearchConstraints, ASubsetNeverBeatsTheWholeSpace) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("megatron-1.7b", 16);
  SearchSpace whole = default_space(pr, reg, {64});
  whole.gpu_counts = {16};
  whole.micro_batches = {1, 2};
  whole.zero = {0, 1};
  whole.end_trim = {0, 1};
  SearchSpace part = whole;
  SearchConstraints c;
  c.tp = {2};
  c.pp = {4};
  c.schedules = {"1f1b", "interleaved"};
  constrain_space(c, pr.model, pr.num_gpus, &part);
  SearchOptions o = exhaustive_evaluator();
  o.prune = false;
  const SearchResult all = run_search(pr, whole, reg, o);
  const SearchResult sub = run_search(pr, part, reg, exhaustive_evaluator());
  ASSERT_FALSE(all.top.empty());
  ASSERT_FALSE(sub.top.empty());
  EXPECT_FALSE(sub.stats.budget_hit);
  EXPECT_GE(sub.top[0].objective, all.top[0].objective);
  double best_in_subset = 1e300;
  for (const Evaluated& e : all.all) {
    const std::string& name = whole.schedules[e.config.schedule].name;
    if (e.feasible && e.config.t == 2 && e.config.p == 4 &&
        (name == "1f1b" || name == "interleaved"))
      best_in_subset = std::min(best_in_subset, e.objective);
  }
  EXPECT_DOUBLE_EQ(sub.top[0].objective, best_in_subset);
}

TEST(SearchConstraints, ResultDoesNotDependOnThreadCount) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("megatron-1.7b", 16);
  SearchSpace space = default_space(pr, reg, {64});
  SearchConstraints c;
  c.pp = {2, 4};
  c.schedules = {"zb-h1", "1f1b"};
  constrain_space(c, pr.model, pr.num_gpus, &space);
  SearchOptions o;
  o.des_top = 0;
  o.threads = 1;
  const SearchResult one = run_search(pr, space, reg, o);
  o.threads = 2;
  const SearchResult two = run_search(pr, space, reg, o);
  ASSERT_EQ(one.top.size(), two.top.size());
  for (std::size_t i = 0; i < one.top.size(); ++i) {
    EXPECT_EQ(one.top[i].config, two.top[i].config);
    EXPECT_EQ(one.top[i].iteration, two.top[i].iteration);
  }
}

TEST(SearchConstraints, ContradictionsNameTheFlags) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("gpt3-175b", 1024);  // 96 heads, 96 layers
  const SearchSpace space = default_space(pr, reg, {1536});
  SearchConstraints c;
  c.tp = {5};  // 96 = 2^5 * 3: 5 does not divide the heads
  EXPECT_EQ(refused(c, pr, space), "--tp 5");
  c = {};
  c.pp = {128};  // more stages than layers
  EXPECT_EQ(refused(c, pr, space), "--pp 128");
  c = {};
  c.tp = {16};
  c.pp = {64};
  c.dp = {2};  // 16 * 64 * 2 = 2048 > 1024
  EXPECT_EQ(refused(c, pr, space), "--tp 16 --pp 64 --dp 2");
  c = {};
  c.tp = {3};  // divides 96 heads, but no power-of-two GPU count
  EXPECT_EQ(refused(c, pr, space), "--tp 3");
  c = {};
  c.gpus = 2048;
  EXPECT_EQ(refused(c, pr, space), "--gpus 2048");
  c = {};
  c.schedules = {"interleavd"};
  EXPECT_EQ(refused(c, pr, space), "--schedules interleavd");
  c = {};
  c.pp = {1};
  c.schedules = {"zb-v"};  // a V schedule has two stages per GPU
  EXPECT_EQ(refused(c, pr, space), "--pp 1 --schedules zb-v");
  c = {};
  c.schedules = {"1f1b-r"};
  c.recompute = {Recompute::kNone};
  EXPECT_EQ(refused(c, pr, space), "--schedules 1f1b-r --recompute none");
  c = {};
  c.tp = {1};
  c.sequence_parallel = {1};
  EXPECT_EQ(refused(c, pr, space), "--tp 1 --sequence-parallel on");
  c = {};
  c.dp = {1};
  c.zero = {2, 3};
  EXPECT_EQ(refused(c, pr, space), "--dp 1 --zero 2,3");
  c = {};
  c.micro_batch = {7};  // 1536 = 2^9 * 3
  EXPECT_EQ(refused(c, pr, space), "--microbatch-size 7");
  c = {};
  c.zero = {4};
  EXPECT_EQ(refused(c, pr, space), "--zero 4");
  c = {};
  c.tp = {8};
  c.pp = {8};
  c.schedules = {"interleaved"};
  EXPECT_EQ(refused(c, pr, space), "");
}

// NAME:vK pins the chunks per device of a schedule that takes v. GPT-3 has 96 layers; the
// default space searches v in {2, 3, 4, 6, 8}; with p = 16, p*v <= 96 leaves v <= 6.
TEST(SearchConstraints, ScheduleWithVKeepsOnlyThatV) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem pr = problem("gpt3-175b", 1024);
  SearchSpace space = default_space(pr, reg, {1536});
  SearchConstraints c;
  c.tp = {8};
  c.pp = {8};
  c.schedules = {"interleaved:v3", "1f1b"};
  constrain_space(c, pr.model, pr.num_gpus, &space);
  ASSERT_EQ(space.schedules.size(), 2u);
  for (const ScheduleOption& o : space.schedules) {
    if (o.name == "interleaved")
      EXPECT_EQ(o.v, 3);
    else
      EXPECT_EQ(o.name, "1f1b");
  }
  const SearchSpace whole = default_space(pr, reg, {1536});
  c = {};
  c.schedules = {"1f1b:v3"};  // 1f1b takes no v
  EXPECT_EQ(refused(c, pr, whole), "--schedules 1f1b:v3");
  c.schedules = {"interleaved:v1"};
  EXPECT_EQ(refused(c, pr, whole), "--schedules interleaved:v1");
  c.schedules = {"interleaved:v5"};  // not searched
  EXPECT_EQ(refused(c, pr, whole), "--schedules interleaved:v5");
  c.schedules = {"interleaved:3"};
  EXPECT_EQ(refused(c, pr, whole), "--schedules interleaved:3");
  c.pp = {16};
  c.schedules = {"interleaved:v8"};  // 16 * 8 = 128 stages > 96 layers
  SearchSpace s = whole;
  try {
    constrain_space(c, pr.model, pr.num_gpus, &s);
    ADD_FAILURE() << "interleaved:v8 with p = 16 accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--schedules interleaved:v8");
    EXPECT_NE(std::string(e.what()).find("valid: 2,3,4,6;"), std::string::npos) << e.what();
  }
}

TEST(SearchConstraints, DescribeSpellsTheCommandLine) {
  SearchConstraints c;
  EXPECT_TRUE(c.empty());
  c.gpus = 512;
  c.tp = {8};
  c.pp = {2, 4};
  c.schedules = {"1f1b", "zb-h1"};
  c.recompute = {Recompute::kSelective};
  c.sequence_parallel = {0, 1};
  c.offload = {0};
  EXPECT_EQ(c.describe(),
            "--gpus 512 --tp 8 --pp 2,4 --schedules 1f1b,zb-h1 --recompute selective "
            "--sequence-parallel both --offload off");
}

}  // namespace
}  // namespace pw

namespace pw {
namespace {

// Uneven splits: `trim` layers below an even share rounded up on the first stage and on the
// last; the middle stages share the rest evenly, the earlier ones one more.
TEST(SearchSplit, EndStagesAreTrimmedAloneOrTogether) {
  std::vector<int> s;
  ASSERT_TRUE(split_layers(24, 4, 1, 1, &s));  // 6 a stage; 5 on each end, 14 over the middle
  EXPECT_EQ(s, (std::vector<int>{5, 7, 7, 5}));
  ASSERT_TRUE(split_layers(24, 4, 0, 1, &s));  // 5 on the last, 19 over three: 7/6/6
  EXPECT_EQ(s, (std::vector<int>{7, 6, 6, 5}));
  // Published layouts: Llama 3 405B's 126 layers over 16 stages, one fewer on each end than
  // the 8 elsewhere; the zero-bubble paper's 1.5B model, 22 layers over 8 stages as 2/3/.../2.
  std::vector<int> llama(16, 8);
  llama.front() = llama.back() = 7;
  ASSERT_TRUE(split_layers(126, 16, 1, 1, &s));
  EXPECT_EQ(s, llama);
  ASSERT_TRUE(split_layers(22, 8, 1, 1, &s));
  EXPECT_EQ(s, (std::vector<int>{2, 3, 3, 3, 3, 3, 3, 2}));
  // DeepSeek-V3's 61 layers over 16 stages (4 a stage rounded up): 3 off the last leaves it 1
  // and 4 on every other; 2 off leaves it 2, and 59 over 15 is 4 on 14 and 3 on one.
  std::vector<int> deepseek(15, 4);
  deepseek.push_back(1);
  ASSERT_TRUE(split_layers(61, 16, 0, 3, &s));
  EXPECT_EQ(s, deepseek);
  deepseek.back() = 2;
  deepseek[14] = 3;
  ASSERT_TRUE(split_layers(61, 16, 0, 2, &s));
  EXPECT_EQ(s, deepseek);
  ASSERT_TRUE(split_layers(8, 2, 0, 1, &s));  // two stages: only the last trimmed
  EXPECT_EQ(s, (std::vector<int>{5, 3}));
  EXPECT_FALSE(split_layers(8, 2, 1, 1, &s));    // no middle stage to take the rest
  EXPECT_FALSE(split_layers(61, 16, 0, 4, &s));  // the last stage would hold no layer
  EXPECT_EQ(end_trim_label(end_trim_code(1, 0)), "1");
  EXPECT_EQ(end_trim_label(end_trim_code(1, 2)), "1/3");
}

// The depths on a stage of their own, the loss alone on the last (Megatron's mtp_standalone),
// by hand. Megatron's own DeepSeek-V3 layout "Et*3|(tt|)*29,m|L" (61 layers, 32 stages): the 31
// stages before the loss's take ceil(61/31) = 2 each, and a depths' stage trimmed by 2 holds
// none, so the 61 layers go over 30 stages: 3 on the first (61 = 30 x 2 + 1), 2 on the others.
TEST(SearchSplit, TheDepthsAloneBeforeTheLoss) {
  std::vector<int> s;
  ASSERT_TRUE(split_for_trim_code(61, 32, mtp_standalone_code(0, 2), &s));
  std::vector<int> megatron(32, 2);
  megatron[0] = 3;
  megatron[30] = megatron[31] = 0;
  EXPECT_EQ(s, megatron);
  // 61 over 16 stages, the depths' stage one below an even share of the 15 before the loss
  // (ceil(61/15) = 5): 4 there, and 57 over the 14 others, 4 each and the first one more.
  ASSERT_TRUE(split_for_trim_code(61, 16, mtp_standalone_code(0, 1), &s));
  std::vector<int> p16(16, 4);
  p16[0] = 5;
  p16[15] = 0;
  EXPECT_EQ(s, p16);
  // The first stage trimmed too: 4 there (5 - 1), 4 on the depths' stage, 53 over 13 stages:
  // 4 each and the first of them one more.
  ASSERT_TRUE(split_for_trim_code(61, 16, mtp_standalone_code(1, 1), &s));
  p16[0] = 4;
  p16[1] = 5;
  EXPECT_EQ(s, p16);
  // Two stages: all layers (and the depths) on the first, the loss on the second.
  ASSERT_TRUE(split_for_trim_code(8, 2, mtp_standalone_code(0, 0), &s));
  EXPECT_EQ(s, (std::vector<int>{8, 0}));
  EXPECT_FALSE(split_for_trim_code(8, 2, mtp_standalone_code(0, 1), &s));
  EXPECT_FALSE(split_for_trim_code(8, 1, mtp_standalone_code(0, 0), &s));
  // The codes of the splits that keep the depths with the loss are read as before.
  ASSERT_TRUE(split_for_trim_code(61, 16, end_trim_code(0, 2), &s));
  ASSERT_TRUE(split_layers(61, 16, 0, 2, &megatron));
  EXPECT_EQ(s, megatron);
  EXPECT_FALSE(is_mtp_standalone_code(end_trim_code(2, 13)));
  EXPECT_FALSE(is_mtp_standalone_code(kOwnSplit));
  EXPECT_EQ(first_trim(mtp_standalone_code(2, 7)), 2);
  EXPECT_EQ(last_trim(mtp_standalone_code(2, 7)), 7);
  EXPECT_EQ(end_trim_label(mtp_standalone_code(0, 2)), "0/2 mtp-alone");
}

// A model with multi-token prediction has the trims 0 and 1 searched again with the last stage
// trimmed further by the depths' work in layers, rounded down and up. DeepSeek-V3 at s = 4096,
// per token, model FLOPs: a mean layer about 6 x 0.58 B (GEMM weights a token uses: MLA 0.19 B,
// 9 experts' 3 x 7168 x 2048) + 6 s a (dqk + dv) = 1.0 G of attention, so 4.5 G; the depth a
// layer plus 6 x (2h^2 + hV) = 6.2 G: 10.7 / 4.5 = 2.4 layers, so 2 and 3. With the depths on a
// stage of their own, that stage is trimmed by their work without the head (which stays with
// the loss): a layer plus 6 x 2h^2 = 0.6 G, 5.1 / 4.5 = 1.1 layers, so 1 and 2, and not at all.
TEST(SearchSplit, MultiTokenPredictionTrimsTheLastStageFurther) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr = problem("deepseek-v3", 2048);
  pr.sim.flash_attention = true;
  const SearchSpace with = default_space(pr, reg, {15360});
  EXPECT_EQ(with.end_trim,
            (std::vector<int>{0, 1, 2, end_trim_code(0, 2), end_trim_code(1, 2),
                              end_trim_code(0, 3), end_trim_code(1, 3), mtp_standalone_code(0, 0),
                              mtp_standalone_code(0, 1), mtp_standalone_code(1, 1),
                              mtp_standalone_code(0, 2), mtp_standalone_code(1, 2)}));
  pr.model.mtp_num_layers = 0;
  EXPECT_EQ(default_space(pr, reg, {15360}).end_trim, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace pw
