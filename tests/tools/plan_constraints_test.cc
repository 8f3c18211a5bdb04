// `pipewright plan` under search constraints (--tp, --pp, --gpus, --schedules, ...), as a user
// runs it: every row obeys them, contradictions are one line, no feasible plan is named truly.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/plan_io.h"
#include "tests/tools/cli_util.h"
#include "tests/tools/plan_cli_util.h"

namespace pw {
namespace {

using pw::testing::json_of;
using pw::testing::occurrences;
using pw::testing::one_of;
using pw::testing::pipewright;
using pw::testing::plan;
using pw::testing::plan_json;
using pw::testing::PlanRun;
using pw::testing::scenario;
using pw::testing::TempDir;

// --- Search constraints -----------------------------------------------------------------------

TEST(PlanCli, EveryRowSatisfiesTheConstraints) {
  const PlanRun r =
      plan(scenario("megatron/weak-scaling-1.7b.yaml") +
           " --tp 1,2 --pp 2,4 --schedules 1f1b,zb-h1,interleaved --recompute none,full "
           "--zero 0,1 --sequence-parallel off --offload off --microbatch-size 1,2 "
           "--gpus 16 --top 20 --format json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["constraints"]["flags"].get<std::string>(),
            "--gpus 16 --tp 1,2 --pp 2,4 --microbatch-size 1,2 --schedules 1f1b,zb-h1,interleaved "
            "--recompute none,full --zero 0,1 --sequence-parallel off --offload off");
  ASSERT_TRUE(j["feasible"].get<bool>());
  std::size_t rows = 0;
  for (const char* list : {"top", "pareto"})
    for (const auto& row : j[list]) {
      const auto& c = row["config"];
      const std::string what = c.dump();
      ++rows;
      EXPECT_TRUE(one_of({1, 2}, c["tensor_parallel"].get<int>())) << what;
      EXPECT_TRUE(one_of({2, 4}, c["pipeline_parallel"].get<int>())) << what;
      EXPECT_EQ(c["tensor_parallel"].get<int>() * c["pipeline_parallel"].get<int>() *
                    c["data_parallel"].get<int>(),
                16)
          << what;
      EXPECT_TRUE(one_of({1, 2}, c["micro_batch_size"].get<int>())) << what;
      const std::string s = c["schedule"].get<std::string>();
      EXPECT_TRUE(s == "1f1b" || s == "zb-h1" || s == "interleaved") << what;
      EXPECT_NE(c["recompute"].get<std::string>(), "selective") << what;
      EXPECT_LE(c["zero_stage"].get<int>(), 1) << what;
      // The scenario does not overlap the parameter gather: ZeRO-1 rows say so.
      if (c["zero_stage"].get<int>() == 1) {
        EXPECT_FALSE(c["overlap_param_gather"].get<bool>()) << what;
      }
      EXPECT_FALSE(c["sequence_parallel"].get<bool>()) << what;
      EXPECT_FALSE(c["optimizer_offload"].get<bool>()) << what;
      EXPECT_EQ(c["global_batch_size"].get<int>(), 512) << what;  // the scenario's
    }
  EXPECT_GT(rows, 5u);
}

// The evaluator's budget is the user's: a budget of one configuration stops the search and the
// result says so; none is refused naming the flag.
TEST(PlanCli, MaxEvaluationsBoundsTheSecondTier) {
  const PlanRun r = plan("--tp 8 --pp 8 --top 1 --max-evaluations 1 --format json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["stats"]["budget_hit"].get<bool>()) << r.out;
  const PlanRun bad = plan("--max-evaluations 0");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--max-evaluations"), std::string::npos) << bad.err;
}

// Megatron's GPT-3 layout: t = 8, p = 8, interleaved. The constrained space is a subset of the
// whole one, so its best cannot be faster. Both runs rank with the fixed-cost evaluator
// (--des-top 0), whose ranking branch and bound makes exact; the DES tier re-simulates only the
// evaluator's best 32 of each search, which does not make the same promise.
TEST(PlanCli, Gpt3TpPpInterleavedGivesOnlyThoseRowsAndNeverBeatsTheWholeSpace) {
  const PlanRun part =
      plan("--tp 8 --pp 8 --schedules interleaved --des-top 0 --top 10 --format json");
  ASSERT_EQ(part.rc, 0) << part.err;
  const PlanRun whole = plan("--des-top 0 --top 1 --format json");
  ASSERT_EQ(whole.rc, 0) << whole.err;
  const nlohmann::json p = nlohmann::json::parse(part.out), w = nlohmann::json::parse(whole.out);
  ASSERT_TRUE(p["feasible"].get<bool>());
  EXPECT_FALSE(p["stats"]["budget_hit"].get<bool>());
  EXPECT_FALSE(w["stats"]["budget_hit"].get<bool>());
  EXPECT_FALSE(w.contains("constraints"));
  EXPECT_EQ(p["top"].size(), 10u);
  for (const char* list : {"top", "pareto"})
    for (const auto& row : p[list]) {
      EXPECT_EQ(row["config"]["tensor_parallel"].get<int>(), 8);
      EXPECT_EQ(row["config"]["pipeline_parallel"].get<int>(), 8);
      EXPECT_EQ(row["config"]["schedule"].get<std::string>(), "interleaved");
    }
  EXPECT_GE(p["top"][0]["iteration_s"].get<double>(), w["top"][0]["iteration_s"].get<double>());
}

// --schedules NAME:vK: only that number of chunks per device (GPT-3, t = 8, p = 8).
TEST(PlanCli, InterleavedV3GivesOnlyV3Rows) {
  const PlanRun r =
      plan("--tp 8 --pp 8 --schedules interleaved:v3 --des-top 0 --top 10 --format json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["feasible"].get<bool>());
  EXPECT_EQ(j["top"].size(), 10u);
  for (const char* list : {"top", "pareto"})
    for (const auto& row : j[list]) {
      EXPECT_EQ(row["config"]["schedule"].get<std::string>(), "interleaved");
      EXPECT_EQ(row["config"]["virtual_stages"].get<int>(), 3);
      EXPECT_EQ(row["config"]["tensor_parallel"].get<int>(), 8);
      EXPECT_EQ(row["config"]["pipeline_parallel"].get<int>(), 8);
    }
}

// A published configuration outside the searched space (its schedule left out by --schedules) is
// named as the scenario writes it, with the reason, never as an empty search configuration
// (it read "t1 p1 d1 mb1 B1 1f1b").
TEST(PlanCli, APublishedConfigurationOutsideTheSpaceIsNamedAsWritten) {
  const PlanRun r = plan("--tp 8 --pp 8 --schedules 1f1b --des-top 0 --top 1");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("the scenario's configuration: t8 p8 d16 mb1 B1536 interleaved v3 is not "
                       "feasible here"),
            std::string::npos)
      << r.out;
}

// A scenario's uneven split (decoder_first_pipeline_num_layers) that no end trim gives is scored
// as written, by the engine that ranks the top row, and named by its layers per stage: 3 on the
// first stage, the other 21 of 24 layers 7 per stage. Its iteration time is what `simulate` gives
// the scenario (it read "... is not one the planner searches" and went unscored). In JSON the
// split is the config's `stage_layers`.
TEST(PlanCli, AnUnevenPublishedSplitIsScoredAsWritten) {
  const TempDir tmp("pw_plan_split_");
  const std::filesystem::path& dir = tmp.path;
  const std::string scen = (dir / "s.yaml").string();
  write_file_atomic(scen,
                    "model: {preset: megatron-1.7b}\n"
                    "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
                    "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1,\n"
                    "           decoder_first_pipeline_num_layers: 3, global_batch_size: 16}\n");
  const std::string out = (dir / "out.txt").string();
  const std::string cmd = std::string(PW_BINARY_DIR) + "/tools/pipewright plan " + scen +
                          " --tp 1 --pp 4 --schedules 1f1b --top 1 > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_NE(read_file(out).find("the scenario's configuration: t1 p4 d2 mb1 B16 1f1b "
                                "own-split (3/7/7/7 layers per stage) -> "),
            std::string::npos)
      << read_file(out);
  const std::string args = " --tp 1 --pp 4 --schedules 1f1b --top 1";
  const nlohmann::json plan = json_of(dir, "plan " + scen + args);
  ASSERT_TRUE(plan["published"]["fits"].get<bool>()) << plan["published"].dump();
  EXPECT_EQ(plan["published"]["tier"], "DES");
  EXPECT_EQ(plan["published"]["config"]["stage_layers"], (std::vector<int>{3, 7, 7, 7}));
  const nlohmann::json sim = json_of(dir, "simulate " + scen);
  EXPECT_NEAR(
      plan["published"]["iteration_s"].get<double>() * 1e3 / sim["iteration_ms"].get<double>(), 1.0,
      1e-9);
  // Megatron's pipeline layout with two chunks per device (2, six of 3, 4): the interleaved
  // schedule with its own chunk sizes, scored as `simulate` runs it.
  write_file_atomic(scen,
                    "model: {preset: megatron-1.7b}\n"
                    "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
                    "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1,\n"
                    "           pipeline_model_parallel_layout: \"Et*2|(t*3|)*6,t*4L\",\n"
                    "           global_batch_size: 16}\n");
  const nlohmann::json il = json_of(dir, "plan " + scen + " --tp 1 --pp 4 --top 1");
  EXPECT_EQ(il["published"]["config"]["schedule"], "interleaved");
  EXPECT_EQ(il["published"]["config"]["stage_layers"], (std::vector<int>{2, 3, 3, 3, 3, 3, 3, 4}));
  const nlohmann::json il_sim = json_of(dir, "simulate " + scen);
  EXPECT_NEAR(
      il["published"]["iteration_s"].get<double>() * 1e3 / il_sim["iteration_ms"].get<double>(),
      1.0, 1e-9);
  // A first stage of the embedding alone (0/8/8/8), scored as `simulate` runs it.
  write_file_atomic(scen,
                    "model: {preset: megatron-1.7b}\n"
                    "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
                    "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1,\n"
                    "           pipeline_model_parallel_layout: \"E|(t*8|)*2,t*8L\",\n"
                    "           global_batch_size: 16}\n");
  const nlohmann::json e0 = json_of(dir, "plan " + scen + args);
  ASSERT_TRUE(e0["published"]["fits"].get<bool>()) << e0["published"].dump();
  EXPECT_EQ(e0["published"]["config"]["stage_layers"], (std::vector<int>{0, 8, 8, 8}));
  EXPECT_NEAR(e0["published"]["iteration_s"].get<double>() * 1e3 /
                  json_of(dir, "simulate " + scen)["iteration_ms"].get<double>(),
              1.0, 1e-9);
  // An empty middle stage (8/8/0/8: Megatron's transformer block of no layers passes its input
  // on), scored as `simulate` runs it; its GPUs hold no weights and no activations.
  write_file_atomic(scen,
                    "model: {preset: megatron-1.7b}\n"
                    "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
                    "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1,\n"
                    "           pipeline_model_parallel_layout: \"Et*8|t*8||t*8L\",\n"
                    "           global_batch_size: 16}\n");
  const nlohmann::json hole = json_of(dir, "plan " + scen + args);
  ASSERT_TRUE(hole["published"]["fits"].get<bool>()) << hole["published"].dump();
  EXPECT_EQ(hole["published"]["config"]["stage_layers"], (std::vector<int>{8, 8, 0, 8}));
  const nlohmann::json hole_sim = json_of(dir, "simulate " + scen);
  EXPECT_NEAR(
      hole["published"]["iteration_s"].get<double>() * 1e3 / hole_sim["iteration_ms"].get<double>(),
      1.0, 1e-9);
  bool saw_empty = false;
  for (const auto& g : hole_sim["memory"]) {
    if (g["pipeline_rank"] != 2) continue;
    saw_empty = true;
    EXPECT_EQ(g["weights_gb"].get<double>(), 0.0);
    EXPECT_EQ(g["activations_gb"].get<double>(), 0.0);
  }
  EXPECT_TRUE(saw_empty) << hole_sim["memory"].dump();
  // A multi-token prediction depth on a stage of its own before the loss's (Megatron's
  // mtp_standalone, "t*8m|L"): a split the search lays out (24 layers over the 3 stages before
  // the loss's, none trimmed), scored as `simulate` runs it and named so.
  write_file_atomic(scen,
                    "model: {preset: megatron-1.7b, position_embedding_type: rope,\n"
                    "        mtp_num_layers: 1}\n"
                    "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
                    "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1,\n"
                    "           pipeline_model_parallel_layout: \"Et*8|t*8|t*8m|L\",\n"
                    "           global_batch_size: 16}\n");
  const nlohmann::json own = json_of(dir, "plan " + scen + args);
  ASSERT_TRUE(own["published"]["fits"].get<bool>()) << own["published"].dump();
  EXPECT_EQ(own["published"]["config"]["stage_layers"], (std::vector<int>{8, 8, 8, 0}));
  EXPECT_EQ(own["published"]["config"]["mtp_standalone"], true);
  EXPECT_EQ(own["published"]["config"]["end_layers_trimmed"], 0);
  EXPECT_EQ(own["published"]["config"]["mtp_stage_layers_trimmed"], 0);
  EXPECT_NEAR(own["published"]["iteration_s"].get<double>() * 1e3 /
                  json_of(dir, "simulate " + scen)["iteration_ms"].get<double>(),
              1.0, 1e-9);
  // A split the search lays out (an even 6 per stage less one on each end: 5/7/7/5) is scored
  // as the planner scores its own rows, named by its trim.
  // The 1.7B model at p = 4 with `parallel` (and what follows it), planned; the report's line
  // on the scenario's own configuration must hold `line`.
  auto expect_line = [&](const std::string& parallel, const std::string& line) {
    write_file_atomic(scen,
                      "model: {preset: megatron-1.7b}\n"
                      "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
                      "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1,\n"
                      "           global_batch_size: 16" +
                          parallel);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    EXPECT_NE(read_file(out).find(line), std::string::npos) << read_file(out);
  };
  expect_line(",\n decoder_first_pipeline_num_layers: 5, decoder_last_pipeline_num_layers: 5}\n",
              "the scenario's configuration: t1 p4 d2 mb1 B16 1f1b ends-1 -> ");
  // "Published" only where the scenario's `published:` block names a source (it read
  // "published configuration (scenario)" for any scenario's own layout).
  expect_line("}\npublished: {tflops_per_gpu: 100, source: a run of ours}\n",
              "published configuration (a run of ours): t1 p4 d2 mb1 B16 1f1b -> ");
}

// `plan SCEN BAD` exits 2 with one error line naming BAD.
void expect_flag_refused(const std::filesystem::path& dir, const std::string& scen,
                         const std::string& bad) {
  const std::string cmd =
      pipewright() + " plan " + scen + " " + bad + " 2> " + (dir / "err.txt").string();
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2) << cmd;
  EXPECT_NE(read_file((dir / "err.txt").string()).find("error: " + bad + ":"), std::string::npos)
      << read_file((dir / "err.txt").string());
}

