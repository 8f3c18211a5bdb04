// One scenario reader for every command: every bundled scenario is accepted by `estimate`,
// `simulate`, `compare`, `plan` (restricted to the scenario's own configuration, so the search
// stays small) and, as a directory, `validate`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "core/file_io.h"
#include "tests/tools/cli_util.h"

namespace {

using pw::testing::kTool;
using pw::testing::occurrences;
using pw::testing::sh;

TEST(ScenarioCommands, EveryBundledScenarioIsReadByEveryCommand) {
  int files = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(PW_SOURCE_DIR) + "/scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    const std::string f = e.path().string();
    // A scenario whose parallel section holds only the batch names no configuration (for the
    // planner's grid search): the configuration-taking commands refuse it in one line naming the
    // missing key, and `plan` searches it.
    if (std::regex_search(pw::read_file(f),
                          std::regex("\nparallel: \\{global_batch_size: \\d+\\}\n"))) {
      for (const char* c : {" estimate ", " simulate ", " compare "}) {
        std::string out;
        EXPECT_EQ(sh(kTool + c + f, &out), 2) << c << f << "\n" << out;
        EXPECT_NE(out.find("parallel.micro_batch_size: missing"), std::string::npos) << out;
      }
      std::string out;
      EXPECT_EQ(sh(kTool + " plan " + f + " --des-top 0 --top 1 --schedules 1f1b", &out), 0) << out;
      continue;
    }
    for (const std::string& cmd :
         {kTool + " estimate " + f + " --format json", kTool + " simulate " + f + " --format json",
          kTool + " compare " + f + " --schedules 1f1b",
          // The scenario's own t and p, the planner's smallest search on it, ranked by the
          // evaluator (the DES tier is exercised elsewhere).
          kTool + " plan " + f + " --des-top 0 --top 1 --microbatch-size 1 --schedules 1f1b " +
              "--recompute full --zero 0 --offload off --sequence-parallel off"}) {
      std::string out;
      EXPECT_EQ(sh(cmd, &out), 0) << cmd << "\n" << out.substr(0, 2000);
    }
  }
  EXPECT_GE(files, 23);
  std::string out;
  EXPECT_EQ(sh(kTool + " validate " + PW_SOURCE_DIR + "/scenarios", &out), 0) << out;
  EXPECT_NE(out.find("all groups: "), std::string::npos) << out;
}

