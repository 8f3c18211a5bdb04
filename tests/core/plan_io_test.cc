#include "core/plan_io.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/lowering.h"
#include "tests/core/test_schedules.h"

namespace pw {
namespace {

Plan sample_plan() {
  Plan p;
  p.model = ModelShape{"custom", 24, 1600, 32, 6400, 1024, 50257};
  p.flash_attention = false;  // priced unfused, as GPT-style runs of 2021 were
  p.cluster = "dgx-a100-80gb";
  p.config.pipeline_parallel = 4;
  p.config.data_parallel = 2;
  p.config.recompute = "selective";
  p.config.sequence_parallel = true;
  p.config.zero_stage = 1;
  p.schedule = lower_communication(testing::hand_1f1b(4, 4));
  p.rank_to_gpu = {0, 2, 4, 6};
  p.predicted = {{0, 0, 0, 1'000'000'000}, {3, 2, 5'000'000'000, 7'123'456'789'012}};
  p.predicted_iteration = 7'123'456'789'012;
  p.provenance = Provenance{"0.1.0", "profile.yaml", "", "pipewright simulate --pp 4", ""};
  return p;
}

std::string error_of(const std::string& text) {
  try {
    parse_plan(text, DocFormat::kYaml, "plan.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PlanIo, RoundTripIsLosslessInBothSyntaxes) {
  const Plan p = sample_plan();
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
    EXPECT_EQ(parse_plan(plan_to_text(p, f), f, "t"), p);
}

// Today's model keys and layouts round-trip; a GPT-style plan writes none of them.
TEST(PlanIo, ModernModelAndLayoutRoundTrip) {
  Plan p = sample_plan();
  const std::string gpt = plan_to_text(p, DocFormat::kYaml);
  for (const char* key : {"num_query_groups", "swiglu", "num_experts", "use_flash_attn",
                          "context_parallel", "expert_parallel", "fp8", "grad_reduce_in_fp32",
                          "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap",
                          "overlap_p2p_comm", "cp_comm_type", "window_size"})
    EXPECT_EQ(gpt.find(key), std::string::npos) << key;
  // A plan file without use_flash_attn was priced unfused (the writer names only fused), even
  // though a plan built in memory is fused by default (kFusedAttentionByDefault).
  EXPECT_FALSE(parse_plan(gpt, DocFormat::kYaml, "t").flash_attention);
  EXPECT_TRUE(Plan{}.flash_attention);
  p.model.num_query_groups = 2;
  p.model.kv_channels = 96;
  p.model.qk_layernorm = true;
  p.model.swiglu = true;
  p.model.rmsnorm = true;
  p.model.untie_embeddings = true;
  p.model.rope = true;
  p.model.bias = false;
  p.model.qkv_bias = true;
  p.model.num_experts = 16;
  p.model.moe_router_topk = 4;
  p.model.moe_ffn_hidden_size = 256;
  p.model.moe_shared_expert_size = 512;
  p.model.moe_layer_freq = 2;
  p.model.moe_first_dense_layers = 1;
  p.model.moe_capacity_factor = 1.25;
  p.flash_attention = true;
  p.config.context_parallel = 2;
  p.config.expert_parallel = 4;
  p.config.expert_tensor_parallel = 1;
  p.config.fp8 = "e4m3";
  p.config.tensor_parallel = 2;
  p.config.grad_reduce_in_fp32 = false;
  p.config.overlap_grad_reduce = true;
  p.config.tp_comm_overlap = true;
  p.config.zero_stage = 1;
  p.config.overlap_param_gather = true;
  p.config.align_param_gather = false;
  p.config.ddp_bucket_size = 134217728;
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
    EXPECT_EQ(parse_plan(plan_to_text(p, f), f, "t"), p);
  {
    Plan q = p;
    q.model.window_size = 4096;
    q.config.context_parallel = 1;
    EXPECT_NE(plan_to_text(q, DocFormat::kYaml).find("window_size: 4096"), std::string::npos);
    for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
      EXPECT_EQ(parse_plan(plan_to_text(q, f), f, "t"), q);
  }
  // Megatron's cp_comm_type: the ring (p2p) is the default and not written; the others are.
  EXPECT_EQ(plan_to_text(p, DocFormat::kYaml).find("cp_comm_type"), std::string::npos);
  for (const char* form : {"all_gather", "a2a"}) {
    Plan q = p;
    q.config.cp_comm_type = form;
    EXPECT_NE(plan_to_text(q, DocFormat::kYaml).find(std::string("cp_comm_type: ") + form),
              std::string::npos);
    for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
      EXPECT_EQ(parse_plan(plan_to_text(q, f), f, "t"), q);
  }
  // Megatron's fp8_recipe: delayed (its default) is not written, tensorwise is; a recipe
  // without FP8, or one not modelled, is refused by key.
  EXPECT_EQ(plan_to_text(p, DocFormat::kYaml).find("fp8_recipe"), std::string::npos);
  {
    Plan q = p;
    q.config.fp8_recipe = "tensorwise";
    EXPECT_NE(plan_to_text(q, DocFormat::kYaml).find("fp8_recipe: tensorwise"), std::string::npos);
    for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
      EXPECT_EQ(parse_plan(plan_to_text(q, f), f, "t"), q);
    for (int variant = 0; variant < 2; ++variant) {
      Plan r = q;
      if (variant == 0) r.config.fp8_recipe = "mxfp8";
      if (variant == 1) r.config.fp8 = "off";
      try {
        parse_plan(plan_to_text(r, DocFormat::kYaml), DocFormat::kYaml, "plan.yaml");
        ADD_FAILURE() << "fp8_recipe accepted, variant " << variant;
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("config.fp8_recipe"), std::string::npos) << e.what();
      }
    }
  }
  // How the CLI names the form: the ring plainly, the others by name; nothing without CP.
  {
    ParallelConfig c;
    EXPECT_EQ(cp_label(c), "");
    c.context_parallel = 4;
    EXPECT_EQ(cp_label(c), " cp=4");
    c.cp_comm_type = "a2a";
    EXPECT_EQ(cp_label(c), " cp=4 a2a");
  }
  // An unknown form, or a form without context parallelism, is refused by key.
  for (int variant = 0; variant < 2; ++variant) {
    Plan q = p;
    q.config.cp_comm_type = variant == 0 ? "ring" : "all_gather";
    if (variant == 1) q.config.context_parallel = 1;
    try {
      parse_plan(plan_to_text(q, DocFormat::kYaml), DocFormat::kYaml, "plan.yaml");
      ADD_FAILURE() << "cp_comm_type accepted, variant " << variant;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("config.cp_comm_type"), std::string::npos) << e.what();
    }
  }
  // The bucket size and the alignment tune the overlaps: refused without them.
  {
    Plan q = p;
    q.config.overlap_param_gather = false;
    EXPECT_THROW(parse_plan(plan_to_text(q, DocFormat::kYaml), DocFormat::kYaml, "plan.yaml"),
                 ConfigError);
  }
  // Megatron's overlap_param_gather needs overlap_grad_reduce and the distributed optimizer.
  for (int variant = 0; variant < 2; ++variant) {
    Plan q = p;
    if (variant == 0) q.config.overlap_grad_reduce = false;
    if (variant == 1) q.config.zero_stage = 0;
    try {
      parse_plan(plan_to_text(q, DocFormat::kYaml), DocFormat::kYaml, "plan.yaml");
      ADD_FAILURE() << "overlap_param_gather accepted, variant " << variant;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("config.overlap_param_gather"), std::string::npos)
          << e.what();
    }
  }
  // Megatron overlaps only the interleaved schedule's pipeline transfers.
  {
    Plan q = p;
    q.config.overlap_p2p_comm = true;
    ASSERT_EQ(q.config.virtual_stages, 1);
    try {
      parse_plan(plan_to_text(q, DocFormat::kYaml), DocFormat::kYaml, "plan.yaml");
      ADD_FAILURE() << "overlap_p2p_comm without interleaving accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("config.overlap_p2p_comm"), std::string::npos)
          << e.what();
    }
  }
  // Overlapping TP communication needs the sequence-parallel collectives.
  p.config.sequence_parallel = false;
  try {
    parse_plan(plan_to_text(p, DocFormat::kYaml), DocFormat::kYaml, "plan.yaml");
    ADD_FAILURE() << "tp_comm_overlap without sequence parallelism accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config.tp_comm_overlap"), std::string::npos) << e.what();
  }
}