// Expert-TP 1 at t > 1 (experts whole, EP over the tensor-and-data ranks) is in the search, and
// a scenario naming it is scored by the planner as `simulate` runs it (the same iteration time);
// it was refused as "differs from t". --etp keeps the search to it; a degree that is not a
// tensor-parallel size of the model, or any for a dense model, is refused naming the flag.
TEST(PlanCli, ExpertTensorParallelOneIsSearchedAndScoredAsSimulated) {
  const TempDir tmp("pw_plan_etp_");
  const std::filesystem::path& dir = tmp.path;
  const std::string scen = (dir / "s.yaml").string();
  write_file_atomic(scen,
                    "model: {preset: qwen3-30b-a3b, use_flash_attn: true}\n"
                    "cluster: {profile: dgx-h100, nodes: 2}\n"
                    "parallel: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
                    "           expert_model_parallel_size: 8, expert_tensor_parallel_size: 1,\n"
                    "           micro_batch_size: 1, global_batch_size: 64, zero_stage: 1}\n");
  auto run_json = [&](const std::string& args) { return json_of(dir, args); };
  const nlohmann::json plan = run_json("plan " + scen +
                                       " --tp 2 --pp 1 --ep 8 --etp 1 --schedules 1f1b "
                                       "--microbatch-size 1 --top 3");
  ASSERT_TRUE(plan["published"]["fits"].get<bool>()) << plan["published"].dump();
  EXPECT_EQ(plan["published"]["config"]["expert_tensor_parallel"], 1);
  for (const nlohmann::json& row : plan["top"])
    EXPECT_EQ(row["config"]["expert_tensor_parallel"], 1) << row.dump();
  const nlohmann::json sim = run_json("simulate " + scen);
  EXPECT_NEAR(
      plan["published"]["iteration_s"].get<double>() * 1e3 / sim["iteration_ms"].get<double>(), 1.0,
      1e-3);
  for (const std::string bad : {"--etp 3", "--etp 4 --tp 2"}) expect_flag_refused(dir, scen, bad);
}

