// Runs `pipewright plan` as a user would: the report draws the plan it emits; shortest-time;
// plan, simulate and estimate agree. The search constraints: plan_constraints_test.cc.
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
using pw::testing::pipewright;
using pw::testing::TempDir;

TEST(PlanCli, ReportDrawsEveryComputePassOfTheEmittedPlanAndThePareto) {
  const TempDir tmp("pw_plan_cli_");
  const std::filesystem::path& dir = tmp.path;
  const std::string html = (dir / "plan.html").string(), plan = (dir / "plan.yaml").string();
  const std::string table = (dir / "table.txt").string();
  const std::string cmd = std::string(PW_BINARY_DIR) + "/tools/pipewright plan " + PW_SOURCE_DIR +
                          "/scenarios/megatron/weak-scaling-1.7b.yaml --top 3 " + "--emit " + plan +
                          " --report " + html + " > " + table;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const Plan p = load_plan(plan);
  std::size_t compute = 0;
  for (const auto& dev : p.schedule.actions)
    for (const Action& a : dev) compute += is_compute(a.kind) ? 1 : 0;
  const std::string page = read_file(html);
  // One timeline block per compute pass of the best plan (the emitted plan's SEND/RECV are the
  // lowering's, not passes).
  EXPECT_EQ(occurrences(page, "class=\"blk "), compute);
  EXPECT_NE(page.find("Pareto front"), std::string::npos);
  // The ranking, with the CLI table's columns and rows: every ranked configuration and its
  // iteration time as the table prints them.
  EXPECT_NE(page.find("<h2>Ranking</h2>"), std::string::npos);
  for (const char* col : {"<th>iter (s)</th>", "<th>tokens/s</th>", "<th>MFU</th>",
                          "<th>bubble</th>", "<th>mem GB</th>", "<th>why</th>"})
    EXPECT_NE(page.find(col), std::string::npos) << col;
  const std::string text = read_file(table);
  int rows = 0;
  for (std::size_t at = text.find("\n  1  "); at != std::string::npos;) {
    std::istringstream line(text.substr(at + 1, text.find('\n', at + 1) - at - 1));
    std::string rank, config, iter;
    line >> rank >> config;
    std::string word;
    // The configuration runs up to the iteration time (the first number with a '.').
    while (line >> word && word.find('.') == std::string::npos) config += " " + word;
    iter = word;
    EXPECT_NE(page.find("<td>" + config + "</td><td>" + iter + "</td>"), std::string::npos)
        << config << " " << iter;
    ++rows;
    at = text.find("\n  " + std::to_string(rows + 1) + "  ", at + 1);
  }
  EXPECT_EQ(rows, 3);
  // The best plan's timeline is the DES's run of the emitted plan (the engine that ranked it):
  // its iteration chip reads the table's #1 time (3 decimals below 10 s, trailing zeros
  // dropped), its memory is in GB over time against the usable memory.
  std::string first = text.substr(text.find("\n  1  ") + 1);
  first = first.substr(0, first.find('\n'));
  std::istringstream f(first);
  std::string word, iter1;
  while (f >> word)
    if (word.find('.') != std::string::npos) {
      iter1 = word;
      break;
    }
  while (iter1.find('.') != std::string::npos && (iter1.back() == '0' || iter1.back() == '.'))
    iter1.pop_back();
  EXPECT_NE(page.find("<b>iteration</b>" + iter1 + " s</span>"), std::string::npos) << iter1;
  EXPECT_NE(page.find("Memory (model state, activations, buffers) per device over time (GB"),
            std::string::npos);
  EXPECT_EQ(page.find("(bytes)"), std::string::npos);  // no raw byte counts
}

// `plan --shortest-time` on the Megatron 1.7B scenario to 2.5 nats. Hand values (see
// tests/planner/shortest_time_test.cc): B_crit = 2.1e8 / 2.5^(1/0.21) = 2.6746e6 tokens,
// S_min = 2100 / (2.5 - 2.2719)^(1/0.76) = 14,679 steps, batches 2^7..2^13 sequences.
TEST(PlanCli, ShortestTimeReportsCriticalBatchAndTheFastestPoint) {
  const auto out =
      std::filesystem::temp_directory_path() / ("pw_plan_st_" + std::to_string(::getpid()));
  const std::string cmd = pipewright() + " plan " + PW_SOURCE_DIR +
                          "/scenarios/megatron/weak-scaling-1.7b.yaml --shortest-time "
                          "--target-loss 2.5 --max-gpus 64 --format json > " +
                          out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const nlohmann::json j = nlohmann::json::parse(read_file(out.string()));
  std::filesystem::remove(out);
  EXPECT_NEAR(j["critical_batch_tokens"].get<double>() / 2.6746e6, 1.0, 1e-3);
  EXPECT_NEAR(j["s_min"].get<double>() / 14679, 1.0, 1e-3);
  ASSERT_TRUE(j["feasible"].get<bool>());
  double fastest = 1e300;
  int lo = 1 << 30, hi = 0;
  for (const auto& p : j["points"]) {
    const int b = p["global_batch"].get<int>();
    lo = std::min(lo, b);
    hi = std::max(hi, b);
    EXPECT_LE(p["gpus"].get<int>(), 64);
    // steps = S_min (1 + B_crit / (B x 2048))
    EXPECT_NEAR(p["steps"].get<double>() / (14679 * (1 + 2.6746e6 / (b * 2048.0))), 1.0, 2e-3);
    if (p["feasible"].get<bool>()) fastest = std::min(fastest, p["days"].get<double>());
  }
  EXPECT_EQ(lo, 128);
  EXPECT_EQ(hi, 8192);
  EXPECT_EQ(j["max_gpus"].get<int>(), 64);
  EXPECT_DOUBLE_EQ(j["best"]["days"].get<double>(), fastest);
  EXPECT_NE(j["best"]["bounded_by"].get<std::string>().find("critical batch"), std::string::npos);
}

