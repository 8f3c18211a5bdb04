// One scenario reader for every command: every bundled scenario is accepted by `estimate`,
// `simulate`, `compare`, `plan` (restricted to the scenario's own configuration, so the search
// stays small) and, as a directory, `validate`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/file_io.h"

namespace {

int sh(const std::string& cmd, std::string* out) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) *out += buf;
  const int st = pclose(pipe);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

const std::string kTool = std::string(PW_BINARY_DIR) + "/tools/pipewright";

TEST(ScenarioCommands, EveryBundledScenarioIsReadByEveryCommand) {
  int files = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(PW_SOURCE_DIR) + "/scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    const std::string f = e.path().string();
    for (const std::string& cmd :
         {kTool + " estimate " + f + " --format json", kTool + " simulate " + f + " --format json",
          kTool + " compare " + f + " --schedules 1f1b",
          // The scenario's own t and p, the planner's smallest search on it, ranked by the
          // evaluator (the DES tier is exercised elsewhere).
          kTool + " plan " + f + " --des-top 0 --top 1 --microbatch-size 1 --schedules 1f1b " +
              "--recompute full --zero 0 --offload off --sequence-parallel off"}) {
      std::string out;
      EXPECT_EQ(sh(cmd, &out), 0) << cmd << "\n" << out.substr(0, 2000);
    }
  }
  EXPECT_GE(files, 23);
  std::string out;
  EXPECT_EQ(sh(kTool + " validate " + PW_SOURCE_DIR + "/scenarios", &out), 0) << out;
  EXPECT_NE(out.find("scenarios with published figures"), std::string::npos) << out;
}

}  // namespace
