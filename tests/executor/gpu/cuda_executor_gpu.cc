// CUDA executor on a real GPU (ctest label `gpu`; skipped when no device is visible): a 4-stage
// 1F1B plan and a V-Half plan in single-GPU mode, checked against the fp64 reference within the
// bf16 tolerance, with their measured runs and traces written beside the build.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../tools/cli_util.h"
#include "executor/cuda/cuda_executor.h"

namespace {

using pw::testing::sh;

void single_gpu_plan(const std::string& schedule) {
  if (pw::exec::cuda::visible_devices() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = PW_BINARY_DIR;
  const std::string plan = dir + "/gpu_" + schedule + ".yaml";
  std::string out;
  ASSERT_EQ(
      sh(std::string(PW_RANK_HELPER) + " --schedule " + schedule + " --save-plan " + plan, &out), 0)
      << out;
  const int rc =
      sh(dir + "/tools/pipewright execute " + plan +
             " --backend cuda-single --iterations 5 --check-gradients --measured " + dir + "/gpu_" +
             schedule + "_run.json --trace " + dir + "/gpu_" + schedule + "_trace.json",
         &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

TEST(CudaSingleGpu, OneFOneBFourStagesMatchesReference) { single_gpu_plan("1f1b"); }
TEST(CudaSingleGpu, VHalfMatchesReference) { single_gpu_plan("v-half"); }

}  // namespace
