// torchtitan's launch configuration: the TOML of a plan read back into the plan's configuration,
// custom orders as the PyTorch CSV torchtitan loads (read back by the project's own importer),
// and the V placements it runs only as its own classes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/pytorch_csv.h"
#include "hwmodels/model_presets.h"
#include "planner/search/frameworks.h"
#include "tests/planner/frameworks_test_util.h"

namespace pw {
namespace {

using testing::compute_only;
using testing::make_plan;
using testing::parse_toml;
using testing::refusal_key;

TEST(Frameworks, TorchtitanTomlReadsBackIntoThePlansConfiguration) {
  // Llama 3 8B at t2 cp2 p4 d4, interleaved v2 (PyTorch's Interleaved1F1B), ZeRO-1 (FSDP2
  // under the pipeline, which keeps the weights gathered), full AC.
  Plan plan = make_plan("llama3-8b", "interleaved", 2, 2, 4, 4, 2, std::vector<int>(8, 4));
  plan.config.zero_stage = 1;
  plan.config.recompute = "full";
  plan.config.fp8 = "e4m3";
  plan.config.fp8_recipe = "tensorwise";  // torchtitan's float8 scales as it casts
  const FrameworkExport e = export_plan(plan, Framework::kTorchtitan, "p", "p.csv");
  EXPECT_TRUE(e.csv_path.empty());  // a schedule torchtitan has: no CSV
  const auto t = parse_toml(e.text);
  EXPECT_EQ(t.at("model.name"), "\"llama3\"");
  EXPECT_EQ(t.at("model.flavor"), "\"8B\"");
  EXPECT_EQ(t.at("model.converters"), "[\"quantize.linear.float8\"]");
  // Per-DP-rank batch = B / d = (1 * 8 * 4) / 4 = 8 sequences of 1 (the microbatch).
  EXPECT_EQ(t.at("training.local_batch_size"), "8");
  EXPECT_EQ(t.at("training.global_batch_size"), "32");
  EXPECT_EQ(t.at("training.seq_len"), std::to_string(plan.model.seq_length));
  EXPECT_EQ(t.at("parallelism.data_parallel_replicate_degree"), "1");
  EXPECT_EQ(t.at("parallelism.data_parallel_shard_degree"), "4");
  EXPECT_EQ(t.at("parallelism.fsdp_reshard_after_forward"), "\"never\"");
  {
    // Without a pipeline ZeRO-3 is FSDP2 resharding after each forward, ZeRO-2 keeping the
    // weights until the backward.
    Plan flat = make_plan("llama3-8b", "1f1b", 2, 2, 1, 16, 1, {32});
    for (int z : {2, 3}) {
      flat.config.zero_stage = z;
      const auto tf = parse_toml(export_plan(flat, Framework::kTorchtitan, "p", "p.csv").text);
      EXPECT_EQ(tf.at("parallelism.data_parallel_replicate_degree"), "1");
      EXPECT_EQ(tf.at("parallelism.data_parallel_shard_degree"), "16");
      EXPECT_EQ(tf.at("parallelism.fsdp_reshard_after_forward"),
                z == 3 ? "\"always\"" : "\"never\"");
    }
  }
  EXPECT_EQ(t.at("parallelism.tensor_parallel_degree"), "2");
  EXPECT_EQ(t.at("parallelism.context_parallel_degree"), "2");
  // The ring rotates shards with all-to-alls in torchtitan (its default gathers them all).
  EXPECT_EQ(t.at("parallelism.context_parallel_rotate_method"), "\"alltoall\"");
  {
    Plan ag = plan;
    ag.config.cp_comm_type = "all_gather";
    EXPECT_EQ(parse_toml(export_plan(ag, Framework::kTorchtitan, "p", "p.csv").text)
                  .at("parallelism.context_parallel_rotate_method"),
              "\"allgather\"");
    Plan ul = plan;
    ul.config.cp_comm_type = "a2a";
    EXPECT_EQ(refusal_key(ul, Framework::kTorchtitan).rfind("config.cp_comm_type | ", 0), 0u);
    EXPECT_EQ(refusal_key(ul, Framework::kMegatron), "");
  }
  {
    // torchtitan's float8 scales as it casts: Transformer Engine's delayed scaling (Megatron's
    // default recipe) is refused naming the key; Megatron and NeMo take either recipe.
    Plan dl = plan;
    dl.config.fp8_recipe = "delayed";
    EXPECT_EQ(refusal_key(dl, Framework::kTorchtitan).rfind("config.fp8_recipe | ", 0), 0u);
    EXPECT_EQ(refusal_key(dl, Framework::kMegatron), "");
    EXPECT_EQ(refusal_key(dl, Framework::kNemo), "");
  }
  EXPECT_EQ(t.at("parallelism.pipeline_parallel_degree"), "4");
  EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), "\"Interleaved1F1B\"");
  EXPECT_EQ(t.at("parallelism.pipeline_parallel_microbatch_size"), "1");
  EXPECT_EQ(t.at("activation_checkpoint.mode"), "\"full\"");
  // Every stage's modules: 8 parts of 4 layers, the embedding first and norm + output last.
  EXPECT_NE(e.text.find("[\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\", "
                        "\"layers.3\"],\n  [\"layers.4\""),
            std::string::npos)
      << e.text;
  EXPECT_NE(e.text.find("\"layers.31\", \"norm\", \"output\"]"), std::string::npos) << e.text;
  // ZeRO-0: plain replication (DDP), without context parallelism (FSDP2 shards over it).
  plan.config.zero_stage = 0;
  plan.config.context_parallel = 1;
  const auto t0 = parse_toml(export_plan(plan, Framework::kTorchtitan, "p", "p.csv").text);
  EXPECT_EQ(t0.at("parallelism.data_parallel_replicate_degree"), "4");
  EXPECT_EQ(t0.at("parallelism.data_parallel_shard_degree"), "1");
  EXPECT_EQ(t0.count("parallelism.fsdp_reshard_after_forward"), 0u);
  EXPECT_EQ(t0.count("parallelism.enable_async_tensor_parallel"), 0u);
  // Overlapped TP communication is torchtitan's async TP, which runs under torch.compile; bf16
  // gradient reduction is something torchtitan does not offer.
  plan.config.tp_comm_overlap = true;
  const auto ta = parse_toml(export_plan(plan, Framework::kTorchtitan, "p", "p.csv").text);
  EXPECT_EQ(ta.at("parallelism.enable_async_tensor_parallel"), "true");
  EXPECT_EQ(ta.at("compile.enable"), "true");
  plan.config.grad_reduce_in_fp32 = false;
  EXPECT_EQ(refusal_key(plan, Framework::kTorchtitan).rfind("config.grad_reduce_in_fp32 | ", 0),
            0u);
}