// Megatron's cp_comm_type travels from the scenario (or --cp-comm-type) into every searched
// configuration with context parallelism, the published one is scored as `simulate` runs it,
// and a form the model cannot run or an unknown one is refused.
TEST(PlanCli, ContextParallelFormIsSearchedAsTheScenarioNamesIt) {
  const TempDir tmp("pw_plan_cpform_");
  const std::filesystem::path& dir = tmp.path;
  const std::string scen = (dir / "s.yaml").string();
  write_file_atomic(scen,
                    "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 16,\n"
                    "        seq_length: 4096, vocab_size: 32000, use_flash_attn: true}\n"
                    "cluster: {profile: dgx-h100, nodes: 1}\n"
                    "parallel: {tensor_model_parallel_size: 2, context_parallel_size: 2,\n"
                    "           sequence_parallel: true, cp_comm_type: all_gather,\n"
                    "           micro_batch_size: 1, global_batch_size: 16}\n");
  const nlohmann::json plan =
      json_of(dir, "plan " + scen + " --tp 2 --cp 2 --pp 1 --schedules 1f1b --top 3");
  ASSERT_TRUE(plan["published"]["fits"].get<bool>()) << plan["published"].dump();
  EXPECT_EQ(plan["published"]["config"]["cp_comm_type"], "all_gather");
  ASSERT_FALSE(plan["top"].empty());
  for (const nlohmann::json& row : plan["top"])
    EXPECT_EQ(row["config"]["cp_comm_type"], "all_gather") << row.dump();
  const nlohmann::json sim = json_of(dir, "simulate " + scen);
  EXPECT_NEAR(
      plan["published"]["iteration_s"].get<double>() * 1e3 / sim["iteration_ms"].get<double>(), 1.0,
      1e-3);
  // The text ranking names the form in its header.
  const std::string text = (dir / "plan.txt").string();
  ASSERT_EQ(std::system((pipewright() + " plan " + scen +
                         " --tp 2 --cp 2 --pp 1 --schedules 1f1b --top 1 > " + text)
                            .c_str()),
            0);
  EXPECT_NE(read_file(text).find("context parallelism as all_gather"), std::string::npos)
      << read_file(text);
  // --cp-comm-type overrides the scenario's.
  const nlohmann::json ring = json_of(
      dir, "plan " + scen + " --tp 2 --cp 2 --pp 1 --schedules 1f1b --top 1 --cp-comm-type p2p");
  EXPECT_EQ(ring["top"][0]["config"]["cp_comm_type"], "p2p") << ring["top"][0].dump();
  for (const std::string bad : {"--cp-comm-type ring", "--cp-comm-type a2a+p2p"})
    expect_flag_refused(dir, scen, bad);
}

