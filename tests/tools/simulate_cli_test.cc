// Runs `pipewright simulate` as a user would and checks exit codes and key JSON fields.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_io.h"
#include "core/plan_io.h"
#include "core/pytorch_csv.h"
#include "tests/tools/cli_util.h"

namespace pw {
namespace {

struct CliRun {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("pw_cli_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Runs a shell command line; stdout and stderr are captured apart.
CliRun run_shell(const std::string& command) {
  const std::string err_file = temp_path("stderr.txt");
  const std::string cmd = command + " 2>" + err_file;
  CliRun r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = read_file(err_file);
  std::filesystem::remove(err_file);
  return r;
}

CliRun simulate(const std::string& args) {
  return run_shell(std::string(PW_BINARY_DIR) + "/tools/pipewright simulate " + args);
}

nlohmann::json json_of(const CliRun& r) { return nlohmann::json::parse(r.out); }

// One line on stderr, naming `what`, exit status 2.
void expect_bad_input(const CliRun& r, const std::string& what) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
}

TEST(SimulateCli, OneFOneBFiguresInJson) {
  CliRun r = simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs F=1,B=1,W=1 --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 33.0);  // (m+p-1)(F+B+W)
  EXPECT_DOUBLE_EQ(j["bubble_rate"].get<double>(), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 3.0 / 8.0);
  ASSERT_EQ(j["devices"].size(), 4u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_DOUBLE_EQ(j["devices"][s]["peak_activations"].get<double>(), 4 - s);
    EXPECT_DOUBLE_EQ(j["devices"][s]["busy"].get<double>(), 24.0);
    EXPECT_DOUBLE_EQ(j["devices"][s]["idle"].get<double>(), 9.0);
  }
}

// The activation-memory rule --mw-ratio selects (freed at B, held until W, or a share held from
// B to W) is named in the table and in the JSON.
TEST(SimulateCli, TheMemoryRuleIsNamedInTheOutput) {
  for (const auto& [ratio, words] :
       {std::pair<std::string, std::string>{"0", "an activation is freed at its B"},
        {"1", "an activation is held until its W"},
        {"0.5", "M_W/M_B=0.5: that share of an activation is held from its B until its W"}}) {
    const std::string args = "--schedule zb-h1 --pp 4 --microbatches 8 --mw-ratio " + ratio;
    const CliRun table = simulate(args);
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("memory rule      " +
                             (ratio == "0.5" ? "" : "M_W/M_B=" + ratio + ": ") + words),
              std::string::npos)
        << table.out;
    const CliRun json = simulate(args + " --format json");
    ASSERT_EQ(json.status, 0) << json.err;
    EXPECT_NE(json_of(json)["memory_rule"].get<std::string>().find(words), std::string::npos);
  }
}

TEST(SimulateCli, ZeroBubblePaperOneFOneBRow) {
  // 1.5B, p=8, m=24 with the paper's profiled times: published 1F1B bubble rate 0.2431.
  CliRun r = simulate(
      "--schedule 1f1b --pp 8 --microbatches 24 --costs F=18.522,B=18.086,W=9.337,comm=0.601 "
      "--format json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NEAR(json_of(r)["bubble_rate"].get<double>(), 0.2431, 5e-5);
}

TEST(SimulateCli, InterleavedChunkCountsHalf) {
  CliRun r = simulate("--schedule interleaved --pp 4 --microbatches 8 --chunks 2 --format yaml");
  ASSERT_EQ(r.status, 0) << r.err;
  // Peak 11 chunk activations on device 0, a chunk being half a 1F1B stage.
  EXPECT_NE(r.out.find("peak_activations: 5.5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bubble_fraction: 0.1875"), std::string::npos) << r.out;  // 3/(2*8)
}

TEST(SimulateCli, DiagramDrawsOneRowPerDevice) {
  CliRun r = simulate("--schedule gpipe --pp 2 --microbatches 2 --diagram");
  ASSERT_EQ(r.status, 0) << r.err;
  // GPipe p=2 m=2, F=B=W=1 (a full backward is two slots). d1: F0 [1,2), F1 [2,3), BW0 [3,5),
  // BW1 [5,7); d0's BW0 waits for d1's BW0: [5,7), BW1 [7,9). Makespan 9 slots.
  EXPECT_NE(r.out.find("d0|F0 F1 .. .. .. B0 B0 B1 B1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("d1|.. F0 F1 B0 B0 B1 B1 .. ..\n"), std::string::npos) << r.out;
}

TEST(SimulateCli, CsvExportImportAndPlanEmission) {
  const std::string csv = temp_path("s.csv"), plan = temp_path("plan.yaml");
  CliRun a = simulate("--schedule zb-h1 --pp 4 --microbatches 8 --format json --export-csv " + csv +
                      " --emit " + plan);
  ASSERT_EQ(a.status, 0) << a.err;
  CliRun b = simulate("--import-csv " + csv + " --format json");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(json_of(a)["makespan"], json_of(b)["makespan"]);
  Plan p = load_plan(plan);
  EXPECT_EQ(p.schedule.placement.num_devices, 4);
  EXPECT_EQ(p.predicted.size(), p.schedule.total_actions());
  EXPECT_EQ(p.predicted_iteration, 27'000'000'000);  // (m)(F+B+W) + (p-1)(F+B-W) = 27 units
  std::filesystem::remove(csv);
  std::filesystem::remove(plan);
}

TEST(SimulateCli, BadInputIsOneLineAndExitTwo) {
  expect_bad_input(simulate("--schedule 1f2b --pp 4 --microbatches 8"), "did you mean '1f1b'");
  expect_bad_input(simulate("--schedule 1f1b --pp 0 --microbatches 8"), "--pp");
  expect_bad_input(simulate("--schedule 1f1b --pp -3 --microbatches 8"), "--pp");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 0"), "--microbatches");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs F=x"), "--costs");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs F1"), "--costs");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs Q=1"), "--costs");
  expect_bad_input(simulate("--schedule interleaved --pp 4 --microbatches 6"), "m mod g");
}

TEST(SimulateCli, BadCsvNamesFileLineAndCell) {
  const std::string csv = temp_path("bad.csv");
  write_file_atomic(csv, "0F0,0B0\n1F0,1Q0,1B0\n");
  expect_bad_input(simulate("--import-csv " + csv), csv + ": line 2, cell 2: unknown action");
  write_file_atomic(csv, "0F0,,,0B0\n,1B0,1F0\n");  // rank 1 runs B before F
  expect_bad_input(simulate("--import-csv " + csv), "line 2, cell 2");
  std::filesystem::remove(csv);
}

}  // namespace
}  // namespace pw