TEST(Frameworks, TorchtitanCustomOrdersTravelAsCsvTheImporterReadsBack) {
  // ZB-H1 (loop placement): the CSV beside the TOML is in the form torchtitan loads it
  // (_PipelineScheduleRuntime._load_csv's default, compute_only: no SEND/RECV, UNSHARD/RESHARD or
  // REDUCE_GRAD, which PyTorch inserts) and reads back into the plan's own order of compute
  // actions; the model is split in a loop (Interleaved1F1B names the split).
  const Plan plan = make_plan("llama3-8b", "zb-h1", 1, 1, 4, 2, 1, std::vector<int>(4, 8));
  const FrameworkExport e = export_plan(plan, Framework::kTorchtitan, "p", "sched.csv");
  EXPECT_EQ(e.csv_path, "sched.csv");
  const auto t = parse_toml(e.text);
  EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule_csv"), "\"sched.csv\"");
  EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), "\"Interleaved1F1B\"");
  CsvImportOptions io;
  io.stage_map = "loop";
  const Schedule back = schedule_from_pytorch_csv(e.csv_text, "sched.csv", io);
  EXPECT_EQ(e.csv_text.find("SEND"), std::string::npos);
  EXPECT_EQ(e.csv_text.find("REDUCE_GRAD"), std::string::npos);
  EXPECT_EQ(back.actions, compute_only(plan.schedule).actions);
  EXPECT_EQ(back.num_microbatches, plan.schedule.num_microbatches);
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(back.placement.stages[s].device, plan.schedule.placement.stages[s].device);
}

