#pragma once
/// Model-state memory per device: parameters, gradients and optimizer state (mixed-precision Adam,
/// 16 bytes per parameter, ZeRO stages 0-3, optional optimizer offload to host). Activations are
/// per pass (hwmodels/transformer.h); what a schedule holds at its peak is the simulator's
/// timeline (sim/iteration.h), which every command reports.
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/units.h"
#include "hwmodels/transformer.h"

namespace pw::hw {

/// Bytes per gradient element, in the gradient buffer and in the data-parallel reduction: 4 with
/// Megatron's fp32 buffer (`grad_reduce_in_fp32`), 2 with bf16 gradients. Every tier asks this.
inline double grad_bytes_per_param(bool grad_reduce_in_fp32) {
  return grad_reduce_in_fp32 ? 4.0 : 2.0;
}
inline double grad_bytes_per_param(const ParallelConfig& c) {
  return grad_bytes_per_param(c.grad_reduce_in_fp32);
}

/// Parameters per gradient bucket of the data-parallel reduction, as the frameworks cut their
/// gradient buffers (the same rule for every tier; a stage's bucket count is
/// grad_bucket_count):
/// - ZeRO 0-2 (Megatron-core's DistributedDataParallel and distributed optimizer): with
///   `overlap_grad_reduce`, `bucket_size` parameters when given (Megatron's --ddp-bucket-size,
///   ParallelConfig::ddp_bucket_size), else max(40M, 1M x dp) parameters ("larger DP sizes need
///   larger buckets to ensure collectives do not become latency-bound",
///   DistributedDataParallelConfig. bucket_size), but only on the first pipeline stage's first
///   model chunk: Megatron turns bucketing off for pipeline ranks > 0 and model chunks after the
///   first, whose reductions are off the critical path. Without overlap the whole buffer is one
///   bucket, reduced after the backward (Megatron-core sets bucket_size to None; the 2021 code
///   all-reduced its contiguous buffer at once).
/// - ZeRO-3 (DeepSpeed stage 3): `reduce_bucket_size`, 5e8 elements by default, on every stage.
/// `dp` counts the data-and-context ranks the gradients reduce over. Returns 0 for "one bucket".
double grad_bucket_params(int zero_stage, bool overlap_grad_reduce, int dp, bool first_stage,
                          double bucket_size = 0);
inline constexpr double kMegatronMinBucketParams = 40e6;
inline constexpr double kMegatronBucketParamsPerDpRank = 1e6;
inline constexpr double kDeepSpeedReduceBucketParams = 5e8;

/// Gradient buckets of a stage of `stage_params` parameters (grad_bucket_params), at most 65,536
/// (a larger stage's buckets grow instead, so the simulator's task count stays bounded for any
/// model the loader accepts). The DES, the planner's screen and `estimate` all ask this.
int grad_bucket_count(double stage_params, int zero_stage, bool overlap_grad_reduce, int dp,
                      bool first_stage, double bucket_size = 0);

/// Megatron's `overlap_param_gather` (the distributed optimizer's all-gather of the updated bf16
/// weights, moved from the end of the step to the next step's forward; the buckets are the
/// gradient buckets, grad_bucket_count, since parameters and gradients share the buffer layout).
/// Aligned (`align_param_gather`, Megatron's default, which it keeps only for the interleaved
/// schedule: pp > 1 and more than one model chunk per device; `align` false is its
/// --no-align-param-gather, NeMo 1's default): every pipeline rank dispatches
/// its first two chunks' gathers, all buckets at once, when the step begins, and chunk k + 1's
/// when chunk k's first forward begins. Not aligned: a chunk's first forward pre-hook
/// dispatches its first bucket and waits for it, and each finished bucket dispatches the next
/// (distributed_data_parallel.py, param_and_grad_buffer.py finish_param_sync), so a pipeline
/// rank after the first gathers its whole (one-bucket) chunk when its first activation arrives.
bool param_gather_aligned(int pipeline_parallel, int chunks_per_device, bool align = true);

/// The overlapped gather's exposed seconds as `estimate` and the planner's screen price it (the
/// DES schedules the gathers themselves): `first_bucket_s` is the first stage's first bucket,
/// `chunk_s` one whole chunk's gather, `fill_step_s` one pass of the pipeline fill. Aligned, the
/// first bucket waits, and a later rank's chunk waits for what its gather outlasts the one-pass
/// fill ahead of it; not aligned, the first bucket and, along the fill, each of the p - 1 later
/// ranks' whole chunk.
double exposed_param_gather_seconds(double first_bucket_s, double chunk_s, double fill_step_s,
                                    int pipeline_parallel, bool aligned);

/// ZeRO-3 by layer: the bf16 bytes of one layer's share of a stage's weights (the stage's
/// parameters over its layers, the embedding spread with them), what a pass gathers before its
/// compute; a running pass holds two such shares (the layer it computes and the next one,
/// prefetched). The DES and the planner's screen both ask this.
inline double zero3_layer_bytes(double stage_params, int layers) {
  return 2.0 * stage_params / (layers > 1 ? layers : 1);
}

/// DeepSpeed ZeRO-3's defaults (deepspeed/runtime/zero/config.py): weight tensors under
/// `param_persistence_threshold` (1e5 elements) are never partitioned, and a gather prefetches
/// upcoming tensors until it holds `stage3_prefetch_bucket_size` (5e7) elements.
inline constexpr double kDeepSpeedPersistenceThreshold = 1e5;
inline constexpr double kDeepSpeedPrefetchBucketParams = 5e7;

/// `count` equal all-gathers of `bytes` (bf16) each.
struct GatherRun {
  double bytes = 0;
  int count = 0;
};

/// The all-gathers one ZeRO-3 pass makes of a stage's weights: the first (prefetched under the
/// previous pass) and the others, grouped by size in order of first appearance (they run one
/// after another beside the pass, so their order does not change their time). One truth for
/// the DES and `estimate`:
/// - `layer` (FSDP, Megatron-FSDP): one per layer, zero3_layer_bytes each;
/// - `tensor` (DeepSpeed ZeRO-3): the weight tensors in use order (`tensors`,
///   stage_weight_tensors), those under the persistence threshold left out, packed as
///   DeepSpeed's prefetch loop packs them: a gather takes the next tensors until it holds at
///   least the prefetch bucket (a tensor that large goes alone). A 12288-wide GPT-3 layer's four
///   weight matrices (3h^2, h^2, 4h^2, 4h^2, each over 5e7) are four gathers; a 2304-wide layer's
///   four (15.9M + 5.3M + 21.2M + 21.2M = 63.7M) are one, its norms and biases persistent.
/// Both empty (first_bytes 0) for `stage`, which gathers once per sweep.
struct Zero3PassGathers {
  double first_bytes = 0;
  std::vector<GatherRun> rest;
  double largest_bytes() const;  ///< the largest single gather
  int count() const;             ///< all of them, the first included
};
Zero3PassGathers zero3_pass_gathers(const std::string& gather, double stage_params, int layers,
                                    const std::vector<double>& tensors);

/// Model-state bytes of `params` parameters on one GPU of a d-way data-parallel group.
/// bf16 weights 2, gradients `grad_bytes` (2: the ZeRO paper's bf16 convention, 16 bytes per
/// parameter in all; 4: Megatron's fp32 gradient buffer, 18 bytes, as in Megatron-LM's
/// distributed-optimizer table), fp32 master + momentum + variance 12 bytes per parameter.
/// ZeRO-1 (Megatron's distributed optimizer) shards the optimizer state (2P + gP + 12P/d: 6 +
/// 12/d with fp32 gradients), ZeRO-2 also the gradients, ZeRO-3 also the weights. Offload moves
/// the optimizer state to host memory.
struct ModelStateBytes {
  Bytes weights{};
  Bytes gradients{};
  Bytes optimizer{};       ///< on the GPU
  Bytes host_optimizer{};  ///< on the host when offloaded
  Bytes total() const { return weights + gradients + optimizer; }
};
ModelStateBytes model_state_bytes(double params, int zero_stage, int dp, bool offload = false,
                                  double grad_bytes = 2.0);

/// FP8 training (Transformer Engine) keeps an FP8 copy of each linear weight of the transformer
/// layers and of its transpose beside the bf16 weight: 2 bytes per parameter, not sharded by
/// ZeRO-1/2. The embedding and the output layer are not Transformer Engine layers and have none.
inline constexpr double kFp8WeightBytesPerParam = 2.0;

/// Model state of a rank holding `params` parameters of which `expert_params` are MoE experts:
/// the dense part sharded over the data(-and-context) group `dp`, the experts over the
/// expert-data-parallel group `expert_dp` (Megatron's distributed optimizer); `fp8` adds the
/// FP8 copies of `layer_params` (the rank's transformer-layer parameters; their norm scales and
/// biases, under 0.1%, counted with them); gradients take `grad_bytes` each
/// (grad_bytes_per_param).
ModelStateBytes model_state_bytes(double params, double expert_params, int zero_stage, int dp,
                                  int expert_dp, bool offload, bool fp8, double grad_bytes,
                                  double layer_params);

}  // namespace pw::hw