namespace pw {
namespace {

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

TEST(SimulateCli, ReportDrawsOneBlockPerPassWithTheCompareRenderer) {
  const std::string html = temp_path("report.html");
  CliRun r = simulate("--schedule 1f1b --pp 4 --microbatches 8 --report " + html);
  ASSERT_EQ(r.status, 0) << r.err;
  // 1F1B: p x m x (F + full backward) = 4 * 8 * 2 = 64 blocks.
  EXPECT_EQ(count_of(read_file(html), "class=\"blk "), 64u);
  std::filesystem::remove(html);
}

// `simulate` and `compare` read --costs with one reader: the same keys (F or f, ...), the same
// one-line errors; compare's values are durations (1500us = 1.5 ms = 1.5), simulate's plain
// numbers, and only compare takes mw.
TEST(SimulateCli, SimulateAndCompareShareOneCostsReader) {
  const std::string sim = "--schedule 1f1b --pp 4 --microbatches 8 --format json --costs ";
  const CliRun upper = simulate(sim + "F=2,B=1,W=1"), lower = simulate(sim + "'f=2, b=1'");
  ASSERT_EQ(upper.status, 0) << upper.err;
  EXPECT_EQ(upper.out, lower.out);
  const std::string compare = std::string(PW_BINARY_DIR) +
                              "/tools/pipewright compare --pp 4 --microbatches 8 "
                              "--schedules 1f1b --format json --costs ";
  const CliRun us = run_shell(compare + "F=1500us,B=1.5ms,W=0.001s,mw=0.5");
  const CliRun ms = run_shell(compare + "F=1.5,B=1.5,W=1,mw=0.5");
  ASSERT_EQ(us.status, 0) << us.err;
  EXPECT_EQ(us.out, ms.out);
  expect_bad_input(simulate(sim + "Q=1"), "--costs: unknown key 'Q' (did you mean 'F'?)");
  expect_bad_input(run_shell(compare + "Q=1"), "--costs: unknown key 'Q' (did you mean 'F'?)");
  expect_bad_input(simulate(sim + "mw=0.5"), "--costs: unknown key 'mw'");
  expect_bad_input(simulate(sim + "F=1ms"), "--costs: expected a non-negative number for F");
}

TEST(SimulateCli, ReportWithAFixedCostPlanIsRefusedNotIgnored) {
  // A rebuilt plan's iteration is drawn
  // (Hardening.SimulateScenarioReportDrawsTheSimulatedIteration); a plan of fixed costs has no
  // simulated iteration to draw, and says so rather than ignoring the flag.
  const std::string plan = temp_path("fixed-plan.yaml");
  ASSERT_EQ(simulate("--schedule 1f1b --pp 4 --microbatches 8 --emit " + plan).status, 0);
  CliRun r = simulate("--plan " + plan + " --report " + temp_path("never.html"));
  expect_bad_input(r, "--report: applies only to a plan rebuilt");
  EXPECT_FALSE(std::filesystem::exists(temp_path("never.html")));
  std::filesystem::remove(plan);
}

}  // namespace
}  // namespace pw

