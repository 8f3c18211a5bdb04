#include "report/scenario_compare.h"

#include <gtest/gtest.h>

#include "core/error.h"

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
    ASSERT_EQ(s.peak_memory_bytes.size(), s.result.device.size());
    // Peak bytes per device = static memory + activation peak (the latter reported in GiB).
    for (std::size_t d = 0; d < s.peak_memory_bytes.size(); ++d)
      EXPECT_GE(s.peak_memory_bytes[d], s.result.device[d].peak_memory * kGiB);
  }
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

TEST(CompareOnScenario, UnknownScheduleIsAnError) {
  const hw::Scenario sc =
      hw::load_scenario(std::string(PW_SOURCE_DIR) + "/scenarios/gpt3-175b-1024-a100.yaml");
  EXPECT_THROW(compare_on_scenario(sc, {"1f1b", "zb-h7"}), ConfigError);
}

}  // namespace
}  // namespace pw