// ZB-1p is defined at 1F1B's memory (p microbatches of activations) and never slower than 1F1B
// there (zero-bubble paper); where a GPU has that room the planner runs it as defined. On the
// controllable-memory paper's 98.5B model at t2 p10 d2 (80 GB A100s, sequence 1024, no
// recomputation) 1F1B fits, so ZB-1p's best row at that layout is at most 1F1B's. Before,
// the screen dropped ZB-1p wherever its memory did not bind, and its best row was an uneven
// split (ends-1) whose fuller middle stages left it 7 of its 10 units: 17.3 s against 1F1B's
// 12.4 s.
TEST(PlanCli, Zb1pRunsAsDefinedWhereItsMemoryFits) {
  const std::string args = scenario("zero-bubble/cm-98.5b-s1024.yaml") +
                           " --tp 2 --pp 10 --dp 2 --microbatch-size 1 --sequence-parallel on"
                           " --recompute none --offload off --zero 1 --top 1 --format json";
  const PlanRun zb = plan(args + " --schedules zb-1p");
  const PlanRun one = plan(args + " --schedules 1f1b");
  ASSERT_EQ(zb.rc, 0) << zb.err;
  ASSERT_EQ(one.rc, 0) << one.err;
  const nlohmann::json z = nlohmann::json::parse(zb.out), o = nlohmann::json::parse(one.out);
  ASSERT_TRUE(z["feasible"].get<bool>()) << zb.out;
  ASSERT_TRUE(o["feasible"].get<bool>()) << one.out;
  const double tz = z["top"][0]["iteration_s"].get<double>();
  const double to = o["top"][0]["iteration_s"].get<double>();
  EXPECT_LE(tz, to) << z["top"][0]["config"].dump() << " against " << o["top"][0]["config"].dump();
  // ZB-2p, defined with twice the memory, is no slower where ZB-1p fits: each device gets its
  // own room (GeneratorParams::memory_caps). Under one limit for all devices (the fullest
  // device's static memory over an even stage's unit) its row at this layout needed 79.4 GB of
  // 78 and was dropped, and its best was an ends-1 row at 17.3 s.
  const PlanRun two = plan(args + " --schedules zb-2p");
  ASSERT_EQ(two.rc, 0) << two.err;
  const nlohmann::json t = nlohmann::json::parse(two.out);
  ASSERT_TRUE(t["feasible"].get<bool>()) << two.out;
  EXPECT_LE(t["top"][0]["iteration_s"].get<double>(), tz * (1 + 1e-9)) << t["top"][0].dump();
}

