// A model with sliding-window attention in the planner: no context parallelism searched or
// taken (its ring over a window is not modelled), the window carried to Megatron's arguments,
// and refused by the frameworks that build models from their own recipes and flavors.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "frameworks_test_util.h"
#include "planner/search/search.h"
#include "search_test_util.h"

namespace pw {
namespace {

using testing::make_plan;
using testing::parse_args;
using testing::problem;

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(SlidingWindowPlan, ContextParallelismIsNeitherSearchedNorTaken) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr = problem("mistral-7b", 16);
  pr.sim.flash_attention = true;
  const SearchSpace windowed = default_space(pr, reg, {64});
  EXPECT_EQ(windowed.context_parallel, std::vector<int>{1});
  // Without the window the same 8,192-token model searches cp 2 and 4 (each rank >= 2,048).
  PlanProblem full = pr;
  full.model.window_size = 0;
  const SearchSpace plain = default_space(full, reg, {64});
  EXPECT_TRUE(has(plain.context_parallel, 2));
  EXPECT_TRUE(has(plain.context_parallel, 4));
  SearchConstraints c;
  c.cp = {1, 2};
  SearchSpace s = windowed;
  try {
    constrain_space(c, pr.model, pr.num_gpus, &s);
    ADD_FAILURE() << "--cp 1,2 taken with a window";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--cp 1,2") << e.what();
  }
  s = plain;
  constrain_space(c, full.model, full.num_gpus, &s);  // without the window: taken
  EXPECT_EQ(s.context_parallel, (std::vector<int>{1, 2}));
}

TEST(SlidingWindowPlan, MegatronGetsTheWindowAndRecipeFrameworksRefuseIt) {
  const Plan plan = make_plan("mistral-7b", "1f1b", 2, 1, 4, 2, 1, {8, 8, 8, 8});
  const auto a = parse_args(export_plan(plan, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.at("--window-size"), "4096,0");  // Megatron's (left, right) tuple_type
  EXPECT_EQ(a.at("--seq-length"), "8192");
  Plan inert = plan;
  inert.model.window_size = 8191;  // masks nothing at 8,192 tokens: no flag
  EXPECT_EQ(
      parse_args(export_plan(inert, Framework::kMegatron, "p", "").text).count("--window-size"),
      0u);
  for (Framework fw : {Framework::kTorchtitan, Framework::kNemo}) {
    try {
      export_plan(plan, fw, "p", "");
      ADD_FAILURE() << framework_name(fw);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "model") << e.what();
    }
  }
}

}  // namespace
}  // namespace pw
