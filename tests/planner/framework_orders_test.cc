// Schedule orders on their way to a framework: the microbatch group of Megatron's interleaved
// order (a scenario key, read back from a plan's order, written as each framework names it), and
// orders under a native schedule name that are not that schedule's.
#include <gtest/gtest.h>

#include "core/pytorch_csv.h"
#include "hwmodels/scenario.h"
#include "planner/search/scenario_input.h"
#include "tests/planner/frameworks_test_util.h"

namespace pw {
namespace {

using testing::compute_only;
using testing::make_plan;
using testing::parse_args;
using testing::parse_toml;
using testing::refusal_key;

// Megatron's interleaved schedule runs microbatches in groups of g per chunk
// (`microbatch_group_size_per_vp_stage`, p <= g <= m, m mod g zero or at least p; default p). A
// plan's order names its g: exported as Megatron's flag and NeMo's strategy key when it is not p,
// run from a CSV by torchtitan (PyTorch's Interleaved1F1B runs rounds of p when p divides m), and
// refused by Megatron and NeMo when no g gives the order.
TEST(Frameworks, InterleavedMicrobatchGroupSizeTravelsWithThePlan) {
  // Every group Megatron accepts at p = 4, m = 12 (4, 6, 7, 8, 12: 5, 9, 10 and 11 leave a last
  // group of 2, 3, 2 and 1 < p) is read back from its own order.
  for (int g = 4; g <= 12; ++g) {
    GeneratorParams gp;
    gp.p = 4;
    gp.m = 12;
    gp.v = 2;
    gp.group_size = g;
    const bool accepted = 12 % g == 0 || 12 % g >= 4;
    if (!accepted) {
      EXPECT_THROW(generate_schedule(default_registry(), "interleaved", gp), ConfigError) << g;
      continue;
    }
    const Schedule s = generate_schedule(default_registry(), "interleaved", gp);
    EXPECT_EQ(interleaved_group_of(s), g);
    EXPECT_EQ(interleaved_group_of(complete_for_execution(s, 1)), g) << "lowered transfers";
  }
  const Plan g6 =
      make_plan("llama3-8b", "interleaved", 1, 1, 4, 2, 2, std::vector<int>(8, 4), 12, 6);
  const Plan g4 = make_plan("llama3-8b", "interleaved", 1, 1, 4, 2, 2, std::vector<int>(8, 4), 12);
  auto megatron = [](const Plan& p) {
    return parse_args(export_plan(p, Framework::kMegatron, "p", "").text);
  };
  EXPECT_EQ(megatron(g6).at("--microbatch-group-size-per-virtual-pipeline-stage"), "6");
  EXPECT_EQ(megatron(g4).count("--microbatch-group-size-per-virtual-pipeline-stage"), 0u);
  const std::string nemo6 = export_plan(g6, Framework::kNemo, "p", "").text;
  EXPECT_NE(nemo6.find("\ntrainer.strategy.microbatch_group_size_per_vp_stage=6\n"),
            std::string::npos)
      << nemo6;
  EXPECT_EQ(export_plan(g4, Framework::kNemo, "p", "").text.find("microbatch_group_size"),
            std::string::npos);
  // torchtitan: g = p with p | m is PyTorch's own class; g = 6 travels as a CSV of the order.
  const FrameworkExport t4 = export_plan(g4, Framework::kTorchtitan, "p", "sched.csv");
  EXPECT_TRUE(t4.csv_path.empty());
  EXPECT_EQ(parse_toml(t4.text).at("parallelism.pipeline_parallel_schedule"),
            "\"Interleaved1F1B\"");
  const FrameworkExport t6 = export_plan(g6, Framework::kTorchtitan, "p", "sched.csv");
  EXPECT_EQ(t6.csv_path, "sched.csv");
  EXPECT_EQ(parse_toml(t6.text).at("parallelism.pipeline_parallel_schedule_csv"), "\"sched.csv\"");
  CsvImportOptions io;
  io.stage_map = "loop";
  EXPECT_EQ(schedule_from_pytorch_csv(t6.csv_text, "sched.csv", io).actions,
            compute_only(g6.schedule).actions);
  // The looped breadth-first order under the name "interleaved": no group gives it (every rank
  // runs all its forwards first, where Megatron's rank 0 runs 2(p-1) + (v-1)g of them).
  Plan bf = make_plan("llama3-8b", "breadth-first", 1, 1, 4, 2, 2, std::vector<int>(8, 4));
  bf.config.schedule = "interleaved";
  EXPECT_EQ(interleaved_group_of(bf.schedule), 0);
  for (Framework fw : {Framework::kMegatron, Framework::kNemo}) {
    const std::string why = refusal_key(bf, fw);
    EXPECT_EQ(why.rfind("schedule | the plan's order is not ", 0), 0u) << why;
    EXPECT_NE(why.find("for any microbatch group size"), std::string::npos) << why;
  }
  EXPECT_FALSE(export_plan(bf, Framework::kTorchtitan, "p", "sched.csv").csv_path.empty());
}

// A schedule a framework runs by name runs the framework's own order: a plan whose order under
// that name is another (edited, or imported and named so) is refused by the frameworks without a
// CSV runtime, and torchtitan runs it from a CSV of the exact order.
TEST(Frameworks, AnOrderThatIsNotTheNamedOnesIsNotExportedUnderTheName) {
  Plan plan = make_plan("llama3-8b", "1f1b", 1, 1, 4, 2, 1, std::vector<int>(4, 8));
  for (Framework fw : {Framework::kMegatron, Framework::kNemo, Framework::kDeepspeed})
    EXPECT_EQ(refusal_key(plan, fw), "") << "the generator's own 1F1B exports";
  EXPECT_TRUE(export_plan(plan, Framework::kTorchtitan, "p", "sched.csv").csv_path.empty());
  // The last rank's second forward moved ahead of its first backward: F0 F1 B0 B1 ... (a valid
  // order, GPipe-like there), still named 1f1b.
  std::vector<Action>& last = plan.schedule.actions[3];
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < last.size(); ++i)
    if (is_compute(last[i].kind)) at.push_back(i);
  ASSERT_GE(at.size(), 3u);
  ASSERT_EQ(last[at[1]].kind, ActionKind::kBW);
  ASSERT_EQ(last[at[2]].kind, ActionKind::kF);
  std::swap(last[at[1]], last[at[2]]);
  for (Framework fw : {Framework::kMegatron, Framework::kNemo, Framework::kDeepspeed}) {
    const std::string why = refusal_key(plan, fw);
    EXPECT_EQ(why.rfind("schedule | the plan's order is not ", 0), 0u) << why;
    EXPECT_NE(why.find("'1f1b'"), std::string::npos) << why;
  }
  const FrameworkExport t = export_plan(plan, Framework::kTorchtitan, "p", "sched.csv");
  EXPECT_EQ(t.csv_path, "sched.csv");
  CsvImportOptions io;
  io.stage_map = "loop";
  EXPECT_EQ(schedule_from_pytorch_csv(t.csv_text, "sched.csv", io).actions,
            compute_only(plan.schedule).actions);
}

// A scenario's microbatch_group_size_per_vp_stage is the order every tier simulates: the
// scenario's schedule is the interleaved generator's with that group, and it reads back as it.
TEST(Frameworks, AScenariosInterleavedGroupSizeIsTheOrderItSimulates) {
  const std::string text = R"(model: {preset: llama3-8b, seq_length: 2048}
cluster: {profile: dgx-h100, nodes: 1}
parallel:
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 4
  num_layers_per_virtual_pipeline_stage: 4
  micro_batch_size: 1
  global_batch_size: 12
  microbatch_group_size_per_vp_stage: 6
)";
  const hw::Scenario s = hw::parse_scenario(text, "g.yaml", "");
  ASSERT_EQ(s.num_microbatches(), 12);
  const IterationInput in = scenario_iteration_input(s);
  EXPECT_EQ(interleaved_group_of(in.schedule), 6);
  GeneratorParams gp;
  gp.p = 4;
  gp.m = 12;
  gp.v = 2;
  gp.group_size = 6;
  EXPECT_EQ(compute_only(in.schedule).actions,
            generate_schedule(default_registry(), "interleaved", gp).actions);
}

}  // namespace
}  // namespace pw
