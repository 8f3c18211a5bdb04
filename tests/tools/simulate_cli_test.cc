// Runs `pipewright simulate` as a user would and checks exit codes and key JSON fields.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_io.h"
#include "core/plan_io.h"
#include "core/pytorch_csv.h"

namespace pw {
namespace {

struct CliRun {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("pw_cli_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

CliRun simulate(const std::string& args) {
  const std::string err_file = temp_path("stderr.txt");
  const std::string cmd =
      std::string(PW_BINARY_DIR) + "/tools/pipewright simulate " + args + " 2>" + err_file;
  CliRun r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = read_file(err_file);
  std::filesystem::remove(err_file);
  return r;
}

nlohmann::json json_of(const CliRun& r) { return nlohmann::json::parse(r.out); }

// One line on stderr, naming `what`, exit status 2.
void expect_bad_input(const CliRun& r, const std::string& what) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
}

TEST(SimulateCli, OneFOneBFiguresInJson) {
  CliRun r = simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs F=1,B=1,W=1 --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 33.0);  // (m+p-1)(F+B+W)
  EXPECT_DOUBLE_EQ(j["bubble_rate"].get<double>(), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 3.0 / 8.0);
  ASSERT_EQ(j["devices"].size(), 4u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_DOUBLE_EQ(j["devices"][s]["peak_activations"].get<double>(), 4 - s);
    EXPECT_DOUBLE_EQ(j["devices"][s]["busy"].get<double>(), 24.0);
    EXPECT_DOUBLE_EQ(j["devices"][s]["idle"].get<double>(), 9.0);
  }
}

TEST(SimulateCli, ZeroBubblePaperOneFOneBRow) {
  // 1.5B, p=8, m=24 with the paper's profiled times: published 1F1B bubble rate 0.2431.
  CliRun r = simulate(
      "--schedule 1f1b --pp 8 --microbatches 24 --costs F=18.522,B=18.086,W=9.337,comm=0.601 "
      "--format json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NEAR(json_of(r)["bubble_rate"].get<double>(), 0.2431, 5e-5);
}

TEST(SimulateCli, InterleavedChunkCountsHalf) {
  CliRun r = simulate("--schedule interleaved --pp 4 --microbatches 8 --chunks 2 --format yaml");
  ASSERT_EQ(r.status, 0) << r.err;
  // Peak 11 chunk activations on device 0, a chunk being half a 1F1B stage.
  EXPECT_NE(r.out.find("peak_activations: 5.5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bubble_fraction: 0.1875"), std::string::npos) << r.out;  // 3/(2*8)
}

TEST(SimulateCli, DiagramDrawsOneRowPerDevice) {
  CliRun r = simulate("--schedule gpipe --pp 2 --microbatches 2 --diagram");
  ASSERT_EQ(r.status, 0) << r.err;
  // GPipe p=2 m=2, F=B=W=1 (a full backward is two slots). d1: F0 [1,2), F1 [2,3), BW0 [3,5),
  // BW1 [5,7); d0's BW0 waits for d1's BW0: [5,7), BW1 [7,9). Makespan 9 slots.
  EXPECT_NE(r.out.find("d0|F0 F1 .. .. .. B0 B0 B1 B1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("d1|.. F0 F1 B0 B0 B1 B1 .. ..\n"), std::string::npos) << r.out;
}

TEST(SimulateCli, CsvExportImportAndPlanEmission) {
  const std::string csv = temp_path("s.csv"), plan = temp_path("plan.yaml");
  CliRun a = simulate("--schedule zb-h1 --pp 4 --microbatches 8 --format json --export-csv " + csv +
                      " --emit " + plan);
  ASSERT_EQ(a.status, 0) << a.err;
  CliRun b = simulate("--import-csv " + csv + " --format json");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(json_of(a)["makespan"], json_of(b)["makespan"]);
  Plan p = load_plan(plan);
  EXPECT_EQ(p.schedule.placement.num_devices, 4);
  EXPECT_EQ(p.predicted.size(), p.schedule.total_actions());
  EXPECT_EQ(p.predicted_iteration, 27'000'000'000);  // (m)(F+B+W) + (p-1)(F+B-W) = 27 units
  std::filesystem::remove(csv);
  std::filesystem::remove(plan);
}

TEST(SimulateCli, BadInputIsOneLineAndExitTwo) {
  expect_bad_input(simulate("--schedule 1f2b --pp 4 --microbatches 8"), "did you mean '1f1b'");
  expect_bad_input(simulate("--schedule 1f1b --pp 0 --microbatches 8"), "--pp");
  expect_bad_input(simulate("--schedule 1f1b --pp -3 --microbatches 8"), "--pp");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 0"), "--microbatches");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs F=x"), "--costs");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs F1"), "--costs");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs Q=1"), "--costs");
  expect_bad_input(simulate("--schedule interleaved --pp 4 --microbatches 6"), "m mod g");
}

TEST(SimulateCli, BadCsvNamesFileLineAndCell) {
  const std::string csv = temp_path("bad.csv");
  write_file_atomic(csv, "0F0,0B0\n1F0,1Q0,1B0\n");
  expect_bad_input(simulate("--import-csv " + csv), csv + ": line 2, cell 2: unknown action");
  write_file_atomic(csv, "0F0,,,0B0\n,1B0,1F0\n");  // rank 1 runs B before F
  expect_bad_input(simulate("--import-csv " + csv), "line 2, cell 2");
  std::filesystem::remove(csv);
}

}  // namespace
}  // namespace pw

namespace pw {
namespace {

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

TEST(SimulateCli, ReportDrawsOneBlockPerPassWithTheCompareRenderer) {
  const std::string html = temp_path("report.html");
  CliRun r = simulate("--schedule 1f1b --pp 4 --microbatches 8 --report " + html);
  ASSERT_EQ(r.status, 0) << r.err;
  // 1F1B: p x m x (F + full backward) = 4 * 8 * 2 = 64 blocks.
  EXPECT_EQ(count_of(read_file(html), "class=\"blk "), 64u);
  std::filesystem::remove(html);
}

TEST(SimulateCli, ReportWithAScenarioIsRefusedNotIgnored) {
  CliRun r = simulate(std::string(PW_SOURCE_DIR) +
                      "/scenarios/megatron/weak-scaling-1.7b.yaml --report /tmp/never.html");
  expect_bad_input(r, "--report");
}

}  // namespace
}  // namespace pw
