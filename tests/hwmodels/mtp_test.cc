// Multi-token prediction (DeepSeek-V3; Megatron's --mtp-num-layers) in the one workload model:
// each depth on the last pipeline stage runs the embedding of the shifted tokens, two norms, the
// projection of their concatenation 2h -> h (column-parallel, no bias), one transformer layer of
// the last layer's kind, a final norm and the shared output head with its loss. Expected values
// are formulas written beside each test (Megatron's FLOPs count for MTP: a layer, 2h^2 and a
// logits GEMM h V per token and depth, times 6).
#include <gtest/gtest.h>

#include <string>

#include "core/plan_io.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/profile.h"
#include "hwmodels/transformer.h"
#include "tests/hwmodels/test_util.h"

namespace pw::hw {
namespace {

// A small Llama-style model: h 512, 8 heads in 2 groups of 64, SwiGLU 1536, 4 layers, s 1024,
// V 32000, untied; the layers dense unless the test makes them MoE.
ModelShape small(int mtp) {
  ModelShape m;
  m.name = "small";
  m.num_layers = 4;
  m.hidden_size = 512;
  m.num_attention_heads = 8;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 1536;
  m.seq_length = 1024;
  m.vocab_size = 32000;
  m.swiglu = m.rmsnorm = m.rope = m.untie_embeddings = true;
  m.bias = false;
  m.mtp_num_layers = mtp;
  return m;
}

constexpr double kH = 512, kF = 1536, kV = 32000, kS = 1024, kQ = 512, kKv = 128;
// One dense layer: q, k, v and output projections, SwiGLU MLP, two RMSNorms.
constexpr double kLayer = kH * (kQ + 2 * kKv) + kQ * kH + 3 * kH * kF + 2 * kH;

TEST(Mtp, ParametersAreALayerTheProjectionAndThreeNorms) {
  const double depth = kLayer + 2 * kH * kH + 3 * kH;
  EXPECT_EQ(mtp_parameter_count(small(2)), 2 * depth);
  EXPECT_EQ(parameter_count(small(2)) - parameter_count(small(0)), 2 * depth);
  EXPECT_EQ(non_embedding_parameter_count(small(2)), non_embedding_parameter_count(small(0)));
  // The last of p = 2 stages (layers 2..3) on t = 2: its layers, final norm and output layer,
  // then per depth the projection (split by t), a layer (split as the others) and three norms,
  // and once a copy of the input embedding for the shifted tokens (untied); tied, the output
  // layer's copy of the embedding serves both.
  WorkloadOptions o;
  o.tp = 2;
  const double layer_t2 = kH * (kQ + 2 * kKv) / 2 + kQ * kH / 2 + 3 * kH * kF / 2 + 2 * kH;
  const double last = 2 * layer_t2 + kH + kV * kH / 2;
  const double depth_t2 = layer_t2 + 2 * kH * kH / 2 + 3 * kH;
  EXPECT_EQ(stage_parameter_count(small(0), o, 2, 4, false, true, 2), last);
  EXPECT_EQ(stage_parameter_count(small(1), o, 2, 4, false, true, 2),
            last + depth_t2 + kV * kH / 2);
  ModelShape tied = small(1);
  tied.untie_embeddings = false;
  EXPECT_EQ(stage_parameter_count(tied, o, 2, 4, false, true, 2), last + depth_t2);
  // One stage: the embedding is already there.
  EXPECT_EQ(stage_parameter_count(small(1), o, 0, 4, true, true, 1) -
                stage_parameter_count(small(0), o, 0, 4, true, true, 1),
            depth_t2);
  // The tensors a rank holds sum to its count (ZeRO-3 gathers them by tensor).
  for (const int pp : {1, 2}) {
    double sum = 0;
    for (double n : stage_weight_tensors(small(2), o, 2, 4, pp == 1, true, pp)) sum += n;
    EXPECT_EQ(sum, stage_parameter_count(small(2), o, 2, 4, pp == 1, true, pp)) << pp;
  }
}

TEST(Mtp, FlopsAddALayerTheProjectionAndALogitsGemmPerDepth) {
  // Model FLOPs per token: 6 x (GEMM weights per layer + the output layer h V) + attention over
  // all s x s pairs, 2 s (q + v) per layer forward (scores and context) and twice that backward.
  // MTP adds per depth a layer, the projection 2h x h and a logits GEMM h V (Megatron's count).
  const double gemms = kLayer - 2 * kH;  // the norms are not FLOPs
  const double core = 3 * 2 * kS * (kQ + kQ);
  auto per_token = [&](double layers, double heads, double proj) {
    return 6 * (layers * gemms + heads * kH * kV + proj) + layers * core;
  };
  const IterationFlops base = iteration_flops(small(0), WorkloadOptions{}, 2);
  const IterationFlops two = iteration_flops(small(2), WorkloadOptions{}, 2);
  EXPECT_NEAR(base.model / (2 * kS * per_token(4, 1, 0)), 1.0, 1e-12);
  EXPECT_NEAR(two.model / (2 * kS * per_token(6, 3, 2 * 2 * kH * kH)), 1.0, 1e-12);
  // Full recomputation reruns every layer's forward, the depths' layers and projections too
  // (not the heads): per token 2 x GEMM weights + 2 s (q + v) per layer, 2 x 2h^2 per depth.
  WorkloadOptions full;
  full.recompute = Recompute::kFull;
  const IterationFlops r = iteration_flops(small(2), full, 2);
  const double rerun = 6 * (2 * gemms + 2 * kS * (kQ + kQ)) + 2 * 2 * (2 * kH * kH);
  EXPECT_NEAR((r.hardware - two.hardware) / (2 * kS * rerun), 1.0, 1e-12);
}

TEST(Mtp, TheLastStageCarriesEachDepth) {
  // t = 2 with SP, b = 1, fused attention: the last stage with one depth against the same stage
  // without, pass by pass.
  const GpuModel gpu(resolve_profile("dgx-h100", "", "", "").gpu);
  WorkloadOptions o;
  o.tp = 2;
  o.sequence_parallel = true;
  o.flash_attention = true;
  const StageCosts with = stage_costs(small(1), gpu, o, 2, 4, false, true);
  const StageCosts without = stage_costs(small(0), gpu, o, 2, 4, false, true);
  const StageCosts layer = stage_costs_for(small(0), gpu, o, 1, 0, false, false);
  // F FLOPs: a layer, the projection 2 s (2h) (h / t) and the logits 2 s h (V / t).
  EXPECT_EQ(with.f_flops.value - without.f_flops.value,
            layer.f_flops.value + 2 * kS * 2 * kH * kH / 2 + 2 * kS * kH * kV / 2);
  // W: the same GEMMs' weight gradients.
  EXPECT_EQ(with.w_flops.value - without.w_flops.value,
            layer.w_flops.value + 2 * kS * 2 * kH * kH / 2 + 2 * kS * kH * kV / 2);
  EXPECT_GT(with.f, without.f + layer.f);
  // Held from F until B, per depth: a layer's activations, the head's (final norm input 2sh /
  // t, fp32 logits 4 s V / t) and the two norms' inputs and the projection's input (2 x 2sh and
  // 2 x 2sh, on the rank's s / t tokens). From B until W: a layer's, the head's (2sh + 2 s V /
  // t) and the projection's input (2 x 2sh / t) and output gradient (2 s h / t).
  EXPECT_EQ(with.m_b.value - without.m_b.value,
            layer.m_b.value + 2 * kS * kH / 2 + 4 * kS * kV / 2 + 8 * kS * kH / 2);
  EXPECT_EQ(with.m_w.value - without.m_w.value,
            layer.m_w.value + 2 * kS * kH + 2 * kS * kV / 2 + 4 * kS * kH / 2 + 2 * kS * kH / 2);
  // Its TP collectives, beside the layer's, the embedding's and the head's: F gathers the
  // projection's input (2 x 2sh) and output (2sh); B gathers the split's gradient (2sh) and
  // reduce-scatters the input gradient (2 x 2sh); W gathers the input again.
  auto bytes = [](const std::vector<TpComm>& comms, CollectiveKind k) {
    double b = 0;
    for (const TpComm& c : comms)
      if (c.kind == k && std::string(c.where).rfind("mtp", 0) == 0) b += c.bytes.value * c.count;
    return b;
  };
  EXPECT_EQ(bytes(with.comm_f, CollectiveKind::kAllGather), 2 * 2 * kS * kH + 2 * kS * kH);
  EXPECT_EQ(bytes(with.comm_b, CollectiveKind::kAllGather), 2 * kS * kH);
  EXPECT_EQ(bytes(with.comm_b, CollectiveKind::kReduceScatter), 2 * 2 * kS * kH);
  EXPECT_EQ(bytes(with.comm_w, CollectiveKind::kAllGather), 2 * 2 * kS * kH);
  // Other stages carry none of it.
  const StageCosts first = stage_costs(small(1), gpu, o, 0, 2, true, false);
  EXPECT_EQ(first.f, stage_costs(small(0), gpu, o, 0, 2, true, false).f);
}

// Megatron's mtp_standalone: the depths on a stage of their own before the loss's. The two
// stages split the last stage's work between them, none added or lost: the depth stage runs
// each depth's layer, own kernels and embedding, the loss stage the main model's and every
// depth's logits (Megatron's process_mtp_loss after the hop). The depth stage sends the main
// model's and each depth's hidden states on: (1 + D) x 2 s h / t bytes with SP.
TEST(Mtp, AStageOfTheDepthsAloneSplitsTheLastStagesWork) {
  const GpuModel gpu(resolve_profile("dgx-h100", "", "", "").gpu);
  WorkloadOptions o;
  o.tp = 2;
  o.sequence_parallel = true;
  o.flash_attention = true;
  for (const bool full : {false, true}) {
    o.recompute = full ? Recompute::kFull : Recompute::kNone;
    const ModelShape m = small(2);
    const StageCosts with = stage_costs(m, gpu, o, 4, 4, false, true);  // layout "...|mmL"
    const StageCosts depths = stage_costs(m, gpu, o, 4, 4, StageRole{false, false, true});
    const StageCosts loss = stage_costs(m, gpu, o, 4, 4, StageRole{false, true, false});
    // Pass times are whole picoseconds per list of kernels: a split list may round apart by
    // one picosecond per depth and pass.
    for (auto f : {&StageCosts::f, &StageCosts::b, &StageCosts::w, &StageCosts::r})
      EXPECT_NEAR(static_cast<double>(depths.*f + loss.*f), static_cast<double>(with.*f), 2.0);
    EXPECT_DOUBLE_EQ(depths.f_flops.value + loss.f_flops.value, with.f_flops.value);
    EXPECT_DOUBLE_EQ(depths.w_flops.value + loss.w_flops.value, with.w_flops.value);
    EXPECT_DOUBLE_EQ(depths.m_b.value + loss.m_b.value, with.m_b.value);
    EXPECT_DOUBLE_EQ(depths.m_w.value + loss.m_w.value, with.m_w.value);
    EXPECT_DOUBLE_EQ(depths.m_r.value + loss.m_r.value, with.m_r.value);
    EXPECT_DOUBLE_EQ(depths.comm_bytes_f.value + loss.comm_bytes_f.value, with.comm_bytes_f.value);
    EXPECT_DOUBLE_EQ(depths.comm_bytes_b.value + loss.comm_bytes_b.value, with.comm_bytes_b.value);
    // The logits (2 s h V / t FLOPs each in F) of the main model and both depths on the loss
    // stage; none on the depths' stage, which holds no head.
    EXPECT_DOUBLE_EQ(loss.f_flops.value, 3 * 2 * kS * kH * kV / 2);
    EXPECT_EQ(depths.p2p_bytes.value, 3 * 2 * kS * kH / 2);
    EXPECT_EQ(loss.p2p_bytes.value, with.p2p_bytes.value);
    EXPECT_EQ(with.p2p_bytes.value, 2 * kS * kH / 2);
  }
  // The role of each stage of a pipeline of 4.
  for (int i = 0; i < 4; ++i) {
    const StageRole own = stage_role(i, 4, true), with_loss = stage_role(i, 4, false);
    EXPECT_EQ(own.first, i == 0);
    EXPECT_EQ(own.last, i == 3);
    EXPECT_EQ(own.mtp, i == 2);
    EXPECT_EQ(with_loss.mtp, i == 3);
  }
}

// Parameters: the depth stage holds the depths and a copy of the input embedding for the
// shifted tokens (Megatron builds the embedding wherever mtp_process is); the loss stage the
// final norm and the output layer (a tied copy when tied). Untied, that is the last stage's
// count split in two; tied, one embedding copy more (the last stage's copy served both).
TEST(Mtp, AStageOfTheDepthsAloneHoldsTheirEmbeddingCopy) {
  WorkloadOptions o;
  o.tp = 2;
  for (const bool tied : {false, true}) {
    ModelShape m = small(2);
    m.untie_embeddings = !tied;
    const double with = stage_parameter_count(m, o, 4, 4, false, true, 4);
    const double depths = stage_parameter_count(m, o, 4, 4, StageRole{false, false, true}, 4);
    const double loss = stage_parameter_count(m, o, 4, 4, StageRole{false, true, false}, 4);
    const double copy = kV * kH / 2;
    EXPECT_EQ(depths + loss, with + (tied ? copy : 0.0)) << tied;
    EXPECT_EQ(loss, kH + copy) << tied;  // final norm and output layer (or its tied copy)
    for (const StageRole role : {StageRole{false, false, true}, StageRole{false, true, false},
                                 StageRole{true, false, true}}) {
      double sum = 0;
      for (double n : stage_weight_tensors(m, o, 0, 4, role, 2)) sum += n;
      EXPECT_EQ(sum, stage_parameter_count(m, o, 0, 4, role, 2)) << tied << role.first;
    }
    // Two stages, the depths on the first (Megatron's "Et*4m|L"): the first stage's input
    // embedding serves the depths (pre_process and mtp_process build one), so against the
    // depths with the loss ("Et*4|mL") the untied model holds one embedding copy fewer (the
    // loss stage's copy for the depths) and the tied one the same (the output layer's copy
    // stays with the loss).
    const double first_alone = stage_parameter_count(m, o, 0, 4, StageRole{true, false, false}, 2);
    const double first_depths = stage_parameter_count(m, o, 0, 4, StageRole{true, false, true}, 2);
    const double loss2 = stage_parameter_count(m, o, 4, 4, StageRole{false, true, false}, 2);
    const double with2 = stage_parameter_count(m, o, 4, 4, false, true, 2);
    EXPECT_EQ(first_depths + loss2, first_alone + with2 - (tied ? 0.0 : copy)) << tied;
  }
}

TEST(Mtp, ContextParallelRanksRollTheTokensInTheForward) {
  // Megatron's roll_tensor with a CP group (multi_token_prediction.py): per depth and microbatch
  // the layer rolls its input ids and position ids and the loss its labels and loss mask, each
  // an exchange of one element per sequence (b = 2 here) with the neighbouring CP ranks, waited
  // for: int64 ids 8 b = 16 bytes (3 rolls), the float32 mask 4 b = 8 bytes (1 roll). With
  // mtp = 2 depths: 6 and 2 messages in F; none in B, W or a recompute; none without CP.
  const GpuModel gpu(resolve_profile("dgx-h100", "", "", "").gpu);
  WorkloadOptions o;
  o.cp = 2;
  o.micro_batch = 2;
  o.flash_attention = true;
  o.recompute = Recompute::kFull;
  const StageCosts last = stage_costs(small(2), gpu, o, 2, 4, false, true);
  auto rolls = [](const std::vector<TpComm>& comms, double bytes) {
    int n = 0;
    for (const TpComm& c : comms)
      if (c.group == CommGroup::kCp && c.kind == CollectiveKind::kSendRecv && c.waited) {
        EXPECT_FALSE(is_cp_ring_step(c));
        if (c.bytes.value == bytes) n += c.count;
      }
    return n;
  };
  EXPECT_EQ(rolls(last.comm_f, 16), 6);
  EXPECT_EQ(rolls(last.comm_f, 8), 2);
  for (const auto* comms : {&last.comm_b, &last.comm_w, &last.comm_r})
    EXPECT_EQ(rolls(*comms, 16) + rolls(*comms, 8), 0);
  // The attention's own ring steps stay ring steps.
  int ring = 0;
  for (const TpComm& c : last.comm_f) ring += is_cp_ring_step(c) ? c.count : 0;
  EXPECT_EQ(ring, (2 + 2) * (2 - 1));  // 2 layers and 2 depths, cp - 1 steps each
  // Only the last stage rolls, and only with CP.
  EXPECT_EQ(rolls(stage_costs(small(2), gpu, o, 0, 2, true, false).comm_f, 16), 0);
  o.cp = 1;
  EXPECT_EQ(rolls(stage_costs(small(2), gpu, o, 2, 4, false, true).comm_f, 16), 0);
}

TEST(Mtp, DeepSeekV3sDepthIsAnMoeLayer) {
  const ModelShape& m = find_model_preset("deepseek-v3")->shape;
  EXPECT_EQ(m.mtp_num_layers, 1);
  EXPECT_TRUE(mtp_layer_is_moe(m));
  ModelShape dense = small(1);
  EXPECT_FALSE(mtp_layer_is_moe(dense));
}

TEST(Mtp, ScenariosAndPlansCarryTheDepths) {
  const std::string model =
      "{num_layers: 4, hidden_size: 512, num_attention_heads: 8, seq_length: 1024, "
      "vocab_size: 32000, position_embedding_type: rope, ";
  const Scenario s = testing::scenario(model + "mtp_num_layers: 2}",
                                       "{micro_batch_size: 1, global_batch_size: 8}");
  EXPECT_EQ(s.model.mtp_num_layers, 2);
  testing::expect_scenario_error(model + "mtp_num_layers: -1}",
                                 "{micro_batch_size: 1, global_batch_size: 8}",
                                 "model.mtp_num_layers");
  testing::expect_scenario_error(model + "mtp_num_layers: 5}",
                                 "{micro_batch_size: 1, global_batch_size: 8}",
                                 "model.mtp_num_layers");
  // Megatron refuses MTP with learned absolute positions.
  testing::expect_scenario_error(
      "{num_layers: 4, hidden_size: 512, num_attention_heads: 8, seq_length: 1024, "
      "vocab_size: 32000, mtp_num_layers: 1}",
      "{micro_batch_size: 1, global_batch_size: 8}", "model.mtp_num_layers");
  // A plan's model section writes the key when there are depths and reads it back.
  Plan plan;
  plan.model = small(2);
  plan.config.pipeline_parallel = 1;
  plan.schedule.placement = linear_placement(1, plan.model.num_layers);
  plan.schedule.num_microbatches = 1;
  plan.schedule.actions = {{Action{ActionKind::kF, 0, 0}, Action{ActionKind::kBW, 0, 0}}};
  const std::string text = plan_to_text(plan, DocFormat::kYaml);
  EXPECT_NE(text.find("mtp_num_layers: 2"), std::string::npos) << text;
  EXPECT_EQ(parse_plan(text, DocFormat::kYaml, "p.yaml").model, plan.model);
  plan.model.mtp_num_layers = 0;
  EXPECT_EQ(plan_to_text(plan, DocFormat::kYaml).find("mtp_num_layers"), std::string::npos);
}

}  // namespace
}  // namespace pw::hw
