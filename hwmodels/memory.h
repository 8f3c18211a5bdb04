#pragma once
/// Model-state memory per device: parameters, gradients and optimizer state (mixed-precision Adam,
/// 16 bytes per parameter, ZeRO stages 0-3, optional optimizer offload to host). Activations are
/// per pass (hwmodels/transformer.h); what a schedule holds at its peak is the simulator's
/// timeline (sim/iteration.h), which every command reports.
#include "core/plan.h"
#include "core/units.h"
#include "hwmodels/transformer.h"

namespace pw::hw {

/// Model-state bytes of `params` parameters on one GPU of a d-way data-parallel group.
/// bf16 weights 2, bf16 grads 2, fp32 master + momentum + variance 12 bytes per parameter.
/// ZeRO-1 shards the optimizer state (4P + 12P/d), ZeRO-2 also the gradients (2P + 14P/d),
/// ZeRO-3 also the weights (16P/d). Offload moves the optimizer state to host memory.
struct ModelStateBytes {
  Bytes weights{};
  Bytes gradients{};
  Bytes optimizer{};       ///< on the GPU
  Bytes host_optimizer{};  ///< on the host when offloaded
  Bytes total() const { return weights + gradients + optimizer; }
};
ModelStateBytes model_state_bytes(double params, int zero_stage, int dp, bool offload = false);

/// FP8 training (Transformer Engine) keeps an FP8 copy of each linear weight and of its
/// transpose beside the bf16 weight: 2 bytes per parameter, not sharded by ZeRO-1/2.
inline constexpr double kFp8WeightBytesPerParam = 2.0;

/// Model state of a rank holding `params` parameters of which `expert_params` are MoE experts:
/// the dense part sharded over the data(-and-context) group `dp`, the experts over the
/// expert-data-parallel group `expert_dp` (Megatron's distributed optimizer); `fp8` adds the
/// FP8 weight copies.
ModelStateBytes model_state_bytes(double params, double expert_params, int zero_stage, int dp,
                                  int expert_dp, bool offload, bool fp8);

}  // namespace pw::hw
