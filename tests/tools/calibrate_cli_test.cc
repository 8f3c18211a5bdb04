// `pipewright calibrate` argument checks that need no measurement: a rank count below one is bad
// input (exit 2 naming --ranks), never silently the default, and no profile is written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/file_io.h"

namespace pw {
namespace {

TEST(CalibrateCli, RankCountBelowOneIsRejectedAndNothingIsWritten) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("pw_calib_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "p.yaml").string(), err = (dir / "err.txt").string();
  for (const char* ranks : {"0", "-2"}) {
    const std::string cmd = std::string(PW_BINARY_DIR) +
                            "/tools/pipewright calibrate --backend cpu --quick --ranks " + ranks +
                            " --out " + out + " > /dev/null 2> " + err;
    const int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st)) << ranks;
    EXPECT_EQ(WEXITSTATUS(st), 2) << ranks;
    const std::string msg = read_file(err);
    EXPECT_NE(msg.find("--ranks"), std::string::npos) << msg;
    EXPECT_NE(msg.find("at least 1"), std::string::npos) << msg;
    EXPECT_FALSE(std::filesystem::exists(out)) << ranks;
  }
  std::filesystem::remove_all(dir);
}

// `--host-adam` times the host's Adam into a copy of --base: the profile loads and prices
// offload at the measured rate; without --base, or with a flag of the other modes, exit 2 and
// nothing written.
TEST(CalibrateCli, HostAdamWritesTheMeasuredRateIntoTheBaseProfile) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("pw_calib_host_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "h.yaml").string(), log = (dir / "log.txt").string();
  const std::string tool = std::string(PW_BINARY_DIR) + "/tools/pipewright calibrate --host-adam ";
  auto run = [&](const std::string& args) {
    const int st = std::system((tool + args + " > " + log + " 2>&1").c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  EXPECT_EQ(run("--quick --out " + out), 2) << read_file(log);
  EXPECT_NE(read_file(log).find("--base"), std::string::npos) << read_file(log);
  EXPECT_EQ(run("--quick --base dgx-a100-80gb --ranks 2 --out " + out), 2) << read_file(log);
  EXPECT_NE(read_file(log).find("do not apply"), std::string::npos) << read_file(log);
  EXPECT_EQ(run("--quick --base dgx-a100-80gb --log-ranks 8 --out " + out), 2) << read_file(log);
  EXPECT_EQ(run("--quick --base dgx-a100-80gb --size-corrections off --out " + out), 2)
      << read_file(log);
  EXPECT_FALSE(std::filesystem::exists(out));
  ASSERT_EQ(run("--quick --base dgx-a100-80gb --out " + out), 0) << read_file(log);
  EXPECT_NE(read_file(log).find("host Adam"), std::string::npos) << read_file(log);
  const std::string text = read_file(out);
  EXPECT_NE(text.find("host_memory_bandwidth_gb_per_s:"), std::string::npos) << text;
  EXPECT_NE(text.find("host_memory_efficiency: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("name: dgx-a100-80gb-host"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pw
