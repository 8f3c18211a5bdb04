// Runs `pipewright plan` as a user would: the report draws the plan it emits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
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

}  // namespace
}  // namespace pw