// --- simulate --plan: re-simulating emitted plans ------------------------------------------------

namespace pw {
namespace {

CliRun pipewright(const std::string& args) {
  return run_shell(std::string(PW_BINARY_DIR) + "/tools/pipewright " + args);
}

TEST(SimulatePlan, FixedCostPlanResimulatesToItsPredictionExactly) {
  const std::string plan = temp_path("fixed_plan.yaml"), trace = temp_path("fixed_trace.json");
  ASSERT_EQ(
      simulate("--schedule 1f1b --pp 4 --microbatches 8 --costs F=1,B=1,W=1 --emit " + plan).status,
      0);
  // 1F1B, p = 4, m = 8, F = 1 and a full backward BW = B + W = 2: the last device starts its
  // first F after (p-1)F = 3, then runs m (F + BW) = 24 back to back (ends at 27); the last
  // microbatch's backward then crosses the p-1 = 3 earlier stages, 2 each: 27 + 6 = 33
  // = (m + p - 1)(F + B + W). Same costs, same schedule: the re-simulation must say 33 too.
  CliRun r = simulate("--plan " + plan + " --format json --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r);
  EXPECT_EQ(j["resimulation"], "fixed-costs");
  EXPECT_DOUBLE_EQ(j["predicted_iteration_ms"].get<double>(), 33.0);
  EXPECT_DOUBLE_EQ(j["resimulated_iteration_ms"].get<double>(), 33.0);
  EXPECT_DOUBLE_EQ(j["difference_pct"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["bubble_rate"].get<double>(), 3.0 / 11.0);  // (p-1)/(m+p-1)
  ASSERT_EQ(j["devices"].size(), 4u);
  for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(j["devices"][d]["busy_ms"].get<double>(), 24.0);
  EXPECT_NE(read_file(trace).find("\"traceEvents\""), std::string::npos);
  CliRun t = simulate("--plan " + plan);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("plan predicted 33.000 ms, re-simulated 33.000 ms, difference +0.00%"),
            std::string::npos)
      << t.out;
  std::filesystem::remove(plan);
  std::filesystem::remove(trace);
}

// `--trace NAME.json.gz` writes the same trace gzip-compressed (Perfetto opens it as it is),
// byte-identical run to run: scenario mode, where traces get large.
TEST(SimulateCli, TraceNamedGzIsTheSameTraceCompressed) {
  const std::string scen =
      std::string(PW_SOURCE_DIR) + "/scenarios/megatron/weak-scaling-1.7b.yaml";
  const std::string plain = temp_path("gz_trace.json"), packed = temp_path("gz_trace.json.gz");
  ASSERT_EQ(simulate(scen + " --trace " + plain).status, 0);
  CliRun r = simulate(scen + " --trace " + packed);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string gz = read_file(packed);
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_EQ(gz, gzip(read_file(plain)));  // the same JSON, compressed deterministically
  EXPECT_LT(gz.size() * 5, read_file(plain).size());
  std::filesystem::remove(plain);
  std::filesystem::remove(packed);
}

TEST(SimulatePlan, HopLatencyIsRecoveredFromThePredictedTimes) {
  // With a per-hop communication cost the plan stores no hop latency, only predicted times;
  // the re-simulation infers it from the smallest gap per stage boundary. Same costs, so the
  // same makespan is expected for every schedule, whatever it is.
  for (const char* sched : {"1f1b", "zb-h1", "interleaved --chunks 2", "zb-v"}) {
    const std::string plan = temp_path("comm_plan.json");
    CliRun e = simulate(std::string("--schedule ") + sched +
                        " --pp 4 --microbatches 8 --costs F=1,B=1.2,W=0.7,comm=0.3 --format json "
                        "--emit " +
                        plan);
    ASSERT_EQ(e.status, 0) << sched << e.err;
    CliRun r = simulate("--plan " + plan + " --format json");
    ASSERT_EQ(r.status, 0) << sched << r.err;
    EXPECT_DOUBLE_EQ(json_of(r)["resimulated_iteration_ms"].get<double>(),
                     json_of(e)["makespan"].get<double>())
        << sched;
    EXPECT_DOUBLE_EQ(json_of(r)["difference_pct"].get<double>(), 0.0) << sched;
    std::filesystem::remove(plan);
  }
}

TEST(SimulatePlan, PlannerPlanResimulatesToItsOwnPredictionExactly) {
  // Small scenarios (Megatron 1.7B on 32 A100s, 3.6B on 64): `plan --emit` predicts with the
  // discrete-event simulation that ranks the configurations, run on the plan's own lowered
  // schedule with the scenario's hardware profile; `simulate --plan` rebuilds the costs from the
  // same profile and simulates the same schedule with the same input (sim/plan_prediction.h), so
  // the iteration and every action's interval re-simulate exactly (the stated tolerance, 0.5%,
  // is the lead's bound; the expectation is 0). Emitting twice gives byte-identical plans.
  for (const char* scenario : {"weak-scaling-1.7b", "weak-scaling-3.6b"}) {
    const std::string plan = temp_path("planner_plan.yaml"),
                      again = temp_path("planner_again.yaml");
    const std::string cmd = "plan " + std::string(PW_SOURCE_DIR) + "/scenarios/megatron/" +
                            scenario + ".yaml --top 1 --threads 1 --emit ";
    CliRun e = pipewright(cmd + plan);
    ASSERT_EQ(e.status, 0) << scenario << e.err;
    const Plan p = load_plan(plan);  // validates the schedule, checksum and timings
    EXPECT_EQ(p.provenance.prediction_source, "des");
    CliRun r = simulate("--plan " + plan + " --format json");
    ASSERT_EQ(r.status, 0) << r.err;
    auto j = json_of(r);
    EXPECT_EQ(j["resimulation"], "rebuilt");
    EXPECT_GT(j["tflops_per_gpu"].get<double>(), 0.0);
    EXPECT_LT(std::abs(j["difference_pct"].get<double>()), 0.5) << r.out;
    EXPECT_DOUBLE_EQ(j["difference_pct"].get<double>(), 0.0) << r.out;
    EXPECT_DOUBLE_EQ(j["resimulated_iteration_ms"].get<double>(), j["iteration_ms"].get<double>());
    EXPECT_EQ(j["predicted_actions"]["compared"], p.schedule.total_actions());
    EXPECT_EQ(j["predicted_actions"]["identical"], p.schedule.total_actions());
    EXPECT_DOUBLE_EQ(j["predicted_actions"]["worst_difference_ms"].get<double>(), 0.0);
    CliRun t = simulate("--plan " + plan);
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_NE(t.out.find("difference +0.00%"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("memory per GPU"), std::string::npos) << t.out;
    ASSERT_EQ(pipewright(cmd + again).status, 0);
    EXPECT_EQ(read_file(again), read_file(plan)) << scenario;
    std::filesystem::remove(plan);
    std::filesystem::remove(again);
  }
}

TEST(SimulatePlan, RebuiltPlanEqualsTheScenarioOfTheSameConfiguration) {
  // A fixed-cost plan given a model and (by hand) a cluster profile is rebuilt: its own lowered
  // 1F1B schedule on the hardware model must give exactly what the scenario mode gives for the
  // same configuration (Megatron 1.7B, t1 p4 d1, b1, B8 on 4 GPUs of a DGX A100), since the
  // simulator treats lowered SEND/RECV like the transfers it adds itself
  // (tests/sim/lowered_plan_test.cc). The checksum covers the schedule, not the cluster name.
  const std::string plan = temp_path("rebuild_plan.yaml"), scen = temp_path("rebuild_scen.yaml");
  ASSERT_EQ(simulate("--schedule 1f1b --pp 4 --microbatches 8 --model megatron-1.7b --emit " + plan)
                .status,
            0);
  std::string text = read_file(plan);
  const auto pos = text.find("cluster: \"\"");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 11, "cluster: dgx-a100-80gb");
  write_file_atomic(plan, text);
  write_file_atomic(scen,
                    "model: {preset: megatron-1.7b}\n"
                    "cluster: {profile: dgx-a100-80gb, nodes: 1, gpus_per_node: 4}\n"
                    "parallel: {pipeline_model_parallel_size: 4, micro_batch_size: 1, "
                    "global_batch_size: 8, schedule: 1f1b}\n");
  CliRun a = simulate("--plan " + plan + " --format json");
  CliRun b = simulate(scen + " --format json");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(json_of(a)["resimulation"], "rebuilt");
  EXPECT_EQ(json_of(a)["gpus"], 4);
  EXPECT_DOUBLE_EQ(json_of(a)["iteration_ms"].get<double>(),
                   json_of(b)["iteration_ms"].get<double>());
  EXPECT_EQ(json_of(a)["memory"], json_of(b)["memory"]);
  std::filesystem::remove(plan);
  std::filesystem::remove(scen);
}

TEST(SimulatePlan, CorruptedOrMissingPlanIsExitTwoNamingFileAndField) {
  const std::string plan = temp_path("corrupt_plan.yaml");
  ASSERT_EQ(simulate("--schedule 1f1b --pp 4 --microbatches 8 --emit " + plan).status, 0);
  std::string text = read_file(plan);
  const auto pos = text.find("[BW, 1, 0]");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 10, "[BW, 1, 1]");
  write_file_atomic(plan, text);
  expect_bad_input(simulate("--plan " + plan), plan + ": schedule_checksum");
  // Timings are not covered by the checksum: a fixed-cost re-simulation checks them itself.
  ASSERT_EQ(simulate("--schedule 1f1b --pp 4 --microbatches 8 --emit " + plan).status, 0);
  text = read_file(plan);
  // Device 1's second action is F0 of stage 1 (after RECV_F, which ends at 1 unit = 1e9 ps).
  const auto f = text.find("[1, 1, 1000000000, 2000000000]");
  ASSERT_NE(f, std::string::npos);
  write_file_atomic(plan, std::string(text).replace(f, 30, "[1, 1, 500000000, 1500000000]"));
  expect_bad_input(simulate("--plan " + plan),
                   plan +
                       ": predicted: device 1 action 1 (F stage 1 mb 0) starts at 500000000 ps, "
                       "before its prerequisite device 1 action 0 (RECV_F stage 1 mb 0)");
  const auto list = text.find("predicted: [[");
  ASSERT_NE(list, std::string::npos);
  write_file_atomic(plan,
                    text.substr(0, list) + "predicted: []" + text.substr(text.find('\n', list)));
  expect_bad_input(simulate("--plan " + plan), plan + ": predicted: is empty");
  // Hardware-model flags are refused, not ignored, when there is no hardware model.
  write_file_atomic(plan, text);
  expect_bad_input(simulate("--plan " + plan + " --overlap-grad-reduce"),
                   plan + ": --overlap-grad-reduce: applies only to a plan rebuilt");
  const std::string missing = temp_path("no_such_plan.yaml");
  expect_bad_input(simulate("--plan " + missing), missing + ": --plan");
  expect_bad_input(simulate("--plan " + plan + " " + std::string(PW_SOURCE_DIR) +
                            "/scenarios/megatron/weak-scaling-1.7b.yaml"),
                   "--plan");
  std::filesystem::remove(plan);
}

// --- simulate --emit with a model shape: a plan `pipewright execute` runs ------------------------

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

CliRun execute_under_mpirun(const std::string& plan, int ranks) {
  return run_shell(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
      "--oversubscribe -np " +
      std::to_string(ranks) + " " + std::string(PW_BINARY_DIR) + "/tools/pipewright execute " +
      plan + " --backend cpu --check-gradients");
}

TEST(SimulateEmit, PlanWithAModelShapeRunsUnderExecute) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not on PATH";
  const std::string plan = temp_path("shaped_plan.yaml");
  ASSERT_EQ(simulate("--schedule zb-h1 --pp 4 --microbatches 8 --model-shape "
                     "hidden=64,heads=4,seq=32,vocab=128,layers=8,microbatch=2 --emit " +
                     plan)
                .status,
            0);
  const Plan p = load_plan(plan);
  EXPECT_EQ(p.model.hidden_size, 64);
  EXPECT_EQ(p.model.ffn_hidden_size, 256);  // 4 * hidden by default
  EXPECT_EQ(p.model.num_layers, 8);
  EXPECT_EQ(p.schedule.placement.stages[3].layer_begin, 6);  // 8 layers over 4 stages: 2 each
  EXPECT_EQ(p.config.micro_batch_size, 2);
  EXPECT_EQ(p.config.global_batch_size, 16);  // m * microbatch
  // The CPU backend runs one rank per pipeline device (t = d = 1).
  CliRun r = execute_under_mpirun(plan, 4);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  std::filesystem::remove(plan);
}

TEST(SimulateEmit, PlanWithoutAModelShapeIsRejectedByExecute) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not on PATH";
  const std::string plan = temp_path("shapeless_plan.yaml");
  ASSERT_EQ(simulate("--schedule 1f1b --pp 2 --microbatches 4 --emit " + plan).status, 0);
  CliRun r = execute_under_mpirun(plan, 2);
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("model.hidden_size"), std::string::npos) << r.out << r.err;
  std::filesystem::remove(plan);
}