// --shortest-time honours the constraints at every sweep point; a subset of each point's space
// cannot be faster than the whole one, so the constrained best takes at least as many days.
TEST(PlanCli, ShortestTimeHonoursConstraints) {
  const std::string args = scenario("megatron/weak-scaling-1.7b.yaml") +
                           " --shortest-time --target-loss 2.5 --max-gpus 64 --format json";
  const PlanRun part = plan(args + " --schedules 1f1b --recompute none");
  const PlanRun whole = plan(args);
  ASSERT_EQ(part.rc, 0) << part.err;
  ASSERT_EQ(whole.rc, 0) << whole.err;
  const nlohmann::json p = nlohmann::json::parse(part.out), w = nlohmann::json::parse(whole.out);
  ASSERT_TRUE(p["feasible"].get<bool>());
  ASSERT_TRUE(w["feasible"].get<bool>());
  EXPECT_EQ(p["constraints"]["flags"].get<std::string>(), "--schedules 1f1b --recompute none");
  const auto& best = p["best"]["configuration"];
  EXPECT_EQ(best["schedule"].get<std::string>(), "1f1b");
  EXPECT_EQ(best["recompute"].get<std::string>(), "none");
  for (const auto& pt : p["points"])
    if (pt["feasible"].get<bool>()) {
      const std::string c = pt["config"].get<std::string>();
      EXPECT_NE(c.find(" 1f1b"), std::string::npos) << c;
      EXPECT_EQ(c.find("rc="), std::string::npos) << c;  // describe_config omits rc=none
    }
  EXPECT_GE(p["best"]["days"].get<double>(), w["best"]["days"].get<double>());
}

