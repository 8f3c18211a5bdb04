// How the frameworks cut data-parallel traffic: gradient buckets of the reduction
// (hw::grad_bucket_params / grad_bucket_count) and ZeRO-3's per-pass gathers
// (hw::zero3_pass_gathers over hw::stage_weight_tensors), the rules every tier asks.
#include <gtest/gtest.h>

#include <numeric>
#include <tuple>

#include "hwmodels/memory.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"

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

// Megatron's --ddp-bucket-size replaces the default (NeMo's and Megatron-Bridge's comm-overlap
// settings give 128 x 1024 x 1024 parameters), still only on the first stage and with overlap:
// a 8,030,261,248-parameter Llama 3 8B stage cuts into ceil(8,030,261,248 / 134,217,728) = 60.
TEST(GradBuckets, AGivenBucketSizeReplacesMegatronsDefault) {
  EXPECT_DOUBLE_EQ(grad_bucket_params(1, true, 8, true, 134217728), 134217728);
  EXPECT_EQ(grad_bucket_count(8030261248, 1, true, 8, true, 134217728), 60);
  EXPECT_EQ(grad_bucket_count(8030261248, 1, true, 8, true), 201);  // 40M: ceil(200.76)
  EXPECT_DOUBLE_EQ(grad_bucket_params(1, true, 8, false, 134217728), 0);
  EXPECT_DOUBLE_EQ(grad_bucket_params(1, false, 8, true, 134217728), 0);
  EXPECT_DOUBLE_EQ(grad_bucket_params(3, true, 8, true, 134217728), kDeepSpeedReduceBucketParams);
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

// overlap_param_gather's dispatch rule (Megatron keeps align_param_gather only for the
// interleaved schedule) and its exposed time, by hand: a first bucket of 1 s, chunks of 4 s, a
// fill pass of 1.5 s. One pipeline rank: the first bucket alone. Not aligned, p = 4: the first
// bucket and the three later ranks' chunks on the fill path, 1 + 3 x 4 = 13 s. Aligned: a later
// rank's chunk outlasts the pass ahead of it by 4 - 1.5 = 2.5 s, more than the first bucket.
TEST(ParamGather, AlignedOnlyWhenInterleavedAndExposedByHand) {
  EXPECT_FALSE(hw::param_gather_aligned(1, 1));
  EXPECT_FALSE(hw::param_gather_aligned(4, 1));
  EXPECT_FALSE(hw::param_gather_aligned(1, 2));
  EXPECT_TRUE(hw::param_gather_aligned(4, 5));
  EXPECT_FALSE(hw::param_gather_aligned(4, 5, false));  // --no-align-param-gather
  EXPECT_DOUBLE_EQ(hw::exposed_param_gather_seconds(1, 4, 1.5, 1, false), 1);
  EXPECT_DOUBLE_EQ(hw::exposed_param_gather_seconds(1, 4, 1.5, 4, false), 13);
  EXPECT_DOUBLE_EQ(hw::exposed_param_gather_seconds(1, 4, 1.5, 4, true), 2.5);
  EXPECT_DOUBLE_EQ(hw::exposed_param_gather_seconds(1, 2, 1.5, 4, true), 1);
}

// At most 65,536 buckets (a larger stage's grow instead): 1e15 parameters under ZeRO-3 would be
// 2,000,000 buckets of 5e8; exactly 65,536 x 5e8 = 3.2768e13 is the cap itself.
TEST(GradBuckets, CountIsBounded) {
  EXPECT_EQ(grad_bucket_count(1e15, 3, false, 8, true), 65536);
  EXPECT_EQ(grad_bucket_count(3.2768e13, 3, false, 8, true), 65536);
  EXPECT_EQ(grad_bucket_count(3.2768e13 + 5e8, 3, false, 8, true), 65536);
}

const ModelShape& shape(const char* name) {
  const ModelPreset* p = find_model_preset(name);
  EXPECT_NE(p, nullptr) << name;
  return p->shape;
}

// The weight tensors of a stage sum to its parameter count whatever the model: GPT-3 (biases,
// LayerNorm, tied embeddings, learned positions), Llama 3 8B (GQA, SwiGLU, RMSNorm, untied) and
// Qwen3-30B-A3B (q/k norms, 128 experts, EP 8), first, middle and last stages, t = 1 and 2.
TEST(Zero3Gathers, StageTensorsSumToTheStageParameters) {
  for (const char* name : {"gpt3-175b", "llama3-8b", "qwen3-30b-a3b"}) {
    const ModelShape& m = shape(name);
    for (int tp : {1, 2}) {
      WorkloadOptions o;
      o.tp = tp;
      o.ep = m.num_experts > 0 ? 8 : 1;
      o.etp = 1;
      const int L = m.num_layers;
      for (auto [b, e, first, last] : {std::tuple{0, L, true, true},
                                       {0, L / 4, true, false},
                                       {L / 4, L / 2, false, false},
                                       {L - L / 4, L, false, true}}) {
        const std::vector<double> t = stage_weight_tensors(m, o, b, e, first, last, 4);
        const double sum = std::accumulate(t.begin(), t.end(), 0.0);
        EXPECT_NEAR(sum, stage_parameter_count(m, o, b, e, first, last, 4), 1e-6 * sum)
            << name << " t" << tp << " [" << b << "," << e << ")";
      }
    }
  }
}

// DeepSpeed ZeRO-3 on GPT-3 175B (h = 12288, t = 1), one middle stage of 2 layers: each layer's
// four weight matrices exceed the 5e7-element prefetch bucket, so each is its own gather: qkv
// 3h^2, proj h^2, fc1 4h^2, fc2 4h^2 (bf16, 2 bytes each); biases (3h, h, 4h, h) and LayerNorm
// vectors (h) are under the 1e5 persistence threshold and never gathered. 8 gathers.
TEST(Zero3Gathers, DeepSpeedGathersEachLargeWeightAlone) {
  const ModelShape& m = shape("gpt3-175b");
  const double h = 12288, h2 = h * h;
  WorkloadOptions o;
  const Zero3PassGathers g =
      zero3_pass_gathers("tensor", 0, 2, stage_weight_tensors(m, o, 10, 12, false, false, 8));
  EXPECT_EQ(g.count(), 8);
  EXPECT_DOUBLE_EQ(g.first_bytes, 2 * 3 * h2);
  ASSERT_EQ(g.rest.size(), 3u);  // by size, in order of first appearance: h^2, 4h^2, 3h^2
  EXPECT_DOUBLE_EQ(g.rest[0].bytes, 2 * h2);
  EXPECT_EQ(g.rest[0].count, 2);
  EXPECT_DOUBLE_EQ(g.rest[1].bytes, 2 * 4 * h2);
  EXPECT_EQ(g.rest[1].count, 4);
  EXPECT_DOUBLE_EQ(g.rest[2].bytes, 2 * 3 * h2);
  EXPECT_EQ(g.rest[2].count, 1);
  EXPECT_DOUBLE_EQ(g.largest_bytes(), 2 * 4 * h2);
}

// The 1.7B model (h = 2304): a layer's matrices hold 3h^2 + h^2 + 4h^2 + 4h^2 = 12h^2 =
// 63,700,992 elements; the first three (8h^2 = 42.5M) stay under 5e7, the fourth closes the
// gather: one per layer, 4 layers -> 4 gathers of 2 x 12h^2 bytes.
TEST(Zero3Gathers, DeepSpeedPacksSmallWeightsUpToThePrefetchBucket) {
  const ModelShape& m = shape("megatron-1.7b");
  ASSERT_EQ(m.hidden_size, 2304);
  const double h2 = 2304.0 * 2304.0;
  WorkloadOptions o;
  const Zero3PassGathers g =
      zero3_pass_gathers("tensor", 0, 4, stage_weight_tensors(m, o, 4, 8, false, false, 4));
  EXPECT_EQ(g.count(), 4);
  EXPECT_DOUBLE_EQ(g.first_bytes, 2 * 12 * h2);
  EXPECT_DOUBLE_EQ(g.largest_bytes(), 2 * 12 * h2);
}

// FSDP / Megatron-FSDP (`layer`): one gather per layer of zero3_layer_bytes; `stage` none.
TEST(Zero3Gathers, ByLayerOneGatherPerLayerByStageNone) {
  const Zero3PassGathers g = zero3_pass_gathers("layer", 24e9, 12, {});
  EXPECT_EQ(g.count(), 12);
  EXPECT_DOUBLE_EQ(g.first_bytes, 2 * 24e9 / 12);
  ASSERT_EQ(g.rest.size(), 1u);
  EXPECT_EQ(g.rest[0].count, 11);
  EXPECT_EQ(zero3_pass_gathers("stage", 24e9, 12, {}).count(), 0);
}

}  // namespace
}  // namespace pw::hw