// Started by mpirun, every command but `execute` would run once per process and write its
// files over each other's: each process refuses in one line before anything runs (Open MPI
// sets OMPI_COMM_WORLD_SIZE, PMI launchers PMI_SIZE); a job of one process runs as usual.
TEST(SimulateCli, RefusesToRunAsOneOfSeveralMpiProcesses) {
  const std::string& tool = testing::kTool;
  const std::string args = " --schedule 1f1b --pp 2 --microbatches 4";
  expect_bad_input(run_shell("OMPI_COMM_WORLD_SIZE=2 " + tool + " simulate" + args),
                   "simulate was started as one of 2 MPI processes (OMPI_COMM_WORLD_SIZE=2)");
  expect_bad_input(run_shell("PMI_SIZE=4 " + tool + " plan --top 1"),
                   "plan was started as one of 4 MPI processes (PMI_SIZE=4)");
  EXPECT_EQ(run_shell("OMPI_COMM_WORLD_SIZE=1 " + tool + " simulate" + args).status, 0);
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not on PATH";
  const std::string out = temp_path("mpi_refused.yaml");
  CliRun r = run_shell(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 " +
      tool + " simulate" + args + " --emit " + out);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(testing::occurrences(r.out + r.err, "simulate was started as one of 2 MPI processes"),
            2u)
      << r.out << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));  // nothing written
}

