// `pipewright calibrate --from-nccl-tests`: the published DGX H100 log becomes a profile that
// `plan` and `estimate` use like any other; bad logs are one line, exit 2, nothing written.
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

const std::string kLog = std::string(PW_SOURCE_DIR) +
                         "/../shared/reference/nccl-tests/dgx-h100-8gpu-all_reduce_perf.txt";

TEST(NcclTestsCli, PublishedLogBecomesAProfileThatPlansAndEstimates) {
  if (!std::filesystem::exists(kLog)) GTEST_SKIP() << "shared/reference not present";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pw-nccl-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string profile = (dir / "h100-nccl.yaml").string();
  std::string out;
  ASSERT_EQ(sh(kTool + " calibrate --from-nccl-tests " + kLog +
                   " --log-ranks 8 --log-nodes 1 --base dgx-h100 --out " + profile,
               &out),
            0)
      << out;
  // The report lines up the log's rows against the fitted profile's prediction.
  EXPECT_NE(out.find("17179869184"), std::string::npos) << out;
  EXPECT_NE(out.find("worst |busbw error|"), std::string::npos) << out;
  EXPECT_NE(pw::read_file(profile).find("protocols:"), std::string::npos);
  const std::string scenario = (dir / "s.yaml").string();
  pw::write_file_atomic(scenario,
                        "model: {preset: llama3-8b, seq_length: 2048, use_flash_attn: true}\n"
                        "cluster: {profile: h100-nccl.yaml, nodes: 1}\n"
                        "parallel: {tensor_model_parallel_size: 8, "
                        "pipeline_model_parallel_size: 1, micro_batch_size: 1, "
                        "global_batch_size: 8}\n");
  out.clear();
  EXPECT_EQ(sh(kTool + " estimate " + scenario, &out), 0) << out;
  out.clear();
  EXPECT_EQ(sh(kTool + " plan " + scenario + " --top 1 --des-top 0 --tp 8 --pp 1", &out), 0) << out;
  // Bad input: a log that ends mid-row, nothing written.
  const std::string bad = (dir / "all_reduce_perf.txt").string();
  pw::write_file_atomic(bad, "     1048576        262144     float     sum      -1    27.37\n");
  const std::string target = (dir / "bad.yaml").string();
  out.clear();
  EXPECT_EQ(sh(kTool + " calibrate --from-nccl-tests " + bad +
                   " --log-ranks 8 --log-nodes 1 --base dgx-h100 --out " + target,
               &out),
            2)
      << out;
  EXPECT_NE(out.find("line 1"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(target));
  out.clear();
  EXPECT_EQ(sh(kTool + " calibrate --log-ranks 8 --out " + target, &out), 2) << out;
  // The size corrections: on by default (the profile has them, the report shows the model
  // alone beside them), off on request; the flag alone, or with a bad value, is refused.
  EXPECT_NE(pw::read_file(profile).find("size_corrections:"), std::string::npos);
  const std::string plain = (dir / "plain.yaml").string();
  out.clear();
  ASSERT_EQ(
      sh(kTool + " calibrate --from-nccl-tests " + kLog +
             " --log-ranks 8 --log-nodes 1 --base dgx-h100 --size-corrections off --out " + plain,
         &out),
      0)
      << out;
  EXPECT_EQ(pw::read_file(plain).find("size_corrections"), std::string::npos);
  EXPECT_EQ(out.find("model alone"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(sh(kTool + " calibrate --size-corrections off --out " + target, &out), 2) << out;
  EXPECT_NE(out.find("--size-corrections"), std::string::npos) << out;
  EXPECT_EQ(occurrences(out, "\n"), 1) << out;
  out.clear();
  EXPECT_NE(sh(kTool + " calibrate --from-nccl-tests " + kLog +
                   " --log-ranks 8 --log-nodes 1 --base dgx-h100 --size-corrections maybe --out " +
                   target,
               &out),
            0)
      << out;
  EXPECT_FALSE(std::filesystem::exists(target));
  std::filesystem::remove_all(dir);
}

}  // namespace