// ZeRO-3's gather granularity is written with every ZeRO-3 plan (and only then) and read back;
// a value other than layer, tensor or stage is refused by key.
TEST(PlanIo, Zero3GatherRoundTripsWithZeroStage3) {
  Plan p = sample_plan();
  EXPECT_EQ(plan_to_text(p, DocFormat::kYaml).find("zero3_gather"), std::string::npos);
  p.config.zero_stage = 3;
  for (const char* g : {"layer", "tensor", "stage"}) {
    p.config.zero3_gather = g;
    for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson}) {
      const std::string text = plan_to_text(p, f);
      EXPECT_NE(text.find("zero3_gather"), std::string::npos) << g;
      EXPECT_EQ(parse_plan(text, f, "t"), p) << g;
    }
  }
  const std::string text = plan_to_text(p, DocFormat::kYaml);
  std::string sweep = text, z1 = text;
  sweep.replace(sweep.find("zero3_gather: stage"), 19, "zero3_gather: sweep");
  z1.replace(z1.find("zero_stage: 3"), 13, "zero_stage: 1");  // the key then means nothing
  for (const std::string& bad : {sweep, z1}) {
    try {
      parse_plan(bad, DocFormat::kYaml, "plan.yaml");
      ADD_FAILURE() << "accepted:\n" << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("config.zero3_gather"), std::string::npos) << e.what();
    }
  }
}