TEST(SimulateEmit, ModelPresetAndBadShapes) {
  const std::string plan = temp_path("preset_plan.yaml");
  ASSERT_EQ(simulate("--schedule 1f1b --pp 4 --microbatches 8 --model megatron-1.7b --emit " + plan)
                .status,
            0);
  const Plan p = load_plan(plan);
  EXPECT_EQ(p.model.name, "megatron-1.7b");
  EXPECT_EQ(p.model.hidden_size, 2304);  // the preset's shape (Narayanan et al.)
  EXPECT_EQ(p.schedule.placement.num_layers, 24);
  std::filesystem::remove(plan);
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --model megatron-1.8b"),
                   "did you mean 'megatron-1.7b'");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --model-shape "
                            "hidden=64,heads=4,seq=32,vocab=128,layer=8"),
                   "did you mean 'layers'");
  expect_bad_input(
      simulate("--schedule 1f1b --pp 4 --microbatches 8 --model-shape hidden=64,heads=4"),
      "missing seq");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --model-shape "
                            "hidden=64,heads=5,seq=32,vocab=128,layers=8"),
                   "heads 5 does not divide hidden 64");
  expect_bad_input(simulate("--schedule 1f1b --pp 4 --microbatches 8 --model-shape "
                            "hidden=64,heads=4,seq=32,vocab=128,layers=2"),
                   "2 layers cannot fill the schedule's 4 stages");
}

}  // namespace
}  // namespace pw

