#include "report/scenario_compare.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/search/scenario_input.h"
#include "sim/iteration.h"

namespace pw {
namespace {

TEST(CompareOnScenario, FillsThroughputAndMemory) {
  const hw::Scenario sc =
      hw::load_scenario(std::string(PW_SOURCE_DIR) + "/scenarios/gpt3-175b-1024-a100.yaml");
  const ReportInput in = compare_on_scenario(sc, {"1f1b", "v-zb"});
  ASSERT_EQ(in.schedules.size(), 2u);
  for (const ScheduleReport& s : in.schedules) {
    ASSERT_TRUE(s.ok()) << s.name << ": " << s.error;
    ASSERT_TRUE(s.tokens_per_second && s.mfu && s.fits && s.iteration_time);
    // tokens/s = global batch x sequence length / iteration time.
    const double expect = static_cast<double>(sc.parallel.global_batch_size) * sc.model.seq_length /
                          ps_to_seconds(*s.iteration_time);
    EXPECT_NEAR(*s.tokens_per_second, expect, expect * 1e-6) << s.name;
    // The iteration adds exposed DP reduction and the optimizer to the pipeline's makespan.
    EXPECT_GE(*s.iteration_time, s.result.makespan) << s.name;
    // One simulated GPU per pipeline rank, its peak (everything it holds) drawn in GB.
    ASSERT_EQ(s.peak_memory_bytes.size(), s.result.device.size());
    for (std::size_t d = 0; d < s.peak_memory_bytes.size(); ++d)
      EXPECT_NEAR(s.peak_memory_bytes[d], s.result.device[d].peak_memory * 1e9, 1.0);
  }
  EXPECT_EQ(in.memory_unit, "GB");
  EXPECT_TRUE(in.memory_total);
}

// The scenario's own schedule in compare against `simulate SCENARIO` (the same options).
void expect_as_simulated(const hw::Scenario& sc) {
  IterationOptions opt;
  opt.flash_attention = sc.flash_attention;
  const IterationResult sim = simulate_iteration(scenario_iteration_input(sc), opt);
  const ReportInput in = compare_on_scenario(sc, {sc.parallel.schedule});
  ASSERT_TRUE(in.schedules[0].ok()) << in.schedules[0].error;
  EXPECT_EQ(*in.schedules[0].iteration_time, sim.iteration) << sc.file;
}

// The scenario's own schedule reads what `simulate SCENARIO` gives it (the DES on the
// scenario's split: a layout's interleaved chunks of their own sizes, a multi-token prediction
// depth on a stage of its own); a schedule of another stage count takes the planner's even
// split. Before 2026-11-29 compare priced every schedule with the fixed-cost evaluator on an
// even split: 405.5 ms for 1F1B whatever the layout, where `simulate` read 409.2 ms (even),
// 436.3 ms (16 layers on the third stage) and 464.7 ms (and the depth there too).
TEST(CompareOnScenario, TheScenariosOwnScheduleIsWhatSimulateGives) {
  for (const char* text :
       {"model: {preset: megatron-1.7b}\n"
        "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
        "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1,\n"
        "  pipeline_model_parallel_layout: \"Et*2|(t*3|)*6,t*4L\", global_batch_size: 16}\n",
        "model: {preset: llama3-8b, mtp_num_layers: 1, seq_length: 2048}\n"
        "cluster: {profile: dgx-h100, nodes: 1}\n"
        "parallel: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 4,\n"
        "  micro_batch_size: 1, global_batch_size: 8, sequence_parallel: true,\n"
        "  pipeline_model_parallel_layout: \"Et*8|t*8|t*16m|L\"}\n"}) {
    const hw::Scenario sc = hw::parse_scenario(text, "s.yaml", ".");
    ASSERT_TRUE(sc.uneven_split());
    expect_as_simulated(sc);
  }
  // Megatron's interleaved schedule at v = 5 (Llama 3.1 70B on 64 H100s), a v the planner's
  // probe does not register: compare ran it at v = 2 (14.49 s against simulate's 14.39 s).
  const hw::Scenario llama = hw::load_scenario(std::string(PW_SOURCE_DIR) +
                                               "/scenarios/h100/dgxc-2411-llama3170b-bf16-64.yaml");
  ASSERT_EQ(llama.parallel.virtual_stages, 5);
  expect_as_simulated(llama);
}

// compare prices the scenario's own gradient precision and overlaps, as plan does: the 64-GPU
// Llama 3.1 70B row reduces bf16 gradients overlapped with the backward and overlaps its TP
// collectives; the same scenario with fp32 gradients reduced after the backward and no TP
// overlap moves twice the reduction bytes, exposed, so it reads slower (it read the same before
// compare and plan shared plan_problem).
TEST(CompareOnScenario, UsesTheScenariosGradientPrecisionAndOverlaps) {
  hw::Scenario sc = hw::load_scenario(std::string(PW_SOURCE_DIR) +
                                      "/scenarios/h100/dgxc-2411-llama3170b-bf16-64.yaml");
  ASSERT_FALSE(sc.parallel.grad_reduce_in_fp32);
  ASSERT_TRUE(sc.parallel.overlap_grad_reduce && sc.parallel.tp_comm_overlap);
  const ReportInput as_given = compare_on_scenario(sc, {"interleaved"});
  sc.parallel.grad_reduce_in_fp32 = true;
  sc.parallel.overlap_grad_reduce = false;
  sc.parallel.tp_comm_overlap = false;
  const ReportInput plain = compare_on_scenario(sc, {"interleaved"});
  ASSERT_TRUE(as_given.schedules[0].ok() && plain.schedules[0].ok());
  EXPECT_LT(*as_given.schedules[0].iteration_time, *plain.schedules[0].iteration_time);
  EXPECT_LT(*as_given.schedules[0].exposed_comm, *plain.schedules[0].exposed_comm);
}

// Without a pipeline (p = 1) the one stage runs its passes in order whatever the schedule: the
// scenario's own run reads what `simulate` gives it and every other schedule says why it is not
// a row of its own. Before 2026-11-29 every row, 1F1B's too, read "could not be built: not a
// valid configuration" (the planner's p = 1 rule asks for its first, plain linear option,
// which compare's option list did not put first).
TEST(CompareOnScenario, WithoutAPipelineTheOneRunIsTheScenariosOwn) {
  const hw::Scenario sc = hw::load_scenario(std::string(PW_SOURCE_DIR) +
                                            "/scenarios/h100/dgxc-2411-llama318b-bf16-8.yaml");
  ASSERT_EQ(sc.parallel.pipeline_parallel, 1);
  ASSERT_EQ(sc.parallel.schedule, "1f1b");
  expect_as_simulated(sc);
  const ReportInput in = compare_on_scenario(sc, {"1f1b", "zb-h1", "v-zb"});
  ASSERT_EQ(in.schedules.size(), 3u);
  EXPECT_TRUE(in.schedules[0].ok()) << in.schedules[0].error;
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_FALSE(in.schedules[i].ok());
    EXPECT_NE(in.schedules[i].error.find("pipeline_model_parallel_size is 1"), std::string::npos)
        << in.schedules[i].error;
  }
}

TEST(CompareOnScenario, UnknownScheduleIsAnError) {
  const hw::Scenario sc =
      hw::load_scenario(std::string(PW_SOURCE_DIR) + "/scenarios/gpt3-175b-1024-a100.yaml");
  EXPECT_THROW(compare_on_scenario(sc, {"1f1b", "zb-h7"}), ConfigError);
}

}  // namespace
}  // namespace pw