// The sweep doubles whole nodes from one (8 GPUs of a DGX A100): a ceiling of 3 swept nothing
// and printed "no feasible configuration at any batch size or GPU count" under a header that
// said "unlimited". Now it is refused, and a ceiling that sweeps is named in the header. The
// header is checked on a target below the model's loss floor (2.2 < 2.2719, the hand value in
// tests/planner/shortest_time_test.cc): no point is planned, and no infinite S_min is printed.
TEST(PlanCli, ShortestTimeNamesItsCeilingAndRefusesOneBelowANode) {
  const PlanRun below = plan("--shortest-time --max-gpus 3");
  EXPECT_EQ(below.rc, 2) << below.out;
  EXPECT_EQ(below.err.rfind("pipewright: error: --max-gpus: 3:", 0), 0u) << below.err;
  EXPECT_NE(below.err.find("expected at least 8"), std::string::npos) << below.err;
  const PlanRun ok = plan(scenario("megatron/weak-scaling-1.7b.yaml") +
                          " --shortest-time --target-loss 2.2 --max-gpus 16");
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("shortest possible training time: megatron-1.7b on up to 16 ", 0), 0u)
      << ok.out;
  EXPECT_NE(ok.out.find("no S_min (unreachable)"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("inf"), std::string::npos) << ok.out;
}

