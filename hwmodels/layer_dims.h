#pragma once
/// Internal to hwmodels' workload model (transformer.cc: operations; stage_costs.cc: a stage's
/// costs; activations.cc: bytes held between passes): one microbatch's shapes on one rank and the
/// element sizes both read. Not part of the hwmodels interface.
#include "hwmodels/transformer.h"

namespace pw::hw::detail {

constexpr double kAct = 2.0;      // bytes per 16-bit activation element
constexpr double kFp8Cast = 3.0;  // bytes per element of a bf16 -> fp8 cast (read 2, write 1)

// Shape shorthands for one microbatch on one rank.
struct Dims {
  long long s;       // tokens of a sequence on this rank: seq_length / cp
  long long sf;      // whole sequence (keys each query may see)
  long long window;  // sliding attention window (attention_window; 0 = none)
  long long b, h, a, f, v, t, cp, tokens;
  // Attention widths over all heads: query q, key k, value vw, attention output o (the
  // projection's input); per head dqk (query/key) and dv (value). MHA/GQA: dqk = dv = the
  // head dim, o = q; MLA: dqk = qk_head_dim + qk_pos_emb_head_dim, dv = v_head_dim.
  long long q, k, vw, o, dqk, dv;
  // MLA only (0 otherwise): query latent (0 without one), key/value latent, rotary key width.
  long long lq, lkv, rope;
  bool sp, gated, bias;
  double sp_div;  // tokens held per rank outside the TP region: 1/t with SP
};

/// The shapes of `m` under `o` (sequence split by cp, widths by the model's attention and MLP).
Dims dims(const ModelShape& m, const WorkloadOptions& o);

// Rows of the grouped expert GEMMs on this rank: its tokens (SP-sharded) times top-k, gathered
// over the expert-TP group, times the capacity factor when tokens are padded to capacity.
double expert_rows(const ModelShape& m, const WorkloadOptions& o, const Dims& d);

// The GEMMs a sequence-parallel collective of `pass` is paired with (see StageCosts::hide_f).
bool tp_paired(const LayerOp& op, Pass pass);
// The paired GEMMs Transformer Engine's userbuffers overlap splits into tp chunks of rows
// (NeMo's userbuffers configurations, nemo/collections/llm/recipes/tp_overlap_configs/
// userbuffers.py: qkv/fc1 fprop and proj/fc2 dgrad as ring exchanges of t steps, proj/fc2 fprop
// as ring exchanges or pipelined reduce-scatters of num_splits = 4 = t chunks in the t = 4
// configurations); qkv/fc1 dgrad and the weight gradients overlap in bulk, unsplit.
bool tp_overlap_split(const LayerOp& op, Pass pass);
// Attention-core GEMMs (scores, context): both operands are activations.
bool is_attention_core(const LayerOp& op);
// The kernels of the attention core, GEMMs and the softmax/dropout between them (what a
// context-parallel ring step runs under).
bool in_attention_core(const LayerOp& op);

}  // namespace pw::hw::detail
