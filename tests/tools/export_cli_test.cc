// `pipewright export` and `plan --framework` as a user runs them: the #1 row of a
// framework-restricted search exports and the plan's PyTorch CSV imports back; what cannot be
// exported is one line, exit 2, and nothing written.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/file_io.h"
#include "tests/tools/cli_util.h"

namespace {

using pw::testing::kTool;
using pw::testing::occurrences;
using pw::testing::sh;

std::size_t lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

struct Dir {
  std::filesystem::path path;
  explicit Dir(const std::string& tag)
      : path(std::filesystem::temp_directory_path() / (tag + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

TEST(ExportCli, FrameworkPlansExportAndTheirCsvImportsBack) {
  const Dir dir("pw-export-");
  const std::string scenario = dir / "llama.yaml";
  pw::write_file_atomic(scenario,
                        "model: {preset: llama3-8b, seq_length: 2048, use_flash_attn: true}\n"
                        "cluster: {profile: dgx-h100, nodes: 1}\n"
                        "parallel: {global_batch_size: 16}\n");
  for (const std::string fw : {"megatron", "torchtitan"}) {
    SCOPED_TRACE(fw);
    const std::string plan = dir / (fw + ".yaml"), csv = dir / (fw + "-pp.csv");
    std::string out;
    ASSERT_EQ(sh(kTool + " plan " + scenario + " --top 1 --des-top 0 --pp 2,4 --framework " + fw +
                     " --emit " + plan + " --export-csv " + csv,
                 &out),
              0)
        << out;
    EXPECT_NE(out.find("--framework " + fw), std::string::npos) << out;
    out.clear();
    // The plan's own CSV (PyTorch pipelining, compute_only by default) imports back.
    EXPECT_EQ(sh(kTool + " simulate --import-csv " + csv, &out), 0) << out;
    out.clear();
    const std::string target = dir / (fw == "megatron" ? "args.txt" : "job.toml");
    ASSERT_EQ(sh(kTool + " export " + plan + " --to " + fw + " --out " + target, &out), 0) << out;
    const std::string text = pw::read_file(target);
    EXPECT_NE(
        text.find(fw == "megatron" ? "--tensor-model-parallel-size" : "tensor_parallel_degree = "),
        std::string::npos)
        << text;
  }
}

TEST(ExportCli, WhatCannotBeExportedIsOneLineExit2AndNothingIsWritten) {
  const Dir dir("pw-export-bad-");
  const std::string scenario = dir / "llama.yaml";
  pw::write_file_atomic(scenario,
                        "model: {preset: llama3-8b, seq_length: 2048, use_flash_attn: true}\n"
                        "cluster: {profile: dgx-h100, nodes: 1}\n"
                        "parallel: {global_batch_size: 16}\n");
  const std::string plan = dir / "zb.yaml";
  std::string out;
  ASSERT_EQ(sh(kTool + " plan " + scenario +
                   " --top 1 --des-top 0 --pp 4 --zero 1 --schedules zb-h1 --emit " + plan,
               &out),
            0)
      << out;
  const std::string target = dir / "out.txt";
  for (const auto& [args, says] : {
           std::pair{plan + " --to megatron", "cannot run 'zb-h1'; nearest it can: '1f1b'"},
           std::pair{plan + " --to colossalai",
                     "--to: expected megatron, torchtitan, nemo or deepspeed"},
           std::pair{dir / "missing.yaml" + " --to megatron", "missing.yaml"},
           std::pair{plan + " --to torchtitan --out " + dir / "nodir/job.toml", "nodir"},
       }) {
    out.clear();
    EXPECT_EQ(sh(kTool + " export " + args +
                     (args.find("--out") == std::string::npos ? " --out " + target : std::string()),
                 &out),
              2)
        << args << "\n"
        << out;
    EXPECT_EQ(lines(out), 1u) << out;
    EXPECT_NE(out.find(says), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(target));
    EXPECT_FALSE(std::filesystem::exists(dir / "out.csv"));
  }
  // torchtitan runs ZB-H1 from a CSV: without --out there is nowhere to put it.
  out.clear();
  EXPECT_EQ(sh(kTool + " export " + plan + " --to torchtitan", &out), 2) << out;
  EXPECT_NE(out.find("--out"), std::string::npos) << out;
  // An unknown framework for the search is refused before it runs.
  out.clear();
  EXPECT_EQ(sh(kTool + " plan " + scenario + " --framework megatorn", &out), 2) << out;
  EXPECT_NE(out.find("did you mean 'megatron'"), std::string::npos) << out;
}

}  // namespace