TEST(PlanCli, ConstrainedOutputDoesNotDependOnThreadCount) {
  const std::string args = scenario("megatron/weak-scaling-1.7b.yaml") +
                           " --pp 2,4 --schedules zb-h1,1f1b,interleaved --format json --threads ";
  const PlanRun one = plan(args + "1"), two = plan(args + "2");
  ASSERT_EQ(one.rc, 0) << one.err;
  EXPECT_EQ(one.out, two.out);
}

// Context parallelism counts in the GPU product: Llama 3.1 8B on one DGX H100 with --cp 2 --tp 8
// needs 2 * 8 = 16 GPUs. The message named t*p*d and left --cp out of the flags.
TEST(PlanCli, AGpuProductOverTheCountNamesContextParallelism) {
  const PlanRun r =
      plan(scenario("h100/dgxc-2411-llama318b-bf16-8.yaml") + " --cp 2 --tp 8 --gpus 8");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(r.err.rfind("pipewright: error: --gpus 8 --tp 8 --cp 2: no t*cp*p*d equals", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find("t*cp*p*d is at least 16"), std::string::npos) << r.err;
}

// Contradictions: exit 2 with one line naming the flags and why (GPT-3: 96 heads, 96 layers,
// 1024 GPUs, B = 1536 = 2^9 * 3).
TEST(PlanCli, ContradictoryConstraintsExit2NamingTheFlags) {
  const struct {
    const char* args;
    const char* names;  // the flags as the message names them
    const char* why;    // a word of the reason
  } cases[] = {
      {"--tp 5", "--tp 5", "heads"},
      {"--tp 3", "--tp 3", "t*p*d"},  // 3 divides 96 but no power-of-two GPU count
      {"--tp 16 --pp 64 --dp 2", "--tp 16 --pp 64 --dp 2", "at least 2048"},
      {"--pp 128", "--pp 128", "layers"},
      {"--gpus 2048", "--gpus 2048", "1024"},
      {"--gpus -1", "--gpus", ">= 1"},
      {"--gpus 0", "--gpus", ">= 1"},
      {"--schedules interleavd", "--schedules interleavd", "did you mean 'interleaved'"},
      {"--pp 1 --schedules zb-v", "--pp 1 --schedules zb-v", "p >= 2"},
      {"--schedules 1f1b-r --recompute none", "--schedules 1f1b-r --recompute none", "full"},
      {"--tp 1 --sequence-parallel on", "--tp 1 --sequence-parallel on", "t > 1"},
      {"--dp 1 --zero 3", "--dp 1 --zero 3", "d > 1"},
      {"--microbatch-size 7", "--microbatch-size 7", "1536"},
      {"--pp 32 --schedules v-half", "--pp 32 --schedules v-half", "p <= 16"},
      {"--global-batch 512,1024", "--global-batch 512,1024", "objective"},
      {"--zero 4", "--zero 4", "0..3"},
      {"--tp 8,x", "--tp 8,x", "integers"},
      {"--offload maybe", "--offload maybe", "on, off or both"},
      {"--schedules 1f1b:v3", "--schedules 1f1b:v3", "takes no :v"},
      {"--schedules interleaved:v1", "--schedules interleaved:v1", "at least 2"},
      {"--schedules interleaved:v5,1f1b", "--schedules interleaved:v5,1f1b", "2,3,4,6,8"},
      {"--shortest-time --gpus 64", "--shortest-time --gpus 64", "chooses the GPU count"},
      // Flags of the other mode were silently ignored (no file written, no row count changed).
      {"--shortest-time --top 5", "--top", "does not apply to --shortest-time"},
      {"--shortest-time --emit x.yaml", "--emit", "does not apply to --shortest-time"},
      {"--shortest-time --report x.html", "--report", "does not apply to --shortest-time"},
      {"--shortest-time --objective cost", "--objective", "does not apply to --shortest-time"},
      {"--max-gpus 16", "--max-gpus", "give --gpus N"},
      {"--des-top 0 --des-budget 5", "--des-budget", "--des-top 0 turns off"},
      {"--shortest-time --tp 8 --global-batch 512", "--shortest-time --tp 8 --global-batch 512",
       "global batch"},
      // 0 given was read as not given: 300B tokens, the GPU's memory, no target.
      {"--tokens 0", "--tokens", "above 0, got 0"},
      {"--memory-limit 0", "--memory-limit", "above 0, got 0"},
      {"--target-loss 0", "--target-loss", "above 0, got 0"},
      {"--tokens inf", "--tokens", "finite"},
  };
  for (const auto& k : cases) {
    const PlanRun r = plan(k.args);
    EXPECT_EQ(r.rc, 2) << k.args;
    EXPECT_EQ(occurrences(r.err, "\n"), 1u) << k.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind(std::string("pipewright: error: ") + k.names + ":", 0), 0u)
        << k.args << ": " << r.err;
    EXPECT_NE(r.err.find(k.why), std::string::npos) << k.args << ": " << r.err;
  }
}

