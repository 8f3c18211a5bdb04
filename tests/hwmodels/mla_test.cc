// Multi-head latent attention (DeepSeek-V2/V3; Megatron's MLASelfAttention) in the one workload
// model: parameter counts, FLOPs, activation bytes and the TP region's collectives, each against a
// formula written beside the test, and the DeepSeek-V3 config.json import. DeepSeek-V3's shape:
// h 7168, 128 heads, query latent 1536, key/value latent 512, per-head query/key 128 + 64 rotary,
// value 128; 61 layers, the first 3 dense (FFN 18432), then 256 routed experts (top 8, width 2048)
// and one shared expert of width 2048; vocabulary 129280, untied, RMSNorm.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/plan_io.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/scenario.h"
#include "hwmodels/transformer.h"
#include "tests/hwmodels/test_util.h"

namespace pw::hw {
namespace {

const ModelShape& deepseek_v3() {
  const ModelPreset* p = find_model_preset("deepseek-v3");
  EXPECT_NE(p, nullptr);
  return p->shape;
}

// The shape's figures as doubles.
constexpr double kH = 7168, kA = 128, kLq = 1536, kLkv = 512, kNope = 128, kRope = 64, kDv = 128;
constexpr double kF = 18432, kE = 256, kTopk = 8, kFe = 2048, kV = 129280;

// One MLA block's weights: the query down projection and its latent's RMSNorm, the query up
// projection (every head's 128 + 64), the key/value down projection (latent 512 and the shared
// rotary key 64) and its latent's norm, the key/value up projection (every head's 128-wide key
// part and 128-wide value) and the output projection.
constexpr double kAttention = kH * kLq + kLq + kLq * kA * (kNope + kRope) + kH * (kLkv + kRope) +
                              kLkv + kLkv * kA * (kNope + kDv) + kA * kDv * kH;

TEST(Mla, DeepSeekV3HasItsPublished671BParametersAnd37BActive) {
  const double expert = 3 * kH * kFe;  // SwiGLU: gate, up, down
  const double dense = kAttention + 2 * kH + 3 * kH * kF;
  const double moe = kAttention + 2 * kH + kH * kE + kE * expert + expert;  // router, shared
  const double total = 3 * dense + 58 * moe + 2 * kV * kH + kH;             // untied; final norm
  // The multi-token prediction depth: an MoE layer (the last layer's kind), the projection
  // 2h x h and three RMSNorms (embedding, hidden state, final); embedding and head are shared.
  const double mtp = moe + 2 * kH * kH + 3 * kH;
  EXPECT_EQ(mtp_parameter_count(deepseek_v3()), mtp);
  EXPECT_EQ(parameter_count(deepseek_v3()), total + mtp);
  EXPECT_EQ(total, 671'026'404'352.0);  // the sums above, by hand
  // DeepSeek-V3 technical report: "671B total parameters, of which 37B are activated for each
  // token" (the multi-token prediction module outside the 671B). Its model card: "685B, which
  // includes 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module
  // weights", the checkpoint's MTP module holding its own copies of the embedding and head.
  EXPECT_NEAR(total / 1e9, 671, 0.5);
  EXPECT_NEAR((mtp + 2 * kV * kH) / 1e9, 14, 1.0);
  EXPECT_NEAR((total + mtp + 2 * kV * kH) / 1e9, 685, 1.0);
  const double active = total - 58 * (kE - kTopk) * expert;
  EXPECT_NEAR(active / 1e9, 37, 0.6);
  // A token's active parameters: the MTP layer's routed experts are top-8 too.
  EXPECT_EQ(active_parameter_count(deepseek_v3()), active + mtp - (kE - kTopk) * expert);
  ModelShape main = deepseek_v3();
  main.mtp_num_layers = 0;
  EXPECT_EQ(parameter_count(main), total);
  EXPECT_EQ(active_parameter_count(main), active);
}

TEST(Mla, TheDownProjectionsAreReplicatedAndTheRestSplitByT) {
  // One rank of t = 8 holds the down projections and latent norms whole, the up and output
  // projections an eighth each.
  WorkloadOptions o;
  o.tp = 8;
  const ModelShape& m = deepseek_v3();
  const double replicated = kH * kLq + kLq + kH * (kLkv + kRope) + kLkv;
  const double split = kLq * kA * (kNope + kRope) + kLkv * kA * (kNope + kDv) + kA * kDv * kH;
  const double dense = replicated + split / 8 + 2 * kH + 3 * kH * kF / 8;
  EXPECT_EQ(stage_parameter_count(m, o, 1, 2, false, false, 2, nullptr), dense);
}

TEST(Mla, FlopsPerTokenFollowTheFormula) {
  // A dense model with DeepSeek-V3's attention (no experts, 4 layers, s = 4096): per token 6 x
  // (linear weights + output layer) + attention over all pairs 6 L s a (dqk + dv) (scores 2 s a
  // dqk and context 2 s a dv forward, twice that backward); the causal convention halves it.
  ModelShape m = deepseek_v3();
  m.name = "dense-mla";
  m.num_layers = 4;
  m.num_experts = m.moe_router_topk = m.moe_ffn_hidden_size = m.moe_shared_expert_size = 0;
  m.moe_first_dense_layers = 0;
  m.mtp_num_layers = 0;
  const double s = m.seq_length, L = 4;
  const double linear = L * (kAttention - kLq - kLkv + 3 * kH * kF) + kV * kH;
  const double core = 6 * L * s * kA * (kNope + kRope + kDv);
  const IterationFlops fl = iteration_flops(m, WorkloadOptions{}, 2);
  EXPECT_NEAR(fl.model / (2 * s * (6 * linear + core)), 1.0, 1e-12);
  EXPECT_NEAR(fl.model_causal / (2 * s * (6 * linear + core / 2)), 1.0, 1e-12);
}

TEST(Mla, ActivationMemoryIsExactToTheByte) {
  // A dense DeepSeek-V3 layer, t = 2 with SP, b = 1, s = 4096, fused attention, no recompute:
  // outside the TP region 10sh / t (norm inputs and outputs, dropout masks); inside, Q, K, V
  // 2s(q + k + v) / t and the attention output 2so / t with q = k = 128 x 192, v = o = 128 x 128;
  // at the latents, on the rank's s / t tokens, each latent's norm input and output 4(lq + lkv);
  // SwiGLU up (2f) and activation output (f) 2s(3f) / t.
  const ModelShape& m = deepseek_v3();
  WorkloadOptions o;
  o.tp = 2;
  o.sequence_parallel = true;
  o.flash_attention = true;
  const double s = 4096, t = 2, q = kA * (kNope + kRope), v = kA * kDv;
  const double latents = 4 * (s / t) * (kLq + kLkv);
  const double expected =
      10 * s * kH / t + 2 * s * (q + q + v + v) / t + latents + 2 * s * 3 * kF / t;
  EXPECT_EQ(layer_activation_bytes(m, o, false).value, expected);
  // B until W: the up projections' output gradients 2s(q + a(nope + dv)) / t, the output
  // projection's input 2so / t; at the latents the up projections' inputs 2(lq + lkv) and the
  // down projections' output gradients 2(lq + lkv + rope); outside, the two norm outputs and the
  // output gradients of the output projection and the MLP down 8sh / t; the MLP's up output
  // gradient and activation output 2s(3f) / t.
  const double w = 2 * s * (q + kA * (kNope + kDv)) / t + 2 * s * v / t +
                   (s / t) * (2 * (kLq + kLkv) + 2 * (kLq + kLkv + kRope)) + 8 * s * kH / t +
                   2 * s * 3 * kF / t;
  EXPECT_EQ(layer_weight_grad_bytes(m, o, false).value, w);
}

TEST(Mla, TheTpRegionGathersTheLatentsNotTheHiddenState) {
  // t = 8 with SP, an MoE layer with its shared expert (two TP regions): the attention region's
  // forward all-gather moves the latents and the shared rotary key, 2s(lq + lkv + rope) bytes
  // (Megatron gathers q_compressed, kv_compressed and k_pos_emb), the MLP region's 2sh; both
  // regions reduce-scatter 2sh after their row-parallel GEMMs.
  const ModelShape& m = deepseek_v3();
  WorkloadOptions o;
  o.tp = 8;
  o.sequence_parallel = true;
  o.flash_attention = true;
  const double s = 4096;
  // Bytes of the pass's TP collectives of `kind`.
  auto bytes = [&](Pass pass, CollectiveKind kind) {
    double sum = 0;
    for (const TpComm& c : layer_tp_comms(m, o, pass, true))
      if (c.group == CommGroup::kTp && c.kind == kind) sum += c.bytes.value * c.count;
    return sum;
  };
  EXPECT_EQ(bytes(Pass::kForward, CollectiveKind::kAllGather),
            2 * s * (kLq + kLkv + kRope) + 2 * s * kH);
  EXPECT_EQ(bytes(Pass::kForward, CollectiveKind::kReduceScatter), 2 * 2 * s * kH);
  // The backward mirrors it: gradients of the outputs gathered (2sh each), of the latents
  // reduce-scattered.
  EXPECT_EQ(bytes(Pass::kBackwardInput, CollectiveKind::kAllGather), 2 * 2 * s * kH);
  EXPECT_EQ(bytes(Pass::kBackwardInput, CollectiveKind::kReduceScatter),
            2 * s * (kLq + kLkv + kRope) + 2 * s * kH);
}

// deepseek-ai/DeepSeek-V3's config.json (its fields; auto_map and quantization_config
// shortened).
constexpr const char* kDeepSeekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"},
  "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
  "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
  "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
  "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
  "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
  "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8,
  "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "quantization_config": {"quant_method": "fp8"}, "rms_norm_eps": 1e-06,
  "rope_scaling": {"type": "yarn", "factor": 40}, "rope_theta": 10000,
  "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": true,
  "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
  "v_head_dim": 128, "vocab_size": 129280})";

using testing::expect_hf_config_error;

TEST(Mla, DeepSeekV3ConfigGivesThePresetsShape) {
  ModelShape m = parse_hf_config(kDeepSeekV3, "DeepSeek-V3/config.json");
  EXPECT_EQ(m.name, "DeepSeek-V3");
  m.name = "deepseek-v3";
  m.seq_length = 4096;
  EXPECT_EQ(m, deepseek_v3());
  EXPECT_EQ(m.mtp_num_layers, 1);  // the checkpoint's one multi-token prediction module
  std::string no_mtp = kDeepSeekV3;
  no_mtp.replace(no_mtp.find(R"("num_nextn_predict_layers": 1)"), 29,
                 R"("num_nextn_predict_layers": 0)");
  EXPECT_EQ(parse_hf_config(no_mtp, "c/config.json").mtp_num_layers, 0);
  std::string negative = kDeepSeekV3;
  negative.replace(negative.find(R"("num_nextn_predict_layers": 1)"), 29,
                   R"("num_nextn_predict_layers": -1)");
  expect_hf_config_error(negative, "num_nextn_predict_layers");
  std::string deep = kDeepSeekV3;
  deep.replace(deep.find(R"("num_nextn_predict_layers": 1)"), 29,
               R"("num_nextn_predict_layers": 99)");
  expect_hf_config_error(deep, "num_nextn_predict_layers");
  // DeepSeek-V2-Lite style: no query latent (null): queries projected from h.
  std::string lite = kDeepSeekV3;
  lite.replace(lite.find(R"("q_lora_rank": 1536)"), 19, R"("q_lora_rank": null)");
  EXPECT_EQ(parse_hf_config(lite, "c/config.json").q_lora_rank, 0);
  // Shared experts x their width beyond an int: refused, not overflowed.
  std::string shared = kDeepSeekV3;
  shared.replace(shared.find(R"("n_shared_experts": 1)"), 21, R"("n_shared_experts": 2000000)");
  expect_hf_config_error(shared, "n_shared_experts");
  std::string groups = kDeepSeekV3;
  groups.replace(groups.find(R"("num_key_value_heads": 128)"), 26, R"("num_key_value_heads": 16)");
  expect_hf_config_error(groups, "num_key_value_heads");
}

TEST(Mla, IncompleteLatentAttentionIsAnErrorNamingTheKey) {
  auto expect_scenario_error = [](const std::string& model, const std::string& key) {
    testing::expect_scenario_error(model, "{micro_batch_size: 1, global_batch_size: 8}", key);
  };
  const std::string base =
      "{num_layers: 2, hidden_size: 64, num_attention_heads: 8, seq_length: 64, vocab_size: 128, "
      "add_bias_linear: false, ";
  expect_scenario_error(base + "qk_head_dim: 16}", "model.kv_lora_rank");
  expect_scenario_error(base + "kv_lora_rank: 16, qk_head_dim: 16, v_head_dim: 16}",
                        "model.qk_head_dim");
  expect_scenario_error(base +
                            "kv_lora_rank: 16, qk_head_dim: 16, qk_pos_emb_head_dim: 8, "
                            "v_head_dim: 16, num_query_groups: 2}",
                        "model.num_query_groups");
  expect_scenario_error("{preset: deepseek-v3, add_bias_linear: true}", "model.add_bias_linear");
}

TEST(Mla, PlansCarryTheLatentShape) {
  // A plan's model section writes the five MLA keys and reads them back.
  Plan plan;
  plan.model = deepseek_v3();
  plan.config.pipeline_parallel = 1;
  plan.schedule.placement = linear_placement(1, plan.model.num_layers);
  plan.schedule.num_microbatches = 1;
  plan.schedule.actions = {{Action{ActionKind::kF, 0, 0}, Action{ActionKind::kBW, 0, 0}}};
  const std::string text = plan_to_text(plan, DocFormat::kYaml);
  EXPECT_NE(text.find("kv_lora_rank: 512"), std::string::npos) << text;
  EXPECT_EQ(parse_plan(text, DocFormat::kYaml, "p.yaml").model, plan.model);
}

}  // namespace
}  // namespace pw::hw