// --- uneven pipeline splits (Megatron's decoder_first/last_pipeline_num_layers) ------------------

namespace pw {
namespace {

TEST(SimulateScenario, UnevenSplitIsSimulatedStageByStage) {
  CliRun r =
      simulate(std::string(PW_SOURCE_DIR) + "/scenarios/zero-bubble/zb-1.5b.yaml --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = json_of(r);
  EXPECT_EQ(j["layers_per_stage"], nlohmann::json::parse("[2, 3, 3, 3, 3, 3, 3, 2]"));
  // Weights are bf16 (2 bytes per parameter); a transformer layer has 12h^2 + 13h parameters,
  // h = 2304: 63,730,944. A middle stage holds 3 layers: 3 * 63,730,944 * 2 = 382,385,664 bytes.
  // The first holds 2 layers and the embedding (V h + s h = 51200*2304 + 1024*2304 = 120,324,096):
  // (2 * 63,730,944 + 120,324,096) * 2 = 495,571,968 bytes. Even 22/8 splits would give neither.
  ASSERT_EQ(j["memory"].size(), 8u);
  EXPECT_NEAR(j["memory"][0]["weights_gb"].get<double>(), 0.495571968, 1e-9);
  for (int s = 1; s < 7; ++s)
    EXPECT_NEAR(j["memory"][s]["weights_gb"].get<double>(), 0.382385664, 1e-9) << s;
  for (const char* f : {"zb-6.2b", "zb-14.6b", "zb-28.3b"}) {
    CliRun o = simulate(std::string(PW_SOURCE_DIR) + "/scenarios/zero-bubble/" + f +
                        ".yaml --format json");
    ASSERT_EQ(o.status, 0) << f << o.err;
    EXPECT_TRUE(json_of(o)["fits"].get<bool>()) << f;
  }
}

TEST(SimulateScenario, UnevenSplitNeedsOneStagePerDevice) {
  const std::string file = temp_path("uneven_v.yaml");
  std::string text = read_file(std::string(PW_SOURCE_DIR) + "/scenarios/zero-bubble/zb-1.5b.yaml");
  const auto pos = text.find("schedule: zb-h1");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 15, "schedule: zb-v");
  write_file_atomic(file, text);
  expect_bad_input(simulate(file), file + ": parallel.schedule: 'zb-v' places 16 stages on 8");
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace pw