// Nothing fits the constrained space: the usual "no feasible plan" result, exit 0. With t = 1
// and p = 1 every GPU holds GPT-3's 174.6e9 parameters: 2 bytes of weights alone are 349 GB.
TEST(PlanCli, ConstrainedSpaceWhereNothingFitsIsNoFeasiblePlan) {
  const PlanRun r = plan("--tp 1 --pp 1 --zero 0");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("constraints: --tp 1 --pp 1 --zero 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no feasible plan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("these constraints allow"), std::string::npos) << r.out;
  const nlohmann::json o = plan_json("--tp 1 --pp 1 --zero 0");
  EXPECT_FALSE(o["feasible"].get<bool>());
  EXPECT_GT(o["min_memory_needed_gb"].get<double>(), 349);
  EXPECT_FALSE(o["min_memory_needed_strict"].get<bool>());
}

// `--gpus N` names the N GPUs the space uses, not the cluster's 1,024. On 16 GPUs some ZB-V
// configurations pass the screen's memory bound but its generator finds no V order within the
// activations the limit leaves: they need more than the limit by an amount nothing priced, so
// the message says "more than 78.0 GB", never "at least 78.0 GB" against a 78.0 GB limit.
TEST(PlanCli, NoFeasiblePlanNamesTheConstrainedGpusAndANeedAboveTheLimit) {
  const PlanRun r = plan("--gpus 16 --schedules zb-v");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("does not fit in 78.0 GB per GPU on 16 GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("needs more than 78.0 GB per GPU"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("at least 78.0 GB"), std::string::npos) << r.out;
  const nlohmann::json o = plan_json("--gpus 16 --schedules zb-v");
  EXPECT_FALSE(o["feasible"].get<bool>());
  EXPECT_TRUE(o["min_memory_needed_strict"].get<bool>());
  EXPECT_DOUBLE_EQ(o["min_memory_needed_gb"].get<double>(), o["memory_limit_gb"].get<double>());
  // Eight GPUs: no configuration's screen bound fits, so the figure is the smallest bound.
  const PlanRun e = plan("--gpus 8");
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_NE(e.out.find("does not fit in 78.0 GB per GPU on 8 GPUs"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("needs at least"), std::string::npos) << e.out;
}

}  // namespace
}  // namespace pw