// `validate` with no directory reads the bundled scenarios from anywhere, groups them by their
// `group:` key (weak scaling, Korthikanti, PTD-P vs ZeRO-3, zero-bubble, H100), prints a
// prediction alone where no figure is published, and gives each group's mean and worst error.
// The visible groups' errors are pinned so that no group gets worse to make another better: the
// bounds are the issue's targets where the build meets them (H100 Llama rows within 10%), and
// otherwise today's figures rounded up (a ratchet, not an expected value): weak scaling mean 6.9%,
// worst 10.7% (goal 3%); H100 with the Qwen3-30B-A3B EP8 row worst 57.3%.
TEST(ScenarioCommands, ValidateGroupsEveryBundledScenarioFromAnyDirectory) {
  std::string out;
  ASSERT_EQ(sh("cd " + std::filesystem::temp_directory_path().string() + " && " + kTool +
                   " validate --format json",
               &out),
            0)
      << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  std::map<std::string, nlohmann::json> groups;
  for (const auto& g : j["groups"]) groups[g["group"].get<std::string>()] = g;
  for (const char* name : {"weak scaling", "Korthikanti", "PTD-P vs ZeRO-3", "zero-bubble", "H100"})
    ASSERT_TRUE(groups.count(name)) << name << "\n" << out.substr(0, 2000);
  // Ten weak-scaling models, three with figures in shared/reference.
  EXPECT_EQ(groups["weak scaling"]["scenarios"], 10);
  EXPECT_EQ(groups["weak scaling"]["published"], 3);
  // Pinned at the build's figures (6.92 / 10.73 since Megatron's pipeline calls replaced
  // transfers that started when their data was ready; docs/simulator.md): no change may worsen
  // them.
  EXPECT_LE(groups["weak scaling"]["mean_abs_error_pct"].get<double>(), 6.92);
  EXPECT_LE(groups["weak scaling"]["worst_abs_error_pct"].get<double>(), 10.73);
  // GPT 175B on 384/768/1536 and 530B on 560/1120/2240 GPUs, each under PTD-P and ZeRO-3:
  // predictions alone.
  EXPECT_EQ(groups["PTD-P vs ZeRO-3"]["scenarios"], 12);
  EXPECT_EQ(groups["PTD-P vs ZeRO-3"]["published"], 0);
  for (const auto& r : groups["PTD-P vs ZeRO-3"]["rows"]) {
    EXPECT_TRUE(r["error_pct"].is_null()) << r;
    EXPECT_GT(r["predicted_tflops_per_gpu"].get<double>(), 0) << r;
  }
  EXPECT_EQ(groups["Korthikanti"]["scenarios"], 8);
  EXPECT_EQ(groups["H100"]["published"], 17);
  // The Qwen3-30B-A3B EP8 row (the one MoE row with pipelining) was 52.6% before the rows ran
  // Megatron's overlap_p2p_comm, as their recipes did, and is 57.3% with it: the cause of its
  // error lies elsewhere (docs/simulator.md), so the pin moved with the faithful setting. It is
  // 57.4% since expert gradients reduce over the expert-DP group as Megatron's do (at d = 8,
  // ep = 8 each rank's experts are its own, so there is no expert reduction at all): the same.
  // 55.7% since the experts' FP8 input casts are priced (docs/hwmodels.md).
  EXPECT_LE(groups["H100"]["worst_abs_error_pct"].get<double>(), 55.7);
  // Llama rows within the issue's 10%, but one: NeMo 24.07's Llama 3 8B FP8 row and
  // dgxc-benchmarking's Llama 3.1 8B FP8 row on 8 GPUs are one configuration (cp 2, d 4, mbs 1,
  // gbs 128, seq 8192) measured at 10.68 s and 9.67 s by two releases, 10.4% apart; since both
  // price Megatron's overlap_param_gather, which both ran, the model's one figure is 0.1% from
  // the later and 10.3% from the earlier (pinned at 10.4, a ratchet). And one more: Llama 3.1
  // 70B FP8 on 2,048 GPUs went from +9.7% to +10.9% when the interleaved rows ran Megatron's
  // overlap_p2p_comm as their recipes did (every Llama 3.1 70B row moved by 0.8-1.2 points; the
  // row with the most transfers, Llama 2 70B at vp 20, from -9.2% to -1.6%): pinned at 10.9.
  for (const auto& r : groups["H100"]["rows"]) {
    const std::string f = r["scenario"];
    const double pin = f.find("nemo2407-llama3-8b-8") != std::string::npos            ? 10.4
                       : f.find("dgxc-2411-llama3170b-fp8-2048") != std::string::npos ? 10.9
                                                                                      : 10.0;
    if (f.find("llama") != std::string::npos) {
      EXPECT_LE(std::abs(r["error_pct"].get<double>()), pin) << f;
    }
  }
  // The grid-search inputs name no configuration: listed, not predicted.
  EXPECT_EQ(j["without_configuration"].size(), 2u);
  EXPECT_EQ(j["published"], 20);
  out.clear();
  ASSERT_EQ(sh(kTool + " validate " + PW_SOURCE_DIR + "/scenarios/megatron", &out), 0) << out;
  EXPECT_NE(out.find("[weak scaling]"), std::string::npos) << out;
  EXPECT_NE(out.find("weak scaling: 10 scenarios, 3 with published figures: mean |error|"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Korthikanti: 8 scenarios, none with published figures"), std::string::npos)
      << out;
}

// Today's models from the command line: bad shapes, layouts and config.json files are one-line
// errors naming the file (or flag) and key, exit 2.
TEST(ScenarioCommands, ModernModelErrorsExit2NamingFileAndKey) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pw-modern-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    pw::write_file_atomic((dir / name).string(), text);
    return (dir / name).string();
  };
  const std::string cluster = "cluster: {profile: dgx-h100, nodes: 1}\n";
  const std::string batch = "parallel: {micro_batch_size: 1, global_batch_size: 8";
  struct Case {
    std::string cmd, must;
  };
  const std::string neox = write("neox.json", R"({"model_type": "gpt_neox", "hidden_size": 64})");
  const std::string hf =
      write("hf.yaml", "model: {hf_config: neox.json, seq_length: 64}\n" + cluster + batch + "}\n");
  const std::string gqa =
      write("gqa.yaml",
            "model: {num_layers: 2, hidden_size: 64, num_attention_heads: 8, num_query_groups: 3, "
            "seq_length: 64, vocab_size: 128}\n" +
                cluster + batch + "}\n");
  const std::string ep =
      write("ep.yaml", "model: {preset: qwen3-30b-a3b, use_flash_attn: true}\n" + cluster + batch +
                           ", expert_model_parallel_size: 3}\n");
  const std::string cp = write("cp.yaml",
                               "model: {preset: llama3-8b, use_flash_attn: true, "
                               "seq_length: 8190}\n" +
                                   cluster + batch + ", context_parallel_size: 2}\n");
  const std::string dense = write("dense.yaml", "model: {preset: llama3-8b}\n" + cluster +
                                                    "parallel: {global_batch_size: 8}\n");
  const Case cases[] = {
      {kTool + " estimate " + hf, "neox.json: model_type: 'gpt_neox'"},
      {kTool + " simulate " + gqa, "gqa.yaml: model.num_query_groups:"},
      {kTool + " estimate " + ep, "ep.yaml: parallel.expert_model_parallel_size:"},
      {kTool + " simulate " + cp, "cp.yaml: parallel.context_parallel_size:"},
      {kTool + " plan " + dense + " --ep 2", "--ep 2: 2 for a dense model"},
      {kTool + " plan " + dense + " --cp 3", "--cp 3: 2 x 3 does not divide seq_length 8192"},
      {kTool + " plan " + dense + " --fp8 maybe", "--fp8 maybe: expected on, off or both"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(sh(c.cmd, &out), 2) << c.cmd << "\n" << out;
    EXPECT_NE(out.find(c.must), std::string::npos) << c.cmd << "\n" << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << c.cmd << " printed more than one line:\n" << out;
  }
  std::filesystem::remove_all(dir);
}

// `estimate`'s analytic iteration counts each device's own chunks: under interleaving the last
// device runs the head chunk once per microbatch and v - 1 middle chunks, not v head chunks.
// On interleaved schedules without ZeRO-3 it then lands within 2% of the simulator (GPT-3 175B
// t8 p8 v3: 20.31 s against 20.32 s; Qwen3-30B-A3B p2 v12 EP 8, a 152k-vocabulary head: 18.99
// s against 18.96 s). Counting every chunk as the slowest gave 21.16 s and 44.0 s.
TEST(ScenarioCommands, EstimateAgreesWithTheSimulatorUnderInterleaving) {
  for (const std::string rel : {"/tests/hwmodels/data/gpt3-175b.yaml",
                                "/scenarios/h100/mbridge-260201-qwen3-30b-a3b-16.yaml"}) {
    const std::string f = std::string(PW_SOURCE_DIR) + rel;
    std::string est, sim;
    ASSERT_EQ(sh(kTool + " estimate " + f + " --format json", &est), 0) << est;
    ASSERT_EQ(sh(kTool + " simulate " + f + " --format json", &sim), 0) << sim;
    const nlohmann::json e = nlohmann::json::parse(est), s = nlohmann::json::parse(sim);
    ASSERT_GT(s["virtual_stages"].get<int>(), 1) << rel;
    const double analytic = e["iteration_time_s"].get<double>();
    const double des = s["iteration_ms"].get<double>() / 1000;
    EXPECT_NEAR(analytic, des, 0.02 * des) << rel;
  }
}

// ZeRO-3 at t = p = 1 (the bundled PTD-P vs ZeRO-3 points, GPT 175B on 384-1536 and 530B on
// 560-2240 GPUs, DeepSpeed's gathers by tensor bucket; the 175B ones also by layer, as FSDP):
// `estimate`'s analytic iteration (each pass at least its gathers, hw::zero3_pass_gathers; the
// reduce-scatter in DeepSpeed's 5e8-parameter buckets) is within 2% of the simulator's, which
// runs the same collectives on the flow network (they differed by 10-84% when the simulator
// bucketed by 80 MB and the estimate did not).
TEST(ScenarioCommands, EstimateAgreesWithTheSimulatorUnderZero3) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  for (const std::string n :
       {"175b-384", "175b-768", "175b-1536", "530b-560", "530b-1120", "530b-2240"}) {
    const std::string bundled =
        std::string(PW_SOURCE_DIR) + "/scenarios/megatron/zero3-" + n + ".yaml";
    std::vector<std::string> files{bundled};
    if (n.rfind("175b", 0) == 0) {
      std::string text = pw::read_file(bundled);
      const std::size_t at = text.find("zero3_gather: tensor");
      ASSERT_NE(at, std::string::npos) << n;
      text.replace(at, 20, "zero3_gather: layer ");
      files.push_back(dir + "/pw-zero3-layer-" + std::to_string(::getpid()) + "-" + n + ".yaml");
      pw::write_file_atomic(files.back(), text);
    }
    for (const std::string& f : files) {
      std::string est, sim;
      ASSERT_EQ(sh(kTool + " estimate " + f + " --format json", &est), 0) << est;
      ASSERT_EQ(sh(kTool + " simulate " + f + " --format json", &sim), 0) << sim;
      const nlohmann::json e = nlohmann::json::parse(est), s = nlohmann::json::parse(sim);
      const double analytic = e["iteration_time_s"].get<double>();
      const double des = s["iteration_ms"].get<double>() / 1000;
      EXPECT_NEAR(analytic, des, 0.02 * des) << f;
    }
  }
}

