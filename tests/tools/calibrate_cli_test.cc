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

}  // namespace
}  // namespace pw
