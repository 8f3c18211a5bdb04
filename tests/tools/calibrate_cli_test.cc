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

// Each flag the chosen mode does not read is refused (exit 2, one line naming it) before anything
// is measured: --base is the cuda backend's (a CPU profile describes the host it measures),
// --mpirun/--skip-mpi/--ranks the cpu backend's, --quick/--mpirun/--raw a new measurement's.
// They used to be ignored. --skip-mpi keeps only the raw measurements (a CPU profile needs the
// MPI link), so it asks for --raw and no --out; it used to measure for seconds and then fail.
TEST(CalibrateCli, FlagsTheModeDoesNotReadAreRefusedAndSkipMpiKeepsOnlyRawData) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("pw_calib_modes_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "p.yaml").string(), raw = (dir / "r.json").string(),
                    log = (dir / "log.txt").string();
  const std::string tool = std::string(PW_BINARY_DIR) + "/tools/pipewright calibrate ";
  auto run = [&](const std::string& args) {
    const int st = std::system((tool + args + " > " + log + " 2>&1").c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  const struct {
    std::string args, flag;
  } refused[] = {
      {"--backend cpu --base dgx-h100 --out " + out, "--base"},
      {"--backend cpu --skip-mpi --out " + out, "--skip-mpi"},
      {"--backend cpu --skip-mpi --raw " + raw + " --out " + out, "--skip-mpi"},
      {"--backend cpu --skip-mpi --mpirun /bin/false --raw " + raw, "--mpirun"},
      {"--backend cpu --skip-mpi --ranks 2 --raw " + raw, "--ranks"},
      {"--backend cuda --mpirun /bin/false --out " + out, "--mpirun"},
      {"--backend cuda --ranks 4 --out " + out, "--ranks"},
      {"--from-raw " + raw + " --quick --out " + out, "--from-raw"},
      {"--from-raw " + raw + " --raw " + raw + " --out " + out, "--from-raw"},
      {"--log-collective all_reduce --out " + out, "--log-collective"},
      {"--log-nodes 2 --out " + out, "--log-nodes"},
  };
  for (const auto& c : refused) {
    EXPECT_EQ(run(c.args), 2) << c.args << "\n" << read_file(log);
    const std::string msg = read_file(log);
    EXPECT_EQ(msg.rfind("pipewright: error: " + c.flag + ":", 0), 0u) << c.args << "\n" << msg;
    EXPECT_EQ(msg.find('\n'), msg.size() - 1) << msg;  // one line
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
    EXPECT_FALSE(std::filesystem::exists(raw)) << c.args;
  }
  ASSERT_EQ(run("--backend cpu --quick --skip-mpi --raw " + raw), 0) << read_file(log);
  EXPECT_NE(read_file(log).find("no profile"), std::string::npos) << read_file(log);
  const std::string kept = read_file(raw);
  EXPECT_NE(kept.find("\"backend\""), std::string::npos);
  EXPECT_EQ(kept.find("mpi_p2p"), std::string::npos);  // the MPI job was not run
  EXPECT_FALSE(std::filesystem::exists(out));
  // The raw file is a CPU measurement: --base does not apply to it either.
  EXPECT_EQ(run("--from-raw " + raw + " --base dgx-h100 --out " + out), 2) << read_file(log);
  EXPECT_NE(read_file(log).find("--base: applies to a cuda measurement"), std::string::npos)
      << read_file(log);
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pw
