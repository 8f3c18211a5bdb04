// From plan to launch: the Megatron-LM argument list and the torchtitan TOML of a plan read back
// into the plan's configuration; custom orders travel as PyTorch CSV that the project's own
// importer reads back into the same schedule; what a framework cannot run is refused naming the
// setting and the nearest one it can; `--framework` keeps only what the framework runs.
#include "planner/search/frameworks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/profile.h"
#include "planner/search/search.h"
#include "tests/planner/frameworks_test_util.h"

namespace pw {
namespace {

using testing::make_plan;
using testing::parse_args;
using testing::parse_toml;
using testing::refusal_key;

TEST(Frameworks, MegatronArgumentsCarryMultiHeadLatentAttention) {
  // DeepSeek-V3 (61 layers: 1 + 4 x 15 over p = 16): Megatron's MLA arguments (its names,
  // megatron/training/arguments.py) with the preset's widths; no query groups.
  std::vector<int> layers(16, 4);
  layers[0] = 1;
  const Plan plan = make_plan("deepseek-v3", "1f1b", 1, 1, 16, 1, 1, layers, 16);
  const auto a = parse_args(export_plan(plan, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.count("--multi-latent-attention"), 1u);
  EXPECT_EQ(a.at("--q-lora-rank"), "1536");
  EXPECT_EQ(a.at("--kv-lora-rank"), "512");
  EXPECT_EQ(a.at("--qk-head-dim"), "128");
  EXPECT_EQ(a.at("--qk-pos-emb-head-dim"), "64");
  EXPECT_EQ(a.at("--v-head-dim"), "128");
  EXPECT_EQ(a.count("--group-query-attention"), 0u);
  EXPECT_EQ(a.at("--num-experts"), "256");
  EXPECT_EQ(a.at("--moe-shared-expert-intermediate-size"), "2048");
  EXPECT_EQ(a.at("--mtp-num-layers"), "1");  // its one multi-token prediction depth
  // NeMo and torchtitan build models from their recipes and flavors: refused, naming the
  // multi-token prediction depths first, then (without them) the model.
  for (Framework fw : {Framework::kNemo, Framework::kTorchtitan}) {
    for (const int mtp : {1, 0}) {
      Plan p = plan;
      p.model.mtp_num_layers = mtp;
      try {
        export_plan(p, fw, "p", "");
        ADD_FAILURE() << framework_name(fw);
      } catch (const ConfigError& e) {
        EXPECT_EQ(e.key(), mtp > 0 ? "model.mtp_num_layers" : "model") << e.what();
      }
    }
  }
  Plan main = plan;
  main.model.mtp_num_layers = 0;
  EXPECT_EQ(
      parse_args(export_plan(main, Framework::kMegatron, "p", "").text).count("--mtp-num-layers"),
      0u);
}

TEST(Frameworks, MegatronArgumentsReadBackIntoThePlansConfiguration) {
  // Llama 3 70B (80 layers, GQA 64/8, SwiGLU 28672, RMSNorm, RoPE, untied, no bias) at t4 cp2
  // p4 d8 with 19/21/21/19 layers (one layer off each end stage), ZeRO-1, selective, FP8.
  Plan plan = make_plan("llama3-70b", "1f1b", 4, 2, 4, 8, 1, {19, 21, 21, 19});
  plan.config.zero_stage = 1;
  plan.config.recompute = "selective";
  plan.config.fp8 = "hybrid";
  const auto a = parse_args(export_plan(plan, Framework::kMegatron, "p", "").text);
  const ModelShape& m = plan.model;
  const ParallelConfig& pc = plan.config;
  EXPECT_EQ(a.at("--num-layers"), std::to_string(m.num_layers));
  EXPECT_EQ(a.at("--hidden-size"), std::to_string(m.hidden_size));
  EXPECT_EQ(a.at("--ffn-hidden-size"), std::to_string(m.ffn_hidden_size));
  EXPECT_EQ(a.at("--num-attention-heads"), std::to_string(m.num_attention_heads));
  EXPECT_EQ(a.count("--group-query-attention"), 1u);
  EXPECT_EQ(a.at("--num-query-groups"), "8");
  EXPECT_EQ(a.at("--seq-length"), std::to_string(m.seq_length));
  EXPECT_EQ(a.count("--swiglu"), 1u);
  EXPECT_EQ(a.at("--normalization"), "RMSNorm");
  EXPECT_EQ(a.count("--untie-embeddings-and-output-weights"), 1u);
  EXPECT_EQ(a.at("--position-embedding-type"), "rope");
  EXPECT_EQ(a.count("--disable-bias-linear"), 1u);
  EXPECT_EQ(a.count("--num-experts"), 0u);
  EXPECT_EQ(a.at("--tensor-model-parallel-size"), "4");
  EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "4");
  EXPECT_EQ(a.at("--context-parallel-size"), "2");
  EXPECT_EQ(a.at("--cp-comm-type"), "p2p");
  {
    Plan ag = plan;
    ag.config.cp_comm_type = "all_gather";
    EXPECT_EQ(parse_args(export_plan(ag, Framework::kMegatron, "p", "").text).at("--cp-comm-type"),
              "all_gather");
  }
  EXPECT_EQ(a.count("--sequence-parallel"), 1u);
  EXPECT_EQ(a.count("--num-layers-per-virtual-pipeline-stage"), 0u);
  EXPECT_EQ(a.at("--decoder-first-pipeline-num-layers"), "19");
  EXPECT_EQ(a.at("--decoder-last-pipeline-num-layers"), "19");
  EXPECT_EQ(a.at("--micro-batch-size"), std::to_string(pc.micro_batch_size));
  EXPECT_EQ(a.at("--global-batch-size"), std::to_string(pc.global_batch_size));
  EXPECT_EQ(a.at("--recompute-granularity"), "selective");
  EXPECT_EQ(a.count("--use-distributed-optimizer"), 1u);
  EXPECT_EQ(a.count("--use-megatron-fsdp"), 0u);
  // Megatron's defaults (fp32 gradients, no overlaps) need no flag; the plan's settings do.
  for (const char* flag : {"--grad-reduce-in-bf16", "--overlap-grad-reduce",
                           "--overlap-param-gather", "--tp-comm-overlap"})
    EXPECT_EQ(a.count(flag), 0u) << flag;
  Plan tuned = plan;
  tuned.config.grad_reduce_in_fp32 = false;
  tuned.config.overlap_grad_reduce = true;
  tuned.config.overlap_param_gather = true;
  tuned.config.tp_comm_overlap = true;
  const auto t = parse_args(export_plan(tuned, Framework::kMegatron, "p", "").text);
  for (const char* flag : {"--grad-reduce-in-bf16", "--overlap-grad-reduce",
                           "--overlap-param-gather", "--tp-comm-overlap"})
    EXPECT_EQ(t.count(flag), 1u) << flag;
  EXPECT_EQ(t.count("--no-align-param-gather"), 0u);  // Megatron aligns by default
  EXPECT_EQ(t.count("--ddp-bucket-size"), 0u);
  tuned.config.align_param_gather = false;
  tuned.config.ddp_bucket_size = 134217728;
  const auto u = parse_args(export_plan(tuned, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(u.count("--no-align-param-gather"), 1u);
  EXPECT_EQ(u.at("--ddp-bucket-size"), "134217728");
  EXPECT_EQ(a.at("--fp8-format"), "hybrid");
  EXPECT_EQ(a.at("--fp8-recipe"), "delayed");  // Megatron's default, the plan's
  EXPECT_EQ(a.count("--bf16"), 1u);
  // Data parallelism is what is left: GPUs / (t cp p) = 256 / 32 = 8 = the plan's d.
  EXPECT_EQ(pc.num_gpus() / (4 * 2 * 4), pc.data_parallel);
}

TEST(Frameworks, MegatronInterleavedFullRecomputeZero3AndMoe) {
  // Interleaved at p4 v2 over 80 layers: 8 stages of 10 = --num-layers-per-virtual-pipeline-stage
  // 10 (80 / (4 * 2)); full recompute uniform over 1 layer; ZeRO-3 = Megatron FSDP.
  Plan plan = make_plan("llama3-70b", "interleaved", 8, 1, 4, 2, 2, std::vector<int>(8, 10));
  plan.config.recompute = "full";
  plan.config.zero_stage = 3;
  plan.config.optimizer_offload = true;
  auto a = parse_args(export_plan(plan, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.at("--num-layers-per-virtual-pipeline-stage"), "10");
  EXPECT_EQ(a.count("--decoder-first-pipeline-num-layers"), 0u);
  EXPECT_EQ(a.at("--recompute-granularity"), "full");
  EXPECT_EQ(a.at("--recompute-method"), "uniform");
  EXPECT_EQ(a.at("--recompute-num-layers"), "1");
  EXPECT_EQ(a.count("--use-megatron-fsdp"), 1u);
  EXPECT_EQ(a.at("--data-parallel-sharding-strategy"), "optim_grads_params");
  EXPECT_EQ(a.count("--optimizer-cpu-offload"), 1u);
  EXPECT_EQ(a.count("--context-parallel-size"), 0u);
  // 1F1B with explicit recomputation is Megatron's 1F1B with full recomputation.
  Plan r = make_plan("llama3-8b", "1f1b-r", 1, 1, 4, 2, 1, std::vector<int>(4, 8));
  r.config.recompute = "full";
  a = parse_args(export_plan(r, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.at("--recompute-granularity"), "full");
  // Mixtral 8x7B (32 layers, 8 experts, top-2): EP 8 within cp*d = 8, expert TP = t.
  Plan moe = make_plan("mixtral-8x7b", "1f1b", 2, 1, 4, 8, 1, std::vector<int>(4, 8));
  moe.config.expert_parallel = 8;
  a = parse_args(export_plan(moe, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.at("--num-experts"), "8");
  EXPECT_EQ(a.at("--moe-router-topk"), "2");
  EXPECT_EQ(a.at("--expert-model-parallel-size"), "8");
  EXPECT_EQ(a.at("--expert-tensor-parallel-size"), "2");
  EXPECT_EQ(a.count("--moe-layer-freq"), 0u);  // every layer is MoE: Megatron's default 1
  // First k layers dense, the rest MoE (DeepSeek's first_k_dense): 3 dense of 32 -> the list
  // expression ([0]*3+[1]*29).
  moe.model.moe_first_dense_layers = 3;
  a = parse_args(export_plan(moe, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.at("--moe-layer-freq"), "([0]*3+[1]*29)");
}

TEST(Frameworks, RefusalsNameTheSettingAndTheNearestRunnableOne) {
  // Megatron has no zero-bubble or V-shape schedules.
  const Plan zb = make_plan("llama3-8b", "zb-h1", 1, 1, 4, 2, 1, std::vector<int>(4, 8));
  std::string why = refusal_key(zb, Framework::kMegatron);
  EXPECT_EQ(why.rfind("schedule | ", 0), 0u) << why;
  EXPECT_NE(why.find("'zb-h1'"), std::string::npos) << why;
  EXPECT_NE(why.find("nearest it can: '1f1b'"), std::string::npos) << why;
  const Plan vh = make_plan("llama3-8b", "v-half", 1, 1, 4, 2, 1, std::vector<int>(8, 4));
  why = refusal_key(vh, Framework::kMegatron);
  EXPECT_NE(why.find("nearest it can: 'interleaved'"), std::string::npos) << why;
  // An uneven interleaved split is not one --num-layers-per-virtual-pipeline-stage or NeMo's
  // first/last stage sizes can express; Megatron-LM takes it as its pipeline layout: E and 3
  // layers, six stages of 4 (folded), the last 5 and the loss L.
  const Plan uneven =
      make_plan("llama3-8b", "interleaved", 1, 1, 4, 2, 2, {3, 4, 4, 4, 4, 4, 4, 5});
  why = refusal_key(uneven, Framework::kNemo);
  EXPECT_EQ(why.rfind("schedule.placement | ", 0), 0u) << why;
  EXPECT_NE(why.find("3/4/4/4/4/4/4/5"), std::string::npos) << why;
  EXPECT_EQ(refusal_key(uneven, Framework::kMegatron), "");
  const auto args = parse_args(export_plan(uneven, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(args.at("--pipeline-model-parallel-layout"), "Et*3|(t*4|)*6,t*5L");
  EXPECT_EQ(args.count("--num-layers-per-virtual-pipeline-stage"), 0u);
  // The multi-token prediction depth on a stage of its own (mtp_standalone) exists only as a
  // layout, even where the split alone is Megatron's decoder_last_pipeline_num_layers 0.
  Plan own = make_plan("llama3-8b", "1f1b", 1, 1, 4, 2, 1, {11, 11, 10, 0});
  own.model.mtp_num_layers = 1;
  own.config.mtp_standalone = true;
  const auto own_args = parse_args(export_plan(own, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(own_args.at("--pipeline-model-parallel-layout"), "Et*11|t*11|t*10m|L");
  EXPECT_EQ(own_args.at("--mtp-num-layers"), "1");
  EXPECT_EQ(own_args.count("--decoder-last-pipeline-num-layers"), 0u);
  // torchtitan: FSDP2 is ZeRO-1 under a pipeline (PyTorch's runtime reduces each stage's
  // gradients once, at its last backward, and keeps the gathered weights) and ZeRO-2/3 without
  // one; TP always with sequence parallelism, no GPT-3 flavor, one pipeline.
  Plan z1 = make_plan("llama3-8b", "1f1b", 2, 1, 4, 2, 1, std::vector<int>(4, 8));
  z1.config.zero_stage = 1;
  EXPECT_EQ(refusal_key(z1, Framework::kTorchtitan), "");
  for (int z : {2, 3}) {
    Plan zp = z1;
    zp.config.zero_stage = z;
    why = refusal_key(zp, Framework::kTorchtitan);
    EXPECT_EQ(why.rfind("config.zero_stage | ", 0), 0u) << why;
    EXPECT_NE(why.find("nearest: zero_stage 1"), std::string::npos) << why;
    EXPECT_EQ(refusal_key(zp, Framework::kMegatron), "");  // Megatron-FSDP reduces every backward
  }
  {
    Plan flat = make_plan("llama3-8b", "1f1b", 2, 1, 1, 8, 1, {32});
    flat.config.zero_stage = 1;
    why = refusal_key(flat, Framework::kTorchtitan);
    EXPECT_EQ(why.rfind("config.zero_stage | ", 0), 0u) << why;
    EXPECT_NE(why.find("nearest: zero_stage 2"), std::string::npos) << why;
    for (int z : {0, 2, 3}) {
      flat.config.zero_stage = z;
      EXPECT_EQ(refusal_key(flat, Framework::kTorchtitan), "") << z;
    }
    // FSDP2 always shards over the context ranks: no ZeRO-0 with context parallelism.
    Plan cp = make_plan("llama3-8b", "1f1b", 2, 2, 4, 2, 1, std::vector<int>(4, 8));
    cp.config.zero_stage = 0;
    why = refusal_key(cp, Framework::kTorchtitan);
    EXPECT_EQ(why.rfind("config.zero_stage | ", 0), 0u) << why;
    EXPECT_NE(why.find("nearest: zero_stage 1"), std::string::npos) << why;
    cp.config.zero_stage = 1;
    EXPECT_EQ(refusal_key(cp, Framework::kTorchtitan), "");
  }
  z1.config.zero_stage = 0;
  z1.config.sequence_parallel = false;
  why = refusal_key(z1, Framework::kTorchtitan);
  EXPECT_EQ(why.rfind("config.sequence_parallel | ", 0), 0u) << why;
  const Plan gpt = make_plan("gpt3-175b", "1f1b", 8, 1, 8, 2, 1, std::vector<int>(8, 12));
  why = refusal_key(gpt, Framework::kTorchtitan);
  EXPECT_EQ(why.rfind("model | ", 0), 0u) << why;
  EXPECT_NE(why.find("llama3 70B"), std::string::npos) << why;
  // Every framework gathers ZeRO-3 weights per layer; holding a stage's for a sweep is refused.
  Plan z3 = make_plan("llama3-8b", "1f1b", 1, 1, 1, 16, 1, {32});
  z3.config.zero_stage = 3;
  z3.config.zero3_gather = "stage";
  for (Framework fw :
       {Framework::kMegatron, Framework::kTorchtitan, Framework::kNemo, Framework::kDeepspeed}) {
    why = refusal_key(z3, fw);
    EXPECT_EQ(why.rfind("config.zero3_gather | ", 0), 0u) << why;
    EXPECT_NE(why.find("nearest: zero3_gather layer"), std::string::npos) << why;
  }
  z3.config.zero3_gather = "layer";
  EXPECT_EQ(refusal_key(z3, Framework::kDeepspeed), "");
  // DeepSpeed's prefetch buckets of tensors: DeepSpeed's own; the others gather by layer.
  z3.config.zero3_gather = "tensor";
  EXPECT_EQ(refusal_key(z3, Framework::kDeepspeed), "");
  for (Framework fw : {Framework::kMegatron, Framework::kTorchtitan, Framework::kNemo}) {
    why = refusal_key(z3, fw);
    EXPECT_EQ(why.rfind("config.zero3_gather | ", 0), 0u) << why;
    EXPECT_NE(why.find("nearest: zero3_gather layer"), std::string::npos) << why;
  }
  const Plan bit = make_plan("llama3-8b", "bitpipe", 1, 1, 4, 2, 1, std::vector<int>(16, 2));
  why = refusal_key(bit, Framework::kTorchtitan);
  EXPECT_NE(why.find("nearest it can: 'interleaved'"), std::string::npos) << why;
  // A torchtitan custom order needs a file to put its CSV in.
  try {
    export_plan(zb, Framework::kTorchtitan, "plan.yaml", "");
    ADD_FAILURE() << "no --out accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--out");
  }
}

// NeMo's overrides as key -> value ("k=v" lines; comments skipped).
std::map<std::string, std::string> parse_overrides(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t eq = line.find('=');
    EXPECT_NE(eq, std::string::npos) << line;
    EXPECT_EQ(out.count(line.substr(0, eq)), 0u) << line;
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// NeMo 2's dense Qwen3 recipes (nemo/collections/llm/recipes/qwen3_*.py, Qwen3Config600M to
// Qwen3Config32B), Llama 3.2 ones (llama32_1b/3b.py) and Qwen2.5 ones (qwen25_7b ... 72b.py):
// the presets' shapes, by name.
TEST(Frameworks, NemoTakesTheSmallDenseRecipes) {
  for (const auto& [preset, factory] :
       {std::pair{"qwen3-0.6b", "qwen3_600m"}, std::pair{"qwen3-1.7b", "qwen3_1p7b"},
        std::pair{"qwen3-4b", "qwen3_4b"}, std::pair{"qwen3-8b", "qwen3_8b"},
        std::pair{"qwen3-14b", "qwen3_14b"}, std::pair{"qwen3-32b", "qwen3_32b"},
        std::pair{"llama3.2-1b", "llama32_1b"}, std::pair{"llama3.2-3b", "llama32_3b"},
        std::pair{"qwen2.5-7b", "qwen25_7b"}, std::pair{"qwen2.5-14b", "qwen25_14b"},
        std::pair{"qwen2.5-32b", "qwen25_32b"}, std::pair{"qwen2.5-72b", "qwen25_72b"}}) {
    const int layers = hw::find_model_preset(preset)->shape.num_layers;
    const Plan plan = make_plan(preset, "1f1b", 1, 1, 4, 2, 1, std::vector<int>(4, layers / 4));
    const std::string text = export_plan(plan, Framework::kNemo, "p", "").text;
    EXPECT_NE(text.find(fmt::format("--factory {} ", factory)), std::string::npos) << text;
  }
}

TEST(Frameworks, NemoOverridesReadBackIntoThePlansConfiguration) {
  // The same Llama 3 70B plan as Megatron's test, as NeMo 2 recipe overrides.
  Plan plan = make_plan("llama3-70b", "1f1b", 4, 2, 4, 8, 1, {19, 21, 21, 19});
  plan.config.zero_stage = 1;
  plan.config.recompute = "selective";
  plan.config.fp8 = "hybrid";
  const std::string text = export_plan(plan, Framework::kNemo, "p", "").text;
  EXPECT_NE(text.find("--factory llama3_70b"), std::string::npos) << text;
  const auto o = parse_overrides(text);
  const std::string s = "trainer.strategy.";
  EXPECT_EQ(o.at(s + "tensor_model_parallel_size"), "4");
  EXPECT_EQ(o.at(s + "pipeline_model_parallel_size"), "4");
  EXPECT_EQ(o.at(s + "virtual_pipeline_model_parallel_size"), "None");
  EXPECT_EQ(o.at(s + "context_parallel_size"), "2");
  EXPECT_EQ(o.at(s + "sequence_parallel"), "True");
  EXPECT_EQ(o.at(s + "num_layers_in_first_pipeline_stage"), "19");
  EXPECT_EQ(o.at(s + "num_layers_in_last_pipeline_stage"), "19");
  EXPECT_EQ(o.at(s + "ddp.overlap_grad_reduce"), "False");  // priced without overlap
  EXPECT_EQ(o.at(s + "ddp.grad_reduce_in_fp32"), "True");
  EXPECT_EQ(o.at("trainer.plugins.grad_reduce_in_fp32"), "True");
  EXPECT_EQ(o.at("model.config.tp_comm_overlap"), "False");
  EXPECT_EQ(o.at("model.config.cp_comm_type"), "p2p");
  EXPECT_EQ(o.at(s + "ddp.overlap_param_gather"), "False");
  Plan tuned = plan;
  tuned.config.grad_reduce_in_fp32 = false;
  tuned.config.overlap_grad_reduce = true;
  tuned.config.overlap_param_gather = true;
  tuned.config.tp_comm_overlap = true;
  const auto to = parse_overrides(export_plan(tuned, Framework::kNemo, "p", "").text);
  EXPECT_EQ(to.at(s + "ddp.overlap_grad_reduce"), "True");
  EXPECT_EQ(to.at(s + "ddp.overlap_param_gather"), "True");
  EXPECT_EQ(to.at(s + "ddp.align_param_gather"), "True");
  // NeMo's callback would put 128Mi-parameter buckets: the priced bucket is written, here
  // Megatron's default max(40M, 1M x d x cp).
  const long long dpc = 1LL * tuned.config.data_parallel * tuned.config.context_parallel;
  EXPECT_EQ(to.at(s + "ddp.bucket_size"), std::to_string(std::max(40000000LL, 1000000 * dpc)));
  EXPECT_EQ(to.at(s + "ddp.grad_reduce_in_fp32"), "False");
  EXPECT_EQ(to.at("trainer.plugins.grad_reduce_in_fp32"), "False");
  EXPECT_EQ(to.at("model.config.tp_comm_overlap"), "True");
  EXPECT_EQ(o.at("data.micro_batch_size"), "1");
  EXPECT_EQ(o.at("data.global_batch_size"), std::to_string(plan.config.global_batch_size));
  EXPECT_EQ(o.at("data.seq_length"), std::to_string(plan.model.seq_length));
  EXPECT_EQ(o.at("optim.config.use_distributed_optimizer"), "True");
  EXPECT_EQ(o.at("model.config.recompute_granularity"), "selective");
  EXPECT_EQ(o.at("trainer.plugins.fp8"), "hybrid");
  EXPECT_EQ(o.at("trainer.plugins.fp8_recipe"), "delayed");
  // Interleaving: the virtual size is the plan's chunks per device.
  const Plan il = make_plan("llama3-8b", "interleaved", 1, 1, 4, 2, 2, std::vector<int>(8, 4));
  EXPECT_EQ(parse_overrides(export_plan(il, Framework::kNemo, "p", "").text)
                .at(s + "virtual_pipeline_model_parallel_size"),
            "2");
  // NeMo builds models from recipes: a shape none has is refused.
  Plan odd = il;
  odd.model.num_layers = 30;
  EXPECT_EQ(refusal_key(odd, Framework::kNemo).rfind("model | ", 0), 0u);
}

TEST(Frameworks, DeepspeedConfigReadsBackIntoThePlansConfiguration) {
  // Llama 3 8B at t2 (AutoTP, no sequence parallelism) p4 d2, m = 8, ZeRO-1, full recompute.
  Plan plan = make_plan("llama3-8b", "1f1b", 2, 1, 4, 2, 1, std::vector<int>(4, 8));
  plan.config.sequence_parallel = false;
  plan.config.zero_stage = 1;
  plan.config.recompute = "full";
  const FrameworkExport e = export_plan(plan, Framework::kDeepspeed, "p", "");
  const nlohmann::json j = nlohmann::json::parse(e.text);
  EXPECT_EQ(j.at("train_batch_size"), plan.config.global_batch_size);
  EXPECT_EQ(j.at("train_micro_batch_size_per_gpu"), 1);
  // Gradient accumulation = microbatches per iteration = B / (b d) = 16 / (1 * 2) = 8.
  EXPECT_EQ(j.at("gradient_accumulation_steps"), 8);
  EXPECT_EQ(j.at("zero_optimization").at("stage"), 1);
  EXPECT_FALSE(j.at("zero_optimization").at("overlap_comm").get<bool>());
  EXPECT_EQ(j.at("communication_data_type"), "fp32");
  EXPECT_EQ(j.at("tensor_parallel").at("autotp_size"), 2);
  EXPECT_TRUE(j.at("bf16").at("enabled").get<bool>());
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("num_stages=4"), std::string::npos) << e.notes[0];
  EXPECT_NE(e.notes[0].find("activation_checkpoint_interval=1"), std::string::npos) << e.notes[0];
  // Its pipeline engine runs ZeRO 0/1 only; AutoTP has no sequence parallelism.
  Plan z3 = plan;
  z3.config.zero_stage = 3;
  EXPECT_EQ(refusal_key(z3, Framework::kDeepspeed).rfind("config.zero_stage | ", 0), 0u);
  Plan sp = plan;
  sp.config.sequence_parallel = true;
  EXPECT_EQ(refusal_key(sp, Framework::kDeepspeed).rfind("config.sequence_parallel | ", 0), 0u);
  // DeepSpeed re-gathers ZeRO weights after the step: Megatron's overlap_param_gather is not
  // its to run.
  Plan opg = plan;
  opg.config.overlap_grad_reduce = opg.config.overlap_param_gather = true;
  EXPECT_EQ(refusal_key(opg, Framework::kDeepspeed).rfind("config.overlap_param_gather | ", 0), 0u);
  Plan bucket = plan;
  bucket.config.overlap_grad_reduce = true;
  bucket.config.ddp_bucket_size = 1e8;
  EXPECT_EQ(refusal_key(bucket, Framework::kDeepspeed).rfind("config.ddp_bucket_size | ", 0), 0u);
  EXPECT_EQ(refusal_key(bucket, Framework::kTorchtitan).rfind("config.ddp_bucket_size | ", 0), 0u);
  EXPECT_EQ(refusal_key(bucket, Framework::kMegatron), "");
  Plan z2 = plan;
  z2.config.zero_stage = 2;
  z2.config.overlap_grad_reduce = z2.config.overlap_param_gather = true;
  EXPECT_EQ(refusal_key(z2, Framework::kTorchtitan).rfind("config.overlap_param_gather | ", 0), 0u);
  const Plan il = make_plan("llama3-8b", "interleaved", 1, 1, 4, 2, 2, std::vector<int>(8, 4));
  EXPECT_NE(refusal_key(il, Framework::kDeepspeed).find("nearest it can: '1f1b'"),
            std::string::npos);
}

TEST(Frameworks, FrameworkConstraintKeepsOnlyWhatTheFrameworkRuns) {
  // Llama 3 8B on 16 H100s: with --framework megatron every scored configuration's schedule is
  // one Megatron runs, its layer split one Megatron expresses; with torchtitan ZeRO-1 only under a
  // pipeline, no offload and sequence parallelism with every t > 1. A subset never beats the whole
  // space.
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr;
  ASSERT_TRUE(model_preset("llama3-8b", &pr.model));
  pr.model.seq_length = 2048;
  pr.profile = hw::resolve_profile("dgx-h100", "", "", "");
  pr.num_gpus = 16;
  SearchOptions o;
  o.des_top = 0;
  o.keep_all = true;
  o.max_evaluations = 1 << 30;
  const SearchSpace whole = default_space(pr, reg, {64});
  const SearchResult all = run_search(pr, whole, reg, o);
  ASSERT_FALSE(all.top.empty());
  for (Framework fw :
       {Framework::kMegatron, Framework::kTorchtitan, Framework::kNemo, Framework::kDeepspeed}) {
    SCOPED_TRACE(std::string(framework_name(fw)));
    SearchSpace space = whole;
    SearchConstraints c;
    c.framework = fw;
    constrain_space(c, pr.model, pr.num_gpus, &space);
    const SearchResult r = run_search(pr, space, reg, o);
    ASSERT_GT(r.all.size(), 10u);
    const CostModel model(pr, space);
    int fsdp2_pipelined = 0;  // torchtitan's FSDP2 under a pipeline: ZeRO-1
    for (const Evaluated& e : r.all) {
      const ParallelConfig pc = parallel_from_config(space, e.config);
      StageCosts sc;
      ASSERT_TRUE(model.stage_costs(e.config, &sc));
      const ScheduleOption& so = space.schedules[e.config.schedule];
      FrameworkQuery q{&pr.model, &pc, &sc.layers, so.pipelines, so.v_shape};
      EXPECT_EQ(framework_problem(fw, q), "") << describe_config(space, e.config);
      if (fw == Framework::kMegatron && pc.pipeline_parallel > 1) {
        EXPECT_TRUE(pc.schedule == "1f1b" || pc.schedule == "interleaved" ||
                    pc.schedule == "1f1b-r")
            << pc.schedule;
      }
      if (fw == Framework::kDeepspeed) {
        EXPECT_TRUE(pc.pipeline_parallel == 1 || pc.schedule == "1f1b") << pc.schedule;
        EXPECT_TRUE(pc.pipeline_parallel == 1 || pc.zero_stage <= 1);
        EXPECT_FALSE(pc.sequence_parallel);
      }
      EXPECT_TRUE(pc.zero_stage != 3 || pc.zero3_gather == "layer");  // as the frameworks do
      if (fw == Framework::kTorchtitan) {
        // FSDP2: ZeRO-1 under a pipeline, ZeRO-2/3 without.
        if (pc.pipeline_parallel > 1) {
          EXPECT_LE(pc.zero_stage, 1);
          fsdp2_pipelined += pc.zero_stage == 1;
        } else {
          EXPECT_NE(pc.zero_stage, 1);
        }
        EXPECT_FALSE(pc.optimizer_offload);
        EXPECT_TRUE(pc.tensor_parallel == 1 || pc.sequence_parallel);
      }
    }
    if (fw == Framework::kTorchtitan) {
      EXPECT_GT(fsdp2_pipelined, 0);
    }
    ASSERT_FALSE(r.top.empty());
    EXPECT_GE(r.top[0].iteration, all.top[0].iteration);
  }
  // torchtitan cannot build GPT-3: refused before the search, naming the flag.
  PlanProblem gpt = pr;
  ASSERT_TRUE(model_preset("gpt3-175b", &gpt.model));
  SearchSpace space = whole;
  SearchConstraints c;
  c.framework = Framework::kTorchtitan;
  try {
    constrain_space(c, gpt.model, gpt.num_gpus, &space);
    ADD_FAILURE() << "GPT-3 accepted for torchtitan";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--framework torchtitan");
  }
  // FSDP2 is ZeRO-1 under a pipeline and ZeRO-2/3 without one: constraints that leave no such
  // pair are refused before the search, naming the flags.
  for (const auto& [pp, zero, says] :
       {std::tuple{std::vector<int>{4, 8}, std::vector<int>{2, 3}, "expected --zero 0 or 1"},
        std::tuple{std::vector<int>{1}, std::vector<int>{1}, "expected --zero 0, 2 or 3"}}) {
    SearchSpace s = whole;
    SearchConstraints z = c;
    z.pp = pp;
    z.zero = zero;
    try {
      constrain_space(z, pr.model, pr.num_gpus, &s);
      ADD_FAILURE() << "no ZeRO stage torchtitan runs at these pipelines, yet accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), fmt::format("--zero {} --pp {} --framework torchtitan",
                                     fmt::join(zero, ","), fmt::join(pp, ",")));
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  {
    SearchSpace s = whole;
    SearchConstraints z = c;
    z.pp = {1, 4};
    z.zero = {1};  // ZeRO-1 at p = 4 is what FSDP2 runs there
    constrain_space(z, pr.model, pr.num_gpus, &s);
    EXPECT_EQ(s.zero, std::vector<int>{1});
  }
  // A scenario that reduces bf16 gradients rules out every torchtitan configuration: refused
  // before the search, naming the scenario's key.
  SearchSpace bf16 = whole;
  bf16.grad_reduce_in_fp32 = false;
  try {
    constrain_space(c, pr.model, pr.num_gpus, &bf16);
    ADD_FAILURE() << "bf16 gradient reduction accepted for torchtitan";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--framework torchtitan");
    EXPECT_NE(std::string(e.what()).find("parallel.grad_reduce_in_fp32"), std::string::npos)
        << e.what();
  }
  // torchtitan's float8 scales as it casts: under the scenario's delayed recipe (Megatron's
  // default) FP8 is dropped from a space that also searches it without, refused where only FP8
  // was asked for, and kept under tensorwise.
  {
    SearchSpace both = whole;
    both.fp8 = {0, 1};
    constrain_space(c, pr.model, pr.num_gpus, &both);
    EXPECT_EQ(both.fp8, std::vector<int>{0});
    SearchSpace on = whole;
    on.fp8 = {1};
    try {
      constrain_space(c, pr.model, pr.num_gpus, &on);
      ADD_FAILURE() << "delayed scaling accepted for torchtitan";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "--fp8 on --framework torchtitan");
      EXPECT_NE(std::string(e.what()).find("parallel.fp8_recipe: tensorwise"), std::string::npos)
          << e.what();
    }
    SearchSpace current = whole;
    current.fp8 = {1};
    current.fp8_recipe = "tensorwise";
    constrain_space(c, pr.model, pr.num_gpus, &current);
    EXPECT_EQ(current.fp8, std::vector<int>{1});
  }
  // Megatron's overlap_param_gather: DeepSpeed and torchtitan have none. Searched both ways,
  // the space keeps the off form; asked for on, the search is refused naming the flag.
  for (Framework fw : {Framework::kDeepspeed, Framework::kTorchtitan}) {
    SearchConstraints f;
    f.framework = fw;
    SearchSpace both = whole;
    both.overlap_grad_reduce = true;
    both.param_gather = {0, 1};
    constrain_space(f, pr.model, pr.num_gpus, &both);
    EXPECT_EQ(both.param_gather, std::vector<int>{0});
    SearchSpace on = whole;
    on.overlap_grad_reduce = true;
    f.param_gather = {1};
    try {
      constrain_space(f, pr.model, pr.num_gpus, &on);
      ADD_FAILURE() << "overlap_param_gather accepted for " << framework_name(fw);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key().rfind("--overlap-param-gather on", 0), 0u) << e.key();
    }
  }
}

// Megatron's overlap_p2p_comm (interleaved schedules only): Megatron-LM overlaps by default there,
// so a plan without it says so, and its arguments.py asserts p > 2 without it; NeMo's config
// needs batch_p2p_comm off with it (Megatron-core refuses both); torchtitan has no such switch.
TEST(Frameworks, OverlapP2pCommIsExportedAsEachFrameworkNamesIt) {
  Plan il = make_plan("llama3-8b", "interleaved", 1, 1, 4, 2, 2, std::vector<int>(8, 4));
  auto a = parse_args(export_plan(il, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.count("--no-overlap-p2p-communication"), 1u);
  auto o = parse_overrides(export_plan(il, Framework::kNemo, "p", "").text);
  EXPECT_EQ(o.at("model.config.overlap_p2p_comm"), "False");
  EXPECT_EQ(o.at("model.config.batch_p2p_comm"), "True");
  il.config.overlap_p2p_comm = true;
  a = parse_args(export_plan(il, Framework::kMegatron, "p", "").text);
  EXPECT_EQ(a.count("--no-overlap-p2p-communication"), 0u);
  o = parse_overrides(export_plan(il, Framework::kNemo, "p", "").text);
  EXPECT_EQ(o.at("model.config.overlap_p2p_comm"), "True");
  EXPECT_EQ(o.at("model.config.batch_p2p_comm"), "False");
  EXPECT_EQ(refusal_key(il, Framework::kTorchtitan).rfind("config.overlap_p2p_comm | ", 0), 0u);
  // Non-interleaved: nothing to say to Megatron-LM (it turns the overlap off itself).
  const Plan plain = make_plan("llama3-8b", "1f1b", 1, 1, 4, 2, 1, std::vector<int>(4, 8));
  EXPECT_EQ(parse_args(export_plan(plain, Framework::kMegatron, "p", "").text)
                .count("--no-overlap-p2p-communication"),
            0u);
  // Interleaved over p = 2 without the overlap: Megatron-LM refuses to run it.
  Plan two = make_plan("llama3-8b", "interleaved", 1, 1, 2, 2, 2, std::vector<int>(4, 8), 4);
  EXPECT_EQ(refusal_key(two, Framework::kMegatron).rfind("config.overlap_p2p_comm | ", 0), 0u);
  EXPECT_EQ(refusal_key(two, Framework::kNemo), "");
  two.config.overlap_p2p_comm = true;
  EXPECT_EQ(refusal_key(two, Framework::kMegatron), "");
}

}  // namespace
}  // namespace pw
