// Gradient buckets of the data-parallel reduction as the frameworks cut them
// (hw::grad_bucket_params / grad_bucket_count), the rule every tier asks.
#include <gtest/gtest.h>

#include "hwmodels/memory.h"

namespace pw::hw {
namespace {

// Megatron-core DistributedDataParallel: with overlap_grad_reduce, buckets of
// max(40,000,000, 1,000,000 x dp) parameters, on the first stage only; without overlap the
// whole buffer at once. Hand values: dp = 32 -> max(40M, 32M) = 40M; dp = 1536 -> 1.536e9.
TEST(GradBuckets, MegatronBucketsGrowWithTheDataParallelSize) {
  EXPECT_DOUBLE_EQ(grad_bucket_params(0, true, 32, true), 40e6);
  EXPECT_DOUBLE_EQ(grad_bucket_params(1, true, 1536, true), 1.536e9);
  // 1.7B-class stage (1,652,000,000 parameters) at dp = 32: ceil(1.652e9 / 40e6) = 42 buckets.
  EXPECT_EQ(grad_bucket_count(1.652e9, 0, true, 32, true), 42);
  // At dp = 1536 a 175B stage: ceil(175e9 / 1.536e9) = 114 (ceil(113.93)).
  EXPECT_EQ(grad_bucket_count(175e9, 0, true, 1536, true), 114);
}

TEST(GradBuckets, WithoutOverlapOrAfterTheFirstStageTheBufferIsOneBucket) {
  EXPECT_DOUBLE_EQ(grad_bucket_params(0, false, 32, true), 0);
  EXPECT_EQ(grad_bucket_count(175e9, 0, false, 1536, true), 1);
  EXPECT_EQ(grad_bucket_count(175e9, 2, false, 64, true), 1);
  // Megatron turns bucketing off for pipeline ranks > 0 and later model chunks.
  EXPECT_EQ(grad_bucket_count(175e9, 0, true, 1536, false), 1);
  EXPECT_EQ(grad_bucket_count(175e9, 1, true, 64, false), 1);
}

// DeepSpeed ZeRO-3: reduce_bucket_size = 5e8 elements on every stage, overlapped or not:
// 175e9 / 5e8 = 350 buckets; 5e8 + 1 parameters -> 2.
TEST(GradBuckets, ZeroThreeUsesDeepSpeedsReduceBucket) {
  EXPECT_EQ(grad_bucket_count(175e9, 3, false, 1536, true), 350);
  EXPECT_EQ(grad_bucket_count(175e9, 3, true, 1536, false), 350);
  EXPECT_EQ(grad_bucket_count(5e8 + 1, 3, false, 8, true), 2);
  EXPECT_EQ(grad_bucket_count(1, 3, false, 8, true), 1);
}

// At most 65,536 buckets (a larger stage's grow instead): 1e15 parameters under ZeRO-3 would be
// 2,000,000 buckets of 5e8; exactly 65,536 x 5e8 = 3.2768e13 is the cap itself.
TEST(GradBuckets, CountIsBounded) {
  EXPECT_EQ(grad_bucket_count(1e15, 3, false, 8, true), 65536);
  EXPECT_EQ(grad_bucket_count(3.2768e13, 3, false, 8, true), 65536);
  EXPECT_EQ(grad_bucket_count(3.2768e13 + 5e8, 3, false, 8, true), 65536);
}

}  // namespace
}  // namespace pw::hw