// Megatron's mtp_standalone (the depths on the stage before the loss's, which holds nothing
// else) travels in the config, written only when true; without depths, or with layers on the
// last stage, it is refused naming the key.
TEST(PlanIo, MtpStandaloneRoundTripsWithItsLayout) {
  Plan p = sample_plan();
  EXPECT_EQ(plan_to_text(p, DocFormat::kYaml).find("mtp_standalone"), std::string::npos);
  p.model.rope = true;
  p.model.mtp_num_layers = 1;
  assign_stage_layers({8, 8, 8, 0}, &p.schedule.placement);
  p.config.mtp_standalone = true;
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
    EXPECT_EQ(parse_plan(plan_to_text(p, f), f, "t"), p);
  Plan none = p;
  none.model.mtp_num_layers = 0;
  Plan layers = p;
  assign_stage_layers({6, 6, 6, 6}, &layers.schedule.placement);
  for (const Plan& bad : {none, layers}) {
    try {
      parse_plan(plan_to_text(bad, DocFormat::kYaml), DocFormat::kYaml, "plan.yaml");
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "config.mtp_standalone") << e.what();
    }
  }
}

TEST(PlanIo, PredictionSourceRoundTripsAndIsOptional) {
  Plan p = sample_plan();
  p.provenance.prediction_source = "evaluator (no hardware profile for 'my-gpu')";
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
    EXPECT_EQ(parse_plan(plan_to_text(p, f), f, "t"), p);
  // A plan written before the field existed (no key) loads with an empty source.
  const Plan older = sample_plan();
  const std::string text = plan_to_text(older, DocFormat::kYaml);
  EXPECT_EQ(text.find("prediction_source"), std::string::npos);
  EXPECT_EQ(parse_plan(text, DocFormat::kYaml, "t").provenance.prediction_source, "");
}

TEST(PlanIo, OutputIsDeterministic) {
  EXPECT_EQ(plan_to_text(sample_plan(), DocFormat::kYaml),
            plan_to_text(sample_plan(), DocFormat::kYaml));
}

TEST(PlanIo, CorruptedScheduleIsRejectedByItsChecksum) {
  std::string y = plan_to_text(sample_plan(), DocFormat::kYaml);
  // Swap two forwards of device 0 ([F, 0, 0] and [F, 0, 1] become the other way round).
  const std::size_t at = y.find("[F, 0, 1]");
  ASSERT_NE(at, std::string::npos);
  y.replace(at, 9, "[F, 0, 9]");
  const std::string e = error_of(y);
  EXPECT_NE(e.find("plan.yaml: schedule_checksum: the schedule does not match its checksum"),
            std::string::npos)
      << e;
}

TEST(PlanIo, RejectsWrongVersionAndBadTimings) {
  std::string y = plan_to_text(sample_plan(), DocFormat::kYaml);
  std::string v = y;
  v.replace(v.find("version: 1"), 10, "version: 7");
  EXPECT_NE(error_of(v).find("version: expected 1"), std::string::npos) << error_of(v);
  std::string t = y;
  t.replace(t.find("[3, 2, "), 7, "[3, 99, ");
  EXPECT_NE(error_of(t).find("predicted[1][1]: expected an integer in 0.."), std::string::npos)
      << error_of(t);
}