// `plan` on a scenario whose ZeRO-3 gathers in DeepSpeed's tensor buckets: the planner searches
// only by layer and by stage, so the published-configuration line says it cannot score that
// form and names the command that does, instead of scoring it silently as by layer.
TEST(ScenarioCommands, PlanSaysItDoesNotScoreZero3ByTensor) {
  const std::string f = std::string(PW_SOURCE_DIR) + "/scenarios/megatron/zero3-175b-384.yaml";
  std::string out;
  ASSERT_EQ(sh(kTool + " plan " + f + " --tp 1 --pp 1 --top 1", &out), 0) << out;
  EXPECT_NE(out.find("zero3_gather: tensor) are not a form the planner searches"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("`pipewright simulate " + f + "` simulates it"), std::string::npos) << out;
  EXPECT_EQ(out.find("per iteration (DES)"), std::string::npos) << out;
}

// A scenario with Megatron's interleaved groups other than p: `simulate` runs them (its
// --group-size flag is the fixed-cost mode's and is refused here, naming the key), and `plan`
// says it does not score them instead of scoring Megatron's default order in their place.
TEST(ScenarioCommands, InterleavedGroupSizeIsSimulatedAndNotSilentlyReplanned) {
  const std::string bundled =
      std::string(PW_SOURCE_DIR) + "/scenarios/h100/nemo2407-llama2-70b-64.yaml";
  std::string text = pw::read_file(bundled);
  const std::size_t at = text.find("\nparallel:\n");
  ASSERT_NE(at, std::string::npos);
  auto variant = [&](int g) {
    std::string t = text;
    t.insert(at + 11, "  microbatch_group_size_per_vp_stage: " + std::to_string(g) + "\n");
    const std::string f = std::filesystem::temp_directory_path().string() + "/pw-group-" +
                          std::to_string(::getpid()) + "-" + std::to_string(g) + ".yaml";
    pw::write_file_atomic(f, t);
    return f;
  };
  const std::string g4 = variant(4), g8 = variant(8);  // p = 4, v = 20, m = 128 / 4 = 32
  std::string a, b, c;
  ASSERT_EQ(sh(kTool + " simulate " + bundled + " --format json", &a), 0) << a;
  ASSERT_EQ(sh(kTool + " simulate " + g4 + " --format json", &b), 0) << b;
  ASSERT_EQ(sh(kTool + " simulate " + g8 + " --format json", &c), 0) << c;
  const nlohmann::json def = nlohmann::json::parse(a), four = nlohmann::json::parse(b),
                       eight = nlohmann::json::parse(c);
  // g = p is Megatron's default: the same run. g = 8 holds (v - 1)(8 - 4) = 76 more chunk
  // activations on the first rank at the end of its warm-up (2(p - 1) + (v - 1) g forwards:
  // 158 against 82); what both hold besides (the embedding's output) keeps the ratio within 2%
  // of 158 / 82.
  EXPECT_EQ(four["iteration_ms"], def["iteration_ms"]);
  EXPECT_GT(eight["memory"][0]["activations_gb"].get<double>(),
            four["memory"][0]["activations_gb"].get<double>() * (158.0 / 82.0) * 0.98);
  std::string out;
  EXPECT_EQ(sh(kTool + " simulate " + g8 + " --group-size 8", &out), 2) << out;
  EXPECT_NE(out.find("--group-size: applies to a fixed-cost schedule (--schedule or "
                     "--import-csv); a scenario's interleaved groups are "
                     "parallel.microbatch_group_size_per_vp_stage"),
            std::string::npos)
      << out;
  out.clear();
  ASSERT_EQ(sh(kTool + " plan " + g8 + " --tp 4 --pp 4 --top 1", &out), 0) << out;
  EXPECT_NE(out.find("its interleaved microbatch groups of 8 (microbatch_group_size_per_vp_stage) "
                     "are not searched"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("per iteration (DES)"), std::string::npos) << out;
  std::filesystem::remove(g4);
  std::filesystem::remove(g8);
}

// `estimate --zero3-gather` overrides ZeRO-3's granularity: by stage the one stage of the 1.7B
// model (t = p = 1, 24 layers, P parameters) is gathered whole and held, 2P bytes of buffers
// where by layer two layers' (4P/24) are; the flag needs ZeRO-3 and takes layer, tensor or stage,
// one line, exit 2.
TEST(ScenarioCommands, EstimateOverridesTheZero3Gather) {
  const std::string f = std::string(PW_SOURCE_DIR) + "/scenarios/megatron/weak-scaling-1.7b.yaml";
  std::string layer, stage;
  ASSERT_EQ(sh(kTool + " estimate " + f + " --zero-stage 3 --format json", &layer), 0) << layer;
  ASSERT_EQ(
      sh(kTool + " estimate " + f + " --zero-stage 3 --zero3-gather stage --format json", &stage),
      0)
      << stage;
  EXPECT_NE(layer.find("\"zero3_gather\": \"layer\""), std::string::npos) << layer;
  EXPECT_NE(stage.find("\"zero3_gather\": \"stage\""), std::string::npos) << stage;
  auto number = [](const std::string& json, const std::string& key) {
    const std::size_t at = json.find("\"" + key + "\": ");
    return at == std::string::npos ? -1.0 : std::stod(json.substr(at + key.size() + 4));
  };
  // The one stage holds every parameter; 24 layers.
  const double P = number(layer, "parameters");
  EXPECT_NEAR(number(stage, "buffers_bytes") - number(layer, "buffers_bytes"), 2 * P - 4 * P / 24,
              1e-6 * P);
  for (const auto& [flags, must] :
       {std::pair<std::string, std::string>{" --zero3-gather stage",
                                            "--zero3-gather: given with ZeRO stage 0"},
        {" --zero-stage 3 --zero3-gather sweep",
         "--zero3-gather: 'sweep'; expected layer, tensor or stage"}}) {
    std::string out;
    EXPECT_EQ(sh(kTool + " estimate " + f + flags, &out), 2) << flags << "\n" << out;
    EXPECT_NE(out.find(must), std::string::npos) << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
  }
}

// A plan of a GQA + SwiGLU MoE model with context parallelism, expert parallelism and FP8
// carries its model and attention pricing: `simulate --plan` re-simulates it to the picosecond.
TEST(ScenarioCommands, ModernModelPlanReSimulatesExactly) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pw-modern-plan-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string scenario = (dir / "moe.yaml").string();
  pw::write_file_atomic(
      scenario,
      "model: {name: tiny-moe, num_layers: 4, hidden_size: 512, num_attention_heads: 8,\n"
      "        num_query_groups: 2, swiglu: true, normalization: RMSNorm,\n"
      "        position_embedding_type: rope, add_bias_linear: false,\n"
      "        untie_embeddings_and_output_weights: true, num_experts: 8, moe_router_topk: 2,\n"
      "        moe_ffn_hidden_size: 512, seq_length: 4096, vocab_size: 32000,\n"
      "        use_flash_attn: true}\n"
      "cluster: {profile: dgx-h100, nodes: 2}\n"
      "parallel: {global_batch_size: 32}\n");
  const std::string plan = (dir / "plan.yaml").string();
  std::string out;
  ASSERT_EQ(
      sh(kTool + " plan " + scenario + " --top 1 --cp 2 --ep 4 --fp8 on --pp 2 --emit " + plan,
         &out),
      0)
      << out;
  EXPECT_NE(out.find("cp2"), std::string::npos) << out;
  EXPECT_NE(out.find("ep4"), std::string::npos) << out;
  const std::string text = pw::read_file(plan);
  for (const char* key :
       {"num_query_groups: 2", "swiglu: true", "num_experts: 8", "use_flash_attn: true",
        "context_parallel: 2", "expert_parallel: 4", "fp8: hybrid"})
    EXPECT_NE(text.find(key), std::string::npos) << key;
  out.clear();
  ASSERT_EQ(sh(kTool + " simulate --plan " + plan, &out), 0) << out;
  EXPECT_NE(out.find("difference +0.00%"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// A plan the search lays out with the multi-token prediction depth on a stage of its own (the
// loss alone on the last stage, no transformer layer there) re-simulates to the picosecond and
// exports Megatron's layout. The model: 12 layers, a 256k vocabulary (each logits GEMM about 9
// layers' work: 2V / 24h at h = 2304), so the loss stage alone is what bounds 1F1B at p = 4.
// `simulate --plan` refused such a plan ("a stage without layers cannot be costed") until
// 2026-11-29.
TEST(ScenarioCommands, APlanWithTheDepthAloneReSimulatesExactly) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pw-mtp-alone-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string scenario = (dir / "mtp.yaml").string();
  pw::write_file_atomic(scenario,
                        "model: {preset: megatron-1.7b, position_embedding_type: rope,\n"
                        "        mtp_num_layers: 1, vocab_size: 256000, num_layers: 12}\n"
                        "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"
                        "parallel: {global_batch_size: 64}\n");
  const std::string plan = (dir / "plan.yaml").string();
  std::string out;
  ASSERT_EQ(
      sh(kTool + " plan " + scenario + " --top 1 --pp 4 --tp 2 --schedules 1f1b --emit " + plan,
         &out),
      0)
      << out;
  EXPECT_NE(out.find("mtp-alone"), std::string::npos) << out;
  EXPECT_NE(pw::read_file(plan).find("mtp_standalone: true"), std::string::npos);
  out.clear();
  ASSERT_EQ(sh(kTool + " simulate --plan " + plan, &out), 0) << out;
  EXPECT_NE(out.find("difference +0.00%"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(sh(kTool + " export " + plan + " --to megatron", &out), 0) << out;
  EXPECT_NE(out.find("m|L"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// Megatron's gradient precision and overlaps are scenario keys every tier reads: a plan searched
// with them carries them, re-simulates to the picosecond, and `simulate --grad-reduce-bytes 2`
// is the same run as `grad_reduce_in_fp32: false`.
TEST(ScenarioCommands, MegatronOverlapSettingsReachEveryTier) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pw-overlap-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    pw::write_file_atomic((dir / name).string(), text);
    return (dir / name).string();
  };
  const std::string model =
      "model: {num_layers: 8, hidden_size: 2048, num_attention_heads: 16, seq_length: 2048,\n"
      "        vocab_size: 32000, use_flash_attn: true}\n"
      "cluster: {profile: dgx-h100, nodes: 1}\n";
  const std::string searched =
      write("searched.yaml", model +
                                 "parallel: {global_batch_size: 32, grad_reduce_in_fp32: false,\n"
                                 "           overlap_grad_reduce: true, tp_comm_overlap: true}\n");
  const std::string plan = (dir / "plan.yaml").string();
  std::string out;
  ASSERT_EQ(sh(kTool + " plan " + searched +
                   " --top 1 --tp 2 --pp 2 --sequence-parallel on --schedules 1f1b --emit " + plan,
               &out),
            0)
      << out;
  const std::string text = pw::read_file(plan);
  for (const char* key :
       {"grad_reduce_in_fp32: false", "overlap_grad_reduce: true", "tp_comm_overlap: true"})
    EXPECT_NE(text.find(key), std::string::npos) << key << "\n" << text;
  out.clear();
  ASSERT_EQ(sh(kTool + " simulate --plan " + plan, &out), 0) << out;
  EXPECT_NE(out.find("difference +0.00%"), std::string::npos) << out;

  const std::string fixed =
      "parallel: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
      "           micro_batch_size: 1, global_batch_size: 32";
  const std::string bf16 = write("bf16.yaml", model + fixed + ", grad_reduce_in_fp32: false}\n");
  const std::string plain = write("plain.yaml", model + fixed + "}\n");
  std::string a, b;
  ASSERT_EQ(sh(kTool + " simulate " + bf16 + " --format json", &a), 0) << a;
  ASSERT_EQ(sh(kTool + " simulate " + plain + " --grad-reduce-bytes 2 --format json", &b), 0) << b;
  auto field = [](const std::string& json, const std::string& key) {
    const std::size_t at = json.find("\"" + key + "\"");
    return at == std::string::npos ? std::string() : json.substr(at, json.find(',', at) - at);
  };
  EXPECT_EQ(field(a, "iteration_ms"), field(b, "iteration_ms"));
  EXPECT_FALSE(field(a, "iteration_ms").empty()) << a;

  // `plan --tp-comm-overlap on` sets it for a scenario that does not; both is not a choice.
  out.clear();
  ASSERT_EQ(sh(kTool + " plan " + plain + " --top 1 --tp 2 --pp 2 --sequence-parallel on " +
                   "--schedules 1f1b --tp-comm-overlap on --emit " + plan,
               &out),
            0)
      << out;
  EXPECT_NE(pw::read_file(plan).find("tp_comm_overlap: true"), std::string::npos);
  out.clear();
  EXPECT_EQ(sh(kTool + " plan " + plain + " --tp-comm-overlap both", &out), 2);
  EXPECT_NE(out.find("--tp-comm-overlap both: expected on or off"), std::string::npos) << out;

  // `plan --overlap-param-gather on` prices ZeRO-1/2's re-gather under the next forwards and
  // writes it into the plan (Megatron requires overlap_grad_reduce with it).
  const std::string overlapped =
      write("ogr.yaml", model + "parallel: {global_batch_size: 32, overlap_grad_reduce: true}\n");
  out.clear();
  ASSERT_EQ(sh(kTool + " plan " + overlapped + " --top 1 --tp 2 --pp 2 --zero 1 " +
                   "--schedules 1f1b --overlap-param-gather on --emit " + plan,
               &out),
            0)
      << out;
  EXPECT_NE(pw::read_file(plan).find("overlap_param_gather: true"), std::string::npos);
  out.clear();
  ASSERT_EQ(sh(kTool + " simulate --plan " + plan, &out), 0) << out;
  EXPECT_NE(out.find("difference +0.00%"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(sh(kTool + " plan " + plain + " --overlap-param-gather on", &out), 2);
  EXPECT_NE(out.find("--overlap-param-gather on: without overlap_grad_reduce"), std::string::npos)
      << out;
  // `simulate --overlap-param-gather` sets it as the key does, with the key's checks.
  const std::string z1 = write("z1.yaml", model + fixed + ", zero_stage: 1}\n");
  std::string with_flag, with_key;
  ASSERT_EQ(sh(kTool + " simulate " + z1 + " --overlap-grad-reduce --overlap-param-gather" +
                   " --format json",
               &with_flag),
            0)
      << with_flag;
  const std::string z1_key = write(
      "z1key.yaml",
      model + fixed + ", zero_stage: 1, overlap_grad_reduce: true, overlap_param_gather: true}\n");
  ASSERT_EQ(sh(kTool + " simulate " + z1_key + " --format json", &with_key), 0) << with_key;
  EXPECT_EQ(field(with_flag, "iteration_ms"), field(with_key, "iteration_ms"));
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + z1 + " --overlap-param-gather", &out), 2) << out;
  EXPECT_NE(out.find("--overlap-param-gather: without overlap_grad_reduce"), std::string::npos)
      << out;
  const std::string no_ogr =
      write("noogr.yaml", model + fixed + ", zero_stage: 1, overlap_param_gather: true}\n");
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + no_ogr, &out), 2) << out;
  EXPECT_NE(out.find("noogr.yaml: parallel.overlap_param_gather: true without overlap_grad_reduce"),
            std::string::npos)
      << out;
  const std::string stray =
      write("stray.yaml",
            model + fixed + ", zero_stage: 1, align_param_gather: false, ddp_bucket_size: 1}\n");
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + stray, &out), 2) << out;
  EXPECT_NE(out.find("stray.yaml: parallel.align_param_gather: given without overlap_param_gather"),
            std::string::npos)
      << out;
  const std::string bucket =
      write("bucket.yaml", model + fixed + ", zero_stage: 1, ddp_bucket_size: 0}\n");
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + bucket, &out), 2) << out;
  EXPECT_NE(out.find("bucket.yaml: parallel.ddp_bucket_size"), std::string::npos) << out;
  const std::string no_zero = write(
      "nozero.yaml", model + fixed + ", overlap_grad_reduce: true, overlap_param_gather: true}\n");
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + no_zero, &out), 2) << out;
  EXPECT_NE(out.find("nozero.yaml: parallel.overlap_param_gather: true with zero_stage 0"),
            std::string::npos)
      << out;

  const std::string no_sp =
      write("nosp.yaml", model +
                             "parallel: {tensor_model_parallel_size: 2, micro_batch_size: 1,\n"
                             "           global_batch_size: 32, tp_comm_overlap: true}\n");
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + no_sp, &out), 2) << out;
  EXPECT_NE(out.find("nosp.yaml: parallel.tp_comm_overlap: true without sequence parallelism"),
            std::string::npos)
      << out;

  // Megatron's overlap_p2p_comm: `simulate --overlap-p2p-comm` is the key, never slower than
  // the blocking calls; `plan --overlap-p2p-comm on` writes it into the interleaved plan, which
  // re-simulates to its prediction; both are refused without the interleaved schedule.
  const std::string inter =
      "parallel: {pipeline_model_parallel_size: 4, num_layers_per_virtual_pipeline_stage: 1,\n"
      "           micro_batch_size: 1, global_batch_size: 16";
  const std::string il = write("il.yaml", model + inter + "}\n");
  const std::string il_key = write("ilkey.yaml", model + inter + ", overlap_p2p_comm: true}\n");
  std::string blocking, flagged, keyed;
  ASSERT_EQ(sh(kTool + " simulate " + il + " --format json", &blocking), 0) << blocking;
  ASSERT_EQ(sh(kTool + " simulate " + il + " --overlap-p2p-comm --format json", &flagged), 0)
      << flagged;
  ASSERT_EQ(sh(kTool + " simulate " + il_key + " --format json", &keyed), 0) << keyed;
  EXPECT_EQ(field(flagged, "iteration_ms"), field(keyed, "iteration_ms"));
  const auto ms = [&](const std::string& json) {
    const std::string f = field(json, "iteration_ms");
    return std::stod(f.substr(f.find(':') + 1));
  };
  EXPECT_LE(ms(keyed), ms(blocking));
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + plain + " --overlap-p2p-comm", &out), 2) << out;
  EXPECT_NE(out.find("--overlap-p2p-comm: with schedule 1f1b, p = 1 and v = 1; expected the "
                     "interleaved"),
            std::string::npos)
      << out;
  const std::string no_il = write("noil.yaml", model + fixed + ", overlap_p2p_comm: true}\n");
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + no_il, &out), 2) << out;
  EXPECT_NE(out.find("noil.yaml: parallel.overlap_p2p_comm: true without the interleaved"),
            std::string::npos)
      << out;
  out.clear();
  const std::string open = write("open.yaml", model + "parallel: {global_batch_size: 16}\n");
  ASSERT_EQ(sh(kTool + " plan " + open + " --top 1 --tp 1 --pp 4 --schedules interleaved:v2 " +
                   "--overlap-p2p-comm on --emit " + plan,
               &out),
            0)
      << out;
  EXPECT_NE(pw::read_file(plan).find("overlap_p2p_comm: true"), std::string::npos);
  out.clear();
  ASSERT_EQ(sh(kTool + " simulate --plan " + plan, &out), 0) << out;
  EXPECT_NE(out.find("difference +0.00%"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(sh(kTool + " plan " + open + " --overlap-p2p-comm both", &out), 2);
  EXPECT_NE(out.find("--overlap-p2p-comm both: expected on or off"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
