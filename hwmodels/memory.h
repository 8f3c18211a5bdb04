#pragma once
/// Memory per device: parameters, gradients and optimizer state (mixed-precision Adam, 16 bytes
/// per parameter, ZeRO stages 0-3, optional optimizer offload to host) and activations held by a
/// pipeline stage under 1F1B (or interleaved 1F1B), with the first/last-stage extras.
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

/// Microbatches whose activations a stage holds at its peak under Megatron's 1F1B schedules,
/// counted in layers x microbatches: the warm-up depth (p - stage) for v == 1, and
/// (p - stage - 1) * 2 + (v - 1) * p + 1 model chunks of L/(p v) layers when interleaved (so the
/// first stage holds L * (1 + (p-1)/(p v)) layer-microbatches), capped by m microbatches.
/// Returns layer-microbatches for a uniform split of `num_layers` layers.
double held_layer_microbatches(int num_layers, int stage, int pp, int vp, long long microbatches);

/// Per-GPU memory of one pipeline stage.
struct StageMemory {
  double params = 0;  ///< parameters on this GPU (before ZeRO sharding)
  ModelStateBytes state;
  Bytes activations{};      ///< transformer layers
  Bytes embedding_extra{};  ///< first stage: embedding dropout masks of in-flight microbatches
  Bytes logits{};           ///< last stage: fp32 logits + final LN input of one microbatch
  Bytes total{};
  Bytes capacity{};
  bool fits = false;
  double in_flight = 0;  ///< layer-microbatches of activations held
};

/// Memory of pipeline stage `stage` (uniform split of the layers over p * v chunks) under the
/// configuration `par` (t, p, d, v, microbatch, global batch, SP, recompute, ZeRO, offload).
StageMemory stage_memory(const ModelShape& m, const ParallelConfig& par, int stage, Bytes capacity,
                         bool flash_attention = false);

}  // namespace pw::hw