// A scenario handed to a command that reads a plan (export, execute, simulate --plan) is named as
// such, with the command that writes a plan; it used to read "name: unknown key (did you mean
// 'model'?)".
TEST(PlanIo, AScenarioIsNamedAsOneWhereAPlanIsRead) {
  const std::string scenario =
      "name: s\nmodel: {preset: llama3-8b}\ncluster: {profile: dgx-h100, nodes: 1}\n"
      "parallel: {tensor_model_parallel_size: 1}\n";
  const std::string e = error_of(scenario);
  EXPECT_NE(e.find("plan.yaml: format: a scenario, not a plan"), std::string::npos) << e;
  EXPECT_NE(e.find("pipewright plan SCENARIO --emit"), std::string::npos) << e;
  // Without `parallel` it is no scenario: the usual key check speaks.
  EXPECT_NE(error_of("name: s\n").find("name: unknown key"), std::string::npos)
      << error_of("name: s\n");
}

TEST(MeasuredRunIo, RoundTripIsLossless) {
  MeasuredRun run;
  run.backend = "cpu";
  run.device = "2x Xeon, 1 rank per core";
  run.optimizer = "adam";
  run.iterations = 5;
  run.iteration_time = 123'456'789;
  run.actions = {{0, 0, {ActionKind::kF, 0, 0}, 0, 10},
                 {1, 3, {ActionKind::kOverlapFB, 1, 2, 2, 0}, 20, 35}};
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson}) {
    MeasuredRun back = parse_measured_run(measured_run_to_text(run, f), f, "t");
    EXPECT_EQ(back.backend, run.backend);
    EXPECT_EQ(back.device, run.device);
    EXPECT_EQ(back.optimizer, run.optimizer);
    EXPECT_EQ(back.iterations, run.iterations);
    EXPECT_EQ(back.iteration_time, run.iteration_time);
    ASSERT_EQ(back.actions.size(), run.actions.size());
    for (std::size_t i = 0; i < run.actions.size(); ++i) {
      EXPECT_EQ(back.actions[i].rank, run.actions[i].rank);
      EXPECT_EQ(back.actions[i].index, run.actions[i].index);
      EXPECT_EQ(back.actions[i].action, run.actions[i].action);
      EXPECT_EQ(back.actions[i].start, run.actions[i].start);
      EXPECT_EQ(back.actions[i].end, run.actions[i].end);
    }
  }
}

TEST(MeasuredRunIo, OptimizerIsOptionalAndChecked) {
  MeasuredRun run;
  run.backend = "cpu";
  run.device = "d";
  run.iteration_time = 1;
  // Written only when known; a file without it (older executors) reads as "".
  const std::string text = measured_run_to_text(run, DocFormat::kJson);
  EXPECT_EQ(text.find("optimizer"), std::string::npos) << text;
  EXPECT_EQ(parse_measured_run(text, DocFormat::kJson, "t").optimizer, "");
  run.optimizer = "adam";
  std::string bad = measured_run_to_text(run, DocFormat::kJson);
  bad.replace(bad.find("\"adam\""), 6, "\"lamb\"");
  try {
    parse_measured_run(bad, DocFormat::kJson, "run.json");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("run.json: optimizer: expected sgd or adam, got 'lamb'"),
              std::string::npos)
        << e.what();
  }
}

TEST(MeasuredRunIo, RankProbesAreOptionalAndChecked) {
  MeasuredRun run;
  run.backend = "cpu";
  run.device = "d";
  run.iteration_time = 1;
  EXPECT_EQ(measured_run_to_text(run, DocFormat::kJson).find("probe_ms"), std::string::npos);
  run.probe_ms = {15.64, 18.81};
  const std::string text = measured_run_to_text(run, DocFormat::kJson);
  EXPECT_EQ(parse_measured_run(text, DocFormat::kJson, "t").probe_ms, run.probe_ms);
  std::string bad = text;
  bad.replace(bad.find("18.81"), 5, "-1.00");
  try {
    parse_measured_run(bad, DocFormat::kJson, "run.json");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("run.json: probe_ms[1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pw
