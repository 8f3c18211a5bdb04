// Runs `pipewright plan` as a user would: the report draws the plan it emits.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_io.h"
#include "core/plan_io.h"

namespace pw {
namespace {

std::size_t occurrences(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

TEST(PlanCli, ReportDrawsEveryComputePassOfTheEmittedPlanAndThePareto) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("pw_plan_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string html = (dir / "plan.html").string(), plan = (dir / "plan.yaml").string();
  const std::string cmd = std::string(PW_BINARY_DIR) + "/tools/pipewright plan " + PW_SOURCE_DIR +
                          "/scenarios/megatron/weak-scaling-1.7b.yaml --top 1 " + "--emit " + plan +
                          " --report " + html + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const Plan p = load_plan(plan);
  std::size_t compute = 0;
  for (const auto& dev : p.schedule.actions)
    for (const Action& a : dev) compute += is_compute(a.kind) ? 1 : 0;
  const std::string page = read_file(html);
  // One timeline block per compute pass of the best plan (the emitted plan's SEND/RECV are the
  // lowering's, not passes).
  EXPECT_EQ(occurrences(page, "class=\"blk "), compute);
  EXPECT_NE(page.find("Pareto front"), std::string::npos);
  std::filesystem::remove_all(dir);
}

std::string pipewright() { return std::string(PW_BINARY_DIR) + "/tools/pipewright"; }

// `plan --shortest-time` on the Megatron 1.7B scenario to 2.5 nats. Hand values (see
// tests/planner/shortest_time_test.cc): B_crit = 2.1e8 / 2.5^(1/0.21) = 2.6746e6 tokens,
// S_min = 2100 / (2.5 - 2.2719)^(1/0.76) = 14,679 steps, batches 2^7..2^13 sequences.
TEST(PlanCli, ShortestTimeReportsCriticalBatchAndTheFastestPoint) {
  const auto out =
      std::filesystem::temp_directory_path() / ("pw_plan_st_" + std::to_string(::getpid()));
  const std::string cmd = pipewright() + " plan " + PW_SOURCE_DIR +
                          "/scenarios/megatron/weak-scaling-1.7b.yaml --shortest-time "
                          "--target-loss 2.5 --max-gpus 64 --format json > " +
                          out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const nlohmann::json j = nlohmann::json::parse(read_file(out.string()));
  std::filesystem::remove(out);
  EXPECT_NEAR(j["critical_batch_tokens"].get<double>() / 2.6746e6, 1.0, 1e-3);
  EXPECT_NEAR(j["s_min"].get<double>() / 14679, 1.0, 1e-3);
  ASSERT_TRUE(j["feasible"].get<bool>());
  double fastest = 1e300;
  int lo = 1 << 30, hi = 0;
  for (const auto& p : j["points"]) {
    const int b = p["global_batch"].get<int>();
    lo = std::min(lo, b);
    hi = std::max(hi, b);
    EXPECT_LE(p["gpus"].get<int>(), 64);
    // steps = S_min (1 + B_crit / (B x 2048))
    EXPECT_NEAR(p["steps"].get<double>() / (14679 * (1 + 2.6746e6 / (b * 2048.0))), 1.0, 2e-3);
    if (p["feasible"].get<bool>()) fastest = std::min(fastest, p["days"].get<double>());
  }
  EXPECT_EQ(lo, 128);
  EXPECT_EQ(hi, 8192);
  EXPECT_DOUBLE_EQ(j["best"]["days"].get<double>(), fastest);
  EXPECT_NE(j["best"]["bounded_by"].get<std::string>().find("critical batch"), std::string::npos);
}

TEST(PlanCli, ShortestTimeRejectsAZeroGpuCeiling) {
  const std::string cmd = pipewright() + " plan --shortest-time --max-gpus 0 > /dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

}  // namespace
}  // namespace pw