TEST(PlanCli, ShortestTimeRejectsAZeroGpuCeiling) {
  const std::string cmd = pipewright() + " plan --shortest-time --max-gpus 0 > /dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

// One definition of each figure: the same configuration read by `plan` (its DES-ranked row),
// `simulate` and `estimate` gives one iteration time, MFU and peak memory per GPU (to 0.1%), and
// the same fit. 1F1B does not depend on pass-cost ratios, so every command generates the same
// schedule.
TEST(PlanCli, PlanSimulateAndEstimateAgreeOnTimeMemoryAndMfu) {
  const TempDir tmp("pw_plan_agree_");
  const std::filesystem::path& dir = tmp.path;
  const std::string scen = (dir / "s.yaml").string();
  write_file_atomic(scen,
                    "model: {preset: megatron-1.7b}\n"
                    "cluster: {profile: dgx-a100-80gb, nodes: 2}\n"
                    "parallel: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 4,\n"
                    "           micro_batch_size: 1, global_batch_size: 32, zero_stage: 1,\n"
                    "           recompute_granularity: selective, sequence_parallel: true}\n");
  auto run_json = [&](const std::string& args) { return json_of(dir, args); };
  const nlohmann::json plan =
      run_json("plan " + scen +
               " --tp 2 --pp 4 --dp 2 --microbatch-size 1 --schedules 1f1b --recompute selective "
               "--zero 1 --sequence-parallel on --offload off --top 10");
  const nlohmann::json* row = nullptr;
  for (const nlohmann::json& r : plan["top"])
    if (r["config"]["end_layers_trimmed"] == 0) row = &r;
  ASSERT_NE(row, nullptr) << plan.dump();
  EXPECT_EQ((*row)["tier"], "DES");
  const nlohmann::json sim = run_json("simulate " + scen);
  const nlohmann::json est = run_json("estimate " + scen);
  double sim_peak = 0;
  for (const nlohmann::json& m : sim["memory"])
    sim_peak = std::max(sim_peak, m["peak_gb"].get<double>());
  const double est_peak = std::max(est["memory"]["first_stage"]["peak_bytes"].get<double>(),
                                   est["memory"]["last_stage"]["peak_bytes"].get<double>()) /
                          1e9;
  const double plan_peak = (*row)["memory_gb"].get<double>();
  EXPECT_NEAR(plan_peak / sim_peak, 1.0, 1e-3);
  EXPECT_NEAR(est_peak / sim_peak, 1.0, 1e-3);
  EXPECT_NEAR((*row)["iteration_s"].get<double>() * 1e3 / sim["iteration_ms"].get<double>(), 1.0,
              1e-3);
  EXPECT_NEAR((*row)["mfu"].get<double>() / sim["mfu"].get<double>(), 1.0, 1e-3);
  EXPECT_NEAR((*row)["hfu"].get<double>() / sim["hfu"].get<double>(), 1.0, 1e-3);
  EXPECT_EQ((*row)["fits"].get<bool>(), sim["fits"].get<bool>());
  EXPECT_EQ(est["memory"]["first_stage"]["fits"].get<bool>(), sim["fits"].get<bool>());
}

// A scenario naming a schedule whose generator reads the pass costs (memory-reading or not) is
// simulated with the schedule `plan` scores for it: the same generator inputs (the cost ratios
// on the planner's grid; for memory readers the share of an activation W holds and the GPU's
// activation budget) and the same layer split, so `simulate` and `plan`'s published row give
// one time and one fit. Before, `simulate` told ZB-1p that W held nothing: it deferred every W
// and held 108 GB of activations per GPU where `plan` ran it in 60 GB; V-shapes whose 2p chunks
// do not divide the layers (78 over 12) ran another split than `plan`'s; and V-Min and V-Half
// got the exact middle-stage times where `plan` gives them its grid's ratios, another order.
TEST(PlanCli, SimulateRunsTheScheduleThePlannerScoresForACostReader) {
  const TempDir tmp("pw_plan_zbsim_");
  const std::filesystem::path& dir = tmp.path;
  const std::string scen = (dir / "s.yaml").string();
  auto run_json = [&](const std::string& args) { return json_of(dir, args); };
  for (const char* schedule : {"zb-1p", "zb-2p", "v-zb", "zb-v", "v-adaptive", "v-min", "v-half"}) {
    write_file_atomic(scen, std::string("model: {preset: cm-98.5b, seq_length: 1024, "
                                        "use_flash_attn: true}\n"
                                        "cluster: {profile: dgx-a100-80gb, nodes: 6}\n"
                                        "parallel: {tensor_model_parallel_size: 4,\n"
                                        "  pipeline_model_parallel_size: 6, micro_batch_size: 1,\n"
                                        "  global_batch_size: 160, sequence_parallel: true,\n"
                                        "  zero_stage: 1, schedule: ") +
                                schedule + "}\n");
    const nlohmann::json sim = run_json("simulate " + scen);
    const nlohmann::json plan = run_json("plan " + scen + " --top 1");
    ASSERT_TRUE(plan.contains("published")) << schedule;
    const nlohmann::json& pub = plan["published"];
    EXPECT_EQ(pub["tier"], "DES") << schedule;
    EXPECT_NEAR(pub["iteration_s"].get<double>() * 1e3 / sim["iteration_ms"].get<double>(), 1.0,
                1e-6)
        << schedule;
    EXPECT_TRUE(sim["fits"].get<bool>()) << schedule;
    EXPECT_EQ(pub["fits"].get<bool>(), sim["fits"].get<bool>()) << schedule;
  }
}

}  // namespace
}  // namespace pw