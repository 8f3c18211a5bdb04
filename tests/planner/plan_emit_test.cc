// Emitted plans validate, carry explicit communication and predicted times, and round-trip.
#include "planner/plan_emit.h"

#include <gtest/gtest.h>

#include "core/lowering.h"
#include "core/plan_io.h"
#include "core/validator.h"
#include "planner/search.h"

namespace pw {
namespace {

TEST(PlanEmit, BestPlanValidatesAndLoadsBackIdentically) {
  PlanProblem pr;
  ASSERT_TRUE(model_preset("megatron-7.5b", &pr.model));
  ASSERT_TRUE(gpu_node_preset("dgx-a100-80gb", &pr.gpu));
  pr.num_gpus = 32;
  const GeneratorRegistry reg = default_registry();
  SearchSpace space = default_space(pr, reg, {128});
  const SearchResult r = run_search(pr, space, reg, SearchOptions{});
  ASSERT_FALSE(r.top.empty());
  // Force a pipelined configuration so the plan has communication to lower.
  SearchConfig c = r.top[0].config;
  for (const Evaluated& e : r.pareto)
    if (e.config.p > 1) c = e.config;
  const CostModel model(pr, space);
  const Plan plan =
      build_plan(model, reg, c, "dgx-a100-80gb", Provenance{"pipewright 0.1.0", "", "", ""});
  EXPECT_EQ(check_schedule(plan.schedule), "");
  EXPECT_EQ(plan.rank_to_gpu.size(), static_cast<std::size_t>(c.p));
  EXPECT_EQ(plan.predicted.size(), plan.schedule.total_actions());
  if (c.p > 1) {
    EXPECT_TRUE(has_explicit_communication(plan.schedule));
    EXPECT_EQ(plan.rank_to_gpu[1], c.t * c.d);  // Megatron order: tensor, then data, then pipe
  }
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson}) {
    const Plan back = parse_plan(plan_to_text(plan, f), f, "round trip");
    EXPECT_EQ(back, plan);
  }
  // Predicted iteration includes the data-parallel and optimizer time beyond the makespan.
  TimePs last = 0;
  for (const ActionTiming& t : plan.predicted) last = std::max(last, t.end);
  EXPECT_GE(plan.predicted_iteration, last);
}

}  // namespace
}  // namespace pw
