// `pipewright execute` end to end under mpirun: a plan file in, a measured run and a trace out;
// an edited plan is rejected by its checksum.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "../tools/cli_util.h"
#include "core/file_io.h"
#include "core/plan_io.h"

namespace {

using pw::testing::kTool;

// The shared CLI runner, with Open MPI allowed to run as root (CI runs as root).
int sh(const std::string& cmd, std::string* out) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  return pw::testing::sh(cmd, out);
}

const std::string kDir = PW_BINARY_DIR;

TEST(ExecuteCli, RunsAPlanFileAndWritesMeasuredRunAndTrace) {
  std::string out;
  const std::string plan = kDir + "/cli_zbh1.yaml", run = kDir + "/cli_zbh1_run.json";
  ASSERT_EQ(sh(std::string(PW_RANK_HELPER) + " --schedule zb-h1 --save-plan " + plan, &out), 0);
  const int rc =
      sh(std::string(PW_MPIRUN) + " --oversubscribe -np 4 " + kTool + " execute " + plan +
             " --check-gradients --measured " + run + " --trace " + kDir + "/cli_zbh1_trace.json",
         &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  const pw::MeasuredRun m = pw::load_measured_run(run);
  // ZB-H1, p = 4, m = 8: every device runs 8 F, 8 B and 8 W plan actions: 4 * 24.
  EXPECT_EQ(m.actions.size(), 96u);
  for (const auto& a : m.actions) EXPECT_LE(a.start, a.end);
  EXPECT_NE(pw::read_file(kDir + "/cli_zbh1_trace.json").find("\"traceEvents\""),
            std::string::npos);
  EXPECT_EQ(m.optimizer, "sgd");  // execute's default, named in the run
}

// A planned run (`plan --emit` on the shipped CPU profile) executed with each optimizer: the
// measured run names it and `compare` says when it is not the Adam step every tier prices.
TEST(ExecuteCli, CompareNamesTheOptimizerTheRunStepped) {
  std::string out;
  const std::string scenario = kDir + "/cli_opt.yaml", plan = kDir + "/cli_opt_plan.yaml";
  pw::write_file_atomic(
      scenario, std::string("name: cli-opt\n"
                            "model: {name: tiny, num_layers: 4, hidden_size: 32, "
                            "num_attention_heads: 2, seq_length: 16, vocab_size: 64, "
                            "attention_backend: unfused}\n"
                            "cluster: {profile: ") +
                    PW_SOURCE_DIR + "/calibration/profiles/cpu-epyc-2core.yaml, nodes: 1}\n" +
                    "parallel: {global_batch_size: 4}\n");
  ASSERT_EQ(
      sh(std::string(kTool) + " plan " + scenario + " --tp 1 --pp 2 --dp 1 --emit " + plan, &out),
      0)
      << out;
  for (const std::string opt : {"sgd", "adam"}) {
    const std::string run = kDir + "/cli_opt_" + opt + ".json";
    out.clear();
    ASSERT_EQ(sh(std::string(PW_MPIRUN) + " --oversubscribe -np 2 " + kTool + " execute " + plan +
                     " --optimizer " + opt + " --measured " + run,
                 &out),
              0)
        << out;
    EXPECT_EQ(pw::load_measured_run(run).optimizer, opt);
    out.clear();
    ASSERT_EQ(sh(std::string(kTool) + " compare --plan " + plan + " --measured " + run, &out), 0)
        << out;
    const std::string said =
        opt == "adam" ? "optimizer = adam" : "optimizer = sgd (the plan prices Adam's step)";
    EXPECT_NE(out.find(said), std::string::npos) << out;
  }
}

// The run's ranks time the machine probe on their cores; compare sets the slowest against the
// probe the plan's profile recorded where it was calibrated (here written by hand: 10 ms).
TEST(ExecuteCli, CompareSetsTheRanksProbesAgainstTheCalibratedCore) {
  std::string out;
  const std::string profile = kDir + "/cli_probe_profile.yaml";
  const std::string shipped =
      pw::read_file(std::string(PW_SOURCE_DIR) + "/calibration/profiles/cpu-epyc-2core.yaml");
  for (const bool recorded : {false, true}) {
    pw::write_file_atomic(profile, recorded ? shipped +
                                                  "calibration_probe: {forward_ms: 10, "
                                                  "core: 0, source: by hand}\n"
                                            : shipped);
    const std::string scenario = kDir + "/cli_probe.yaml", plan = kDir + "/cli_probe_plan.yaml",
                      run = kDir + "/cli_probe_run.json";
    pw::write_file_atomic(scenario,
                          "name: cli-probe\n"
                          "model: {name: tiny, num_layers: 4, hidden_size: 32, "
                          "num_attention_heads: 2, seq_length: 16, vocab_size: 64, "
                          "attention_backend: unfused}\n"
                          "cluster: {profile: " +
                              profile + ", nodes: 1}\n" + "parallel: {global_batch_size: 4}\n");
    ASSERT_EQ(
        sh(std::string(kTool) + " plan " + scenario + " --tp 1 --pp 2 --dp 1 --emit " + plan, &out),
        0)
        << out;
    ASSERT_EQ(sh(std::string(PW_MPIRUN) + " --oversubscribe -np 2 " + kTool + " execute " + plan +
                     " --measured " + run,
                 &out),
              0)
        << out;
    const pw::MeasuredRun m = pw::load_measured_run(run);
    ASSERT_EQ(m.probe_ms.size(), 2u);  // one per rank
    out.clear();
    ASSERT_EQ(sh(std::string(kTool) + " compare --plan " + plan + " --measured " + run, &out), 0)
        << out;
    const std::string ranks = fmt::format(
        "machine = probe (executor layer forward h=256, 128 tokens) {:.2f}, {:.2f} ms on the "
        "run's ranks",
        m.probe_ms[0], m.probe_ms[1]);
    EXPECT_NE(out.find(ranks), std::string::npos) << out;
    const std::string against =
        recorded ? fmt::format(
                       ", 10.00 ms on the core the profile was calibrated on: the slowest "
                       "rank took {:.2f}x that",
                       std::max(m.probe_ms[0], m.probe_ms[1]) / 10)
                 : "; the plan's profile records no calibration probe";
    EXPECT_NE(out.find(ranks + against), std::string::npos) << out;
  }
}

// --warmup W trains W iterations before the timed ones: all W + N are listed (the warm-up ones
// marked), the measured run counts the N timed ones and its iteration time is their median
// (sorted[N / 2]), whatever the warm-up iterations took. --warmup -1 is refused, exit 2.
TEST(ExecuteCli, WarmUpIterationsAreTrainedButNotTimed) {
  std::string out;
  const std::string plan = kDir + "/cli_warmup.yaml", run = kDir + "/cli_warmup_run.json";
  ASSERT_EQ(sh(std::string(PW_RANK_HELPER) + " --schedule 1f1b --save-plan " + plan, &out), 0);
  const std::string launch = std::string(PW_MPIRUN) + " --oversubscribe -np 4 " + kTool +
                             " execute " + plan + " --format json";
  ASSERT_EQ(sh(launch + " --warmup 2 --iterations 3 --measured " + run, &out), 0) << out;
  EXPECT_NE(out.find("\"warmup\": 2"), std::string::npos) << out;
  const std::size_t open = out.find("\"iteration_times_ps\": [");
  ASSERT_NE(open, std::string::npos) << out;
  std::vector<long long> spans;
  for (std::size_t at = out.find('[', open) + 1; out[at] != ']';) {
    std::size_t used = 0;
    spans.push_back(std::stoll(out.substr(at), &used));
    at += used;
    while (out[at] == ',' || out[at] == ' ') ++at;
  }
  ASSERT_EQ(spans.size(), 5u) << out;
  std::vector<long long> timed(spans.begin() + 2, spans.end());
  std::sort(timed.begin(), timed.end());
  const pw::MeasuredRun m = pw::load_measured_run(run);
  EXPECT_EQ(m.iterations, 3);
  EXPECT_EQ(m.iteration_time, timed[1]);
  std::string table;
  ASSERT_EQ(sh(std::string(PW_MPIRUN) + " --oversubscribe -np 4 " + kTool + " execute " + plan +
                   " --warmup 1 --iterations 2",
               &table),
            0)
      << table;
  EXPECT_NE(table.find("(warm-up, not timed)"), std::string::npos) << table;
  EXPECT_NE(table.find("median of the 2 timed iteration(s)"), std::string::npos) << table;
  EXPECT_EQ(sh(launch + " --warmup -1", &out), 2) << out;
  EXPECT_NE(out.find("--warmup"), std::string::npos) << out;
}

// A plan of an MoE model (GQA + SwiGLU + RMSNorm + RoPE, top-2 of 4 experts) with its experts
// split over the two data replicas runs from the file and trains as the unpipelined reference;
// the run says how the experts are split. A plan whose experts have biases is refused in one
// line naming the key, exit 2, on every rank.
TEST(ExecuteCli, RunsAnExpertParallelMoePlan) {
  std::string out;
  const std::string plan = kDir + "/cli_moe.yaml";
  ASSERT_EQ(sh(std::string(PW_RANK_HELPER) +
                   " --schedule zb-h1 --model moe --dp 2 --ep 2 --save-plan " + plan,
               &out),
            0);
  out.clear();
  ASSERT_EQ(sh(std::string(PW_MPIRUN) + " --oversubscribe -np 8 " + kTool + " execute " + plan +
                   " --check-gradients",
               &out),
            0)
      << out;
  EXPECT_NE(out.find("4 experts split over 2 data replicas"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  std::string text = pw::read_file(plan);
  const std::string from = "add_bias_linear: false";
  const auto pos = text.find(from);
  ASSERT_NE(pos, std::string::npos) << text.substr(0, 1500);
  text.replace(pos, from.size(), "add_bias_linear: true");
  pw::write_file_atomic(plan, text);
  out.clear();
  EXPECT_EQ(
      sh(std::string(PW_MPIRUN) + " --oversubscribe -np 8 " + kTool + " execute " + plan, &out), 2)
      << out;
  EXPECT_NE(out.find("model.add_bias_linear"), std::string::npos) << out;
}

// The executor runs plain data/tensor/pipeline parallelism: a plan whose configuration asks for
// ZeRO-3 and sequence parallelism still trains correctly (same gradients), and the run says which
// of the plan's strategies it did not carry out instead of ignoring them silently.
TEST(ExecuteCli, SaysWhichMemoryStrategiesItDoesNotCarryOut) {
  std::string out;
  const std::string plan = kDir + "/cli_zero3.yaml";
  ASSERT_EQ(sh(std::string(PW_RANK_HELPER) + " --schedule 1f1b --save-plan " + plan, &out), 0);
  std::string text = pw::read_file(plan);
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"zero_stage: 0", "zero_stage: 3"},
        {"sequence_parallel: false", "sequence_parallel: true"}}) {
    const auto pos = text.find(from);
    ASSERT_NE(pos, std::string::npos) << from << "\n" << text.substr(0, 1500);
    text.replace(pos, from.size(), to);
  }
  pw::write_file_atomic(plan, text);
  out.clear();
  const int rc = sh(std::string(PW_MPIRUN) + " --oversubscribe -np 4 " + kTool + " execute " +
                        plan + " --check-gradients",
                    &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("not executed by this backend"), std::string::npos) << out;
  EXPECT_NE(out.find("ZeRO-3"), std::string::npos) << out;
  EXPECT_NE(out.find("sequence parallelism"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
}

TEST(ExecuteCli, EditedPlanFailsItsChecksum) {
  std::string out;
  const std::string plan = kDir + "/cli_edit.yaml";
  ASSERT_EQ(sh(std::string(PW_RANK_HELPER) + " --schedule 1f1b --save-plan " + plan, &out), 0);
  std::string text = pw::read_file(plan);
  const auto pos = text.find("[BW, 1, 0]");
  ASSERT_NE(pos, std::string::npos) << text.substr(0, 2000);
  text.replace(pos, 10, "[BW, 1, 1]");
  pw::write_file_atomic(plan, text);
  out.clear();
  const int rc =
      sh(std::string(PW_MPIRUN) + " --oversubscribe -np 4 " + kTool + " execute " + plan, &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("checksum"), std::string::npos) << out;
}

// The executor reads the plan's rank_to_gpu: a map other than the one rank layout (Megatron's
// order, core/rank_layout.h) is refused naming the entry, not run with another placement.
TEST(ExecuteCli, PlanWithAnotherRankMapIsRefusedNamingTheEntry) {
  std::string out;
  const std::string plan = kDir + "/cli_ranks.yaml";
  ASSERT_EQ(sh(std::string(PW_RANK_HELPER) + " --schedule 1f1b --save-plan " + plan, &out), 0);
  std::string text = pw::read_file(plan);
  const auto pos = text.find("rank_to_gpu: []");
  ASSERT_NE(pos, std::string::npos) << text.substr(0, 1500);
  text.replace(pos, 15, "rank_to_gpu: [0, 2, 1, 3]");  // p = 4, t = d = 1: expected 0, 1, 2, 3
  pw::write_file_atomic(plan, text);
  out.clear();
  const int rc =
      sh(std::string(PW_MPIRUN) + " --oversubscribe -np 4 " + kTool + " execute " + plan, &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("rank_to_gpu[1]: is 2; expected 1"), std::string::npos) << out;
}

// A learning rate that is not positive, a negative watchdog, an output in a missing folder: one
// line, exit 2, before anything runs (the first three ran silently, training backwards or with
// NaN; the last failed only after the whole run).
TEST(ExecuteCli, BadLearningRateWatchdogOrOutputFolderIsRefusedBeforeRunning) {
  std::string out;
  const std::string plan = kDir + "/cli_args.yaml";
  ASSERT_EQ(sh(std::string(PW_RANK_HELPER) + " --schedule 1f1b --save-plan " + plan, &out), 0);
  const std::pair<std::string, std::string> cases[] = {
      {"--lr -1", "--lr: expected a positive learning rate, got -1"},
      {"--lr 0", "--lr: expected a positive learning rate"},
      {"--lr nan", "--lr: expected a positive learning rate"},
      {"--watchdog-seconds -3", "--watchdog-seconds: expected seconds >= 0"},
      {"--trace /nonexistent-pw/t.json", "--trace: /nonexistent-pw/t.json: the folder"},
      {"--measured /nonexistent-pw/m.json", "--measured: /nonexistent-pw/m.json: the folder"},
  };
  for (const auto& [args, message] : cases) {
    out.clear();
    EXPECT_EQ(sh(std::string(PW_MPIRUN) + " --oversubscribe -np 4 " + kTool + " execute " + plan +
                     " " + args,
                 &out),
              2)
        << args << "\n"
        << out;
    EXPECT_NE(out.find("pipewright: error: " + message), std::string::npos) << args << "\n" << out;
    EXPECT_EQ(pw::testing::occurrences(out, "pipewright: error:"), 1u) << out;  // rank 0 alone
    EXPECT_EQ(out.find("iteration"), std::string::npos) << out;                 // nothing ran
  }
}

}  // namespace