TEST(Frameworks, TorchtitanRunsVPlacementsOnlyAsItsOwnVSchedules) {
  // PyTorch's _PipelineScheduleRuntime (torchtitan's CSV path) maps stage s to rank s mod p and
  // torchtitan passes it no other mapping (torchtitan/distributed/pipeline_parallel.py), so a V
  // order from a CSV would send stage 6's output of a p = 4 V (rank 1) to rank 3 while stage 7
  // waits on rank 0: the hang seen on the H100 (docs/gpu-runs.md). ZB-V and DualPipeV are
  // torchtitan's own ZBVZeroBubble and DualPipeV, no CSV; V-Half is refused, naming zb-v.
  for (const auto& [name, native] :
       {std::pair{"zb-v", "ZBVZeroBubble"}, std::pair{"dualpipev", "DualPipeV"}}) {
    SCOPED_TRACE(name);
    const Plan plan = make_plan("llama3-8b", name, 1, 1, 4, 2, 1, std::vector<int>(8, 4));
    const FrameworkExport e = export_plan(plan, Framework::kTorchtitan, "p", "sched.csv");
    EXPECT_TRUE(e.csv_path.empty());
    const auto t = parse_toml(e.text);
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), std::string("\"") + native + "\"");
    EXPECT_EQ(t.count("parallelism.pipeline_parallel_schedule_csv"), 0u);
  }
  const Plan vhalf = make_plan("llama3-8b", "v-half", 1, 1, 4, 2, 1, std::vector<int>(8, 4));
  try {
    export_plan(vhalf, Framework::kTorchtitan, "p", "sched.csv");
    ADD_FAILURE() << "a V-Half CSV was exported for torchtitan";
  } catch (const ConfigError& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("cannot run 'v-half'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nearest it can: 'zb-v'"), std::string::npos) << msg;
  }
  EXPECT_EQ(framework_schedule_support(Framework::kTorchtitan, "v-half", 1, true),
            ScheduleSupport::kNone);
  EXPECT_EQ(framework_schedule_support(Framework::kTorchtitan, "zb-h1", 1, false),
            ScheduleSupport::kCsv);
}

// torchtitan's dense Qwen3 flavors (torchtitan/models/qwen3: 0.6B to 32B) and its Llama 3.2
// ones (llama3 1B, 3B) are the presets' shapes; a plan of each exports under its flavor, and a
// shape no flavor has is refused.
TEST(Frameworks, TorchtitanTakesTheSmallDenseFlavors) {
  for (const auto& [preset, flavor] :
       {std::pair{"qwen3-0.6b", "0.6B"}, std::pair{"qwen3-1.7b", "1.7B"},
        std::pair{"qwen3-4b", "4B"}, std::pair{"qwen3-8b", "8B"}, std::pair{"qwen3-14b", "14B"},
        std::pair{"qwen3-32b", "32B"}, std::pair{"llama3.2-1b", "1B"},
        std::pair{"llama3.2-3b", "3B"}}) {
    SCOPED_TRACE(preset);
    const int layers = hw::find_model_preset(preset)->shape.num_layers;
    const Plan plan = make_plan(preset, "1f1b", 1, 1, 4, 2, 1, std::vector<int>(4, layers / 4));
    const auto t = parse_toml(export_plan(plan, Framework::kTorchtitan, "p", "p.csv").text);
    EXPECT_EQ(t.at("model.name"),
              std::string(preset).starts_with("qwen3") ? "\"qwen3\"" : "\"llama3\"");
    EXPECT_EQ(t.at("model.flavor"), fmt::format("\"{}\"", flavor));
  }
  Plan other = make_plan("qwen3-8b", "1f1b", 1, 1, 4, 2, 1, std::vector<int>(4, 9));
  other.model.ffn_hidden_size = 12000;
  EXPECT_EQ(refusal_key(other, Framework::kTorchtitan).rfind("model | ", 0), 0u);
}

}  // namespace
}  // namespace pw
