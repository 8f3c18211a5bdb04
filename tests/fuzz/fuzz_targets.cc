#include "tests/fuzz/fuzz_targets.h"

#include <fmt/format.h>

#include <exception>

#include "calibration/kineto_trace.h"
#include "calibration/nccl_tests.h"
#include "calibration/raw_results.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/lowering.h"
#include "core/plan_io.h"
#include "core/pytorch_csv.h"
#include "core/schedule_io.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/profile.h"
#include "hwmodels/scenario.h"
#include "planner/schedules/generator.h"
#include "report/build.h"
#include "sim/evaluator.h"
#include "tools/pass_costs.h"

namespace pw::fuzz {
namespace {

std::string source(const std::string& rel) {
  return read_file(std::string(PW_SOURCE_DIR) + "/" + rel);
}

// A plan (1F1B p=2 m=4, predicted times) and a measured run of it: a mutated plan is lined up
// against the unmutated run and the other way round, so compare must refuse what does not
// match, not index past it.
struct PlanAndRun {
  Plan plan;
  MeasuredRun run;
};

PlanAndRun plan_and_run() {
  GeneratorParams gp;
  gp.p = 2;
  gp.m = 4;
  PlanAndRun f;
  f.plan.model = {"tiny", 4, 64, 4, 0, 128, 512};
  f.plan.cluster = "dgx-a100-80gb";
  f.plan.config.pipeline_parallel = 2;
  f.plan.config.global_batch_size = 4;
  f.plan.schedule = complete_for_execution(generate_schedule(default_registry(), "1f1b", gp), 1);
  const TimePs ms = millis_to_ps(1);
  const EvalResult r = evaluate(
      f.plan.schedule, make_uniform_cost_table(f.plan.schedule.placement, {ms, ms, ms, 0, 0}));
  std::size_t id = 0;
  for (int d = 0; d < 2; ++d)
    for (int k = 0; k < static_cast<int>(f.plan.schedule.actions[d].size()); ++k, ++id) {
      f.plan.predicted.push_back({d, k, r.start[id], r.end[id]});
      f.run.actions.push_back({d, k, f.plan.schedule.actions[d][k], r.start[id], r.end[id]});
    }
  f.plan.predicted_iteration = r.makespan;
  f.run.backend = "cpu";
  f.run.device = "test";
  f.run.iteration_time = r.makespan;
  return f;
}

// A Kineto trace of one GEMM, one NCCL all-reduce and one fused attention call, with the
// fields `calibrate --from-trace` reads.
std::string kineto_seed() {
  return "{\"traceEvents\": [\n"
         "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"ts\": 1.0, \"dur\": 5.0, "
         "\"args\": {\"External id\": 1, \"Input Dims\": [[64, 32], [32, 16]], \"Input type\": "
         "[\"c10::BFloat16\", \"c10::BFloat16\"]}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"ts\": 7.0, \"dur\": 9.5, "
         "\"args\": {\"External id\": 1}},\n"
         "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"ts\": 20.0, "
         "\"dur\": 5.0, \"args\": {\"External id\": 2, \"Collective name\": \"allreduce\", \"In "
         "msg nelems\": 1024, \"Out msg nelems\": 1024, \"dtype\": \"BFloat16\", \"Group size\": "
         "8}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce\", \"ts\": "
         "26.0, \"dur\": 30.0, \"args\": {\"External id\": 2}},\n"
         "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
         "\"aten::_scaled_dot_product_flash_attention\", \"ts\": 60.0, \"dur\": 5.0, \"args\": "
         "{\"External id\": 3, \"Input Dims\": [[1, 8, 256, 64], [1, 2, 256, 64], [1, 2, 256, "
         "64], [], [], [], []], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", "
         "\"c10::BFloat16\", \"Scalar\", \"Scalar\", \"Scalar\", \"\"], \"Concrete Inputs\": "
         "[\"\", \"\", \"\", \"0.\", \"True\", \"False\", \"\"]}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"flash_fwd_kernel\", \"ts\": 66.0, "
         "\"dur\": 12.0, \"args\": {\"External id\": 3}}\n]}\n";
}

// An all_reduce_perf log of six sizes, as text and as nccl-tests' -J JSON.
std::string nccl_text_seed() {
  std::string log = "# Collective test starting: all_reduce_perf\n";
  for (int i = 0; i < 6; ++i)
    log += fmt::format("{:>12} {:>10} float sum -1 {:>8.2f} 1.00 1.75 0 {:>8.2f} 1.00 1.75 0\n",
                       1024 << (2 * i), 256 << (2 * i), 10.0 + 3 * i, 10.0 + 3 * i);
  return log;
}

std::string nccl_json_seed() {
  std::string json = "{\"version\": 1, \"args\": [\"./all_reduce_perf\"], \"devices\": [";
  for (int r = 0; r < 8; ++r)
    json += fmt::format("{}{{\"rank\": {}, \"hostname\": \"h\"}}", r ? ", " : "", r);
  json += "], \"results\": [";
  for (int i = 0; i < 6; ++i)
    json += fmt::format(
        "{}{{\"size\": {}, \"out_of_place\": {{\"time\": {:.2f}, \"bus_bw\": 1.75}}, "
        "\"in_place\": null}}",
        i ? ", " : "", 1024 << (2 * i), 10.0 + 3 * i);
  return json + "]}";
}

std::string raw_seed() {
  calibration::RawResults raw;
  raw.provenance.backend = "cpu";
  raw.provenance.device = "fuzz";
  raw.provenance.date = "2026-01-01T00:00:00Z";
  raw.gemms.push_back({"qkv", "fp64", 64, 64, 64, 1, {1e-5, 1e-5, 1e-5, 3}});
  raw.memory.push_back({"copy", "fp64", 1e6, {1e-4, 1e-4, 1e-4, 3}});
  raw.transfers.push_back({"mpi_p2p", 1e6, {1e-4, 1e-4, 1e-4, 3}});
  raw.collectives.push_back({"mpi", "all_reduce", 2, 1e6, {2e-4, 2e-4, 2e-4, 3}, 0});
  return calibration::raw_to_json(raw);
}

std::vector<FuzzTarget> build_targets() {
  std::vector<FuzzTarget> t;
  const std::string scenario_dir = std::string(PW_SOURCE_DIR) + "/scenarios";
  std::vector<std::string> scenarios;
  for (const char* f : {"gpt3-175b-1024-a100.yaml", "h100/mbridge-2604-qwen3-30b-a3b-16.yaml",
                        "h100/dgxc-2411-llama3170b-fp8-512.yaml"})
    scenarios.push_back(source(std::string("scenarios/") + f));
  t.push_back({"scenario", scenarios, [scenario_dir](const std::string& s) {
                 hw::parse_scenario(s, "scenario.yaml", scenario_dir, {},
                                    hw::ParallelSection::kOptional);
               }});
  t.push_back({"profile", {source("hwmodels/profiles/dgx-h100.yaml")}, [](const std::string& s) {
                 hw::parse_profile(s, "profile.yaml");
               }});
  t.push_back({"hf-config",
               {source("docs/examples/llama3-8b-config.json"),
                source("docs/examples/deepseek-v3-config.json")},
               [](const std::string& s) { hw::parse_hf_config(s, "config.json"); }});

  auto f = std::make_shared<const PlanAndRun>(plan_and_run());
  for (DocFormat fmt : {DocFormat::kYaml, DocFormat::kJson}) {
    const std::string ext = fmt == DocFormat::kJson ? "json" : "yaml";
    t.push_back({"plan-" + ext, {plan_to_text(f->plan, fmt)}, [f, fmt](const std::string& s) {
                   compare_run(parse_plan(s, fmt, "plan"), f->run, "run");
                 }});
    t.push_back(
        {"measured-" + ext, {measured_run_to_text(f->run, fmt)}, [f, fmt](const std::string& s) {
           compare_run(f->plan, parse_measured_run(s, fmt, "run"), "run");
         }});
  }

  GeneratorParams gp;
  gp.p = 4;
  gp.m = 8;
  const Schedule zb = generate_schedule(default_registry(), "zb-h1", gp);
  for (DocFormat fmt : {DocFormat::kYaml, DocFormat::kJson})
    t.push_back({fmt == DocFormat::kJson ? "schedule-json" : "schedule-yaml",
                 {schedule_to_text(zb, fmt)},
                 [fmt](const std::string& s) { parse_schedule(s, fmt, "schedule"); }});
  t.push_back({"pytorch-csv",
               {schedule_to_pytorch_csv(zb, CsvForm::kComputeOnly),
                schedule_to_pytorch_csv(zb, CsvForm::kComputeComms)},
               [](const std::string& s) { schedule_from_pytorch_csv(s, "schedule.csv"); }});

  auto base =
      std::make_shared<const hw::HardwareProfile>(hw::resolve_profile("dgx-h100", "", "", ""));
  t.push_back({"kineto-trace", {kineto_seed()}, [base](const std::string& s) {
                 calibration::raw_from_kineto(s, "trace.json", *base);
               }});
  t.push_back({"nccl-tests-text", {nccl_text_seed()}, [base](const std::string& s) {
                 calibration::NcclTestsHints h;
                 h.ranks = 8;
                 h.nodes = 1;
                 calibration::fit_nccl_tests(
                     {calibration::parse_nccl_tests(s, "all_reduce_perf.txt", h)}, *base);
               }});
  t.push_back({"nccl-tests-json", {nccl_json_seed()}, [base](const std::string& s) {
                 calibration::fit_nccl_tests(
                     {calibration::parse_nccl_tests(s, "all_reduce_perf.json")}, *base);
               }});
  t.push_back({"calibration-raw", {raw_seed()}, [](const std::string& s) {
                 calibration::raw_from_json(s, "raw.json");
               }});
  // --costs of `compare` (durations, mw allowed) and of `simulate --schedule` (plain numbers).
  t.push_back(
      {"costs-compare",
       {"F=1,B=2,W=1,comm=0.5", "f=2ms, b=3us, w=500ns, r=1, mw=0.25", "B=1.5s,W=0ps"},
       [](const std::string& s) { tools::parse_pass_costs(s, {.durations = true, .mw = true}); }});
  t.push_back({"costs-simulate",
               {"F=1,B=2,W=1,comm=0.5", "b=1.5, w=0, r=2"},
               [](const std::string& s) { tools::parse_pass_costs(s, {}); }});
  return t;
}

}  // namespace

const std::vector<std::string>& fuzz_target_names() {
  static const std::vector<std::string> names = {
      "scenario",        "profile",         "hf-config",     "plan-yaml",
      "measured-yaml",   "plan-json",       "measured-json", "schedule-yaml",
      "schedule-json",   "pytorch-csv",     "kineto-trace",  "nccl-tests-text",
      "nccl-tests-json", "calibration-raw", "costs-compare", "costs-simulate"};
  return names;
}

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets = [] {
    std::vector<FuzzTarget> t = build_targets();
    PW_ASSERT(t.size() == fuzz_target_names().size(), "fuzz target names out of step");
    for (std::size_t i = 0; i < t.size(); ++i)
      PW_ASSERT(t[i].name == fuzz_target_names()[i], "fuzz target names out of step");
    return t;
  }();
  return targets;
}

const FuzzTarget* find_fuzz_target(const std::string& name) {
  for (const FuzzTarget& t : fuzz_targets())
    if (t.name == name) return &t;
  return nullptr;
}

Verdict check_input(const FuzzTarget& target, const std::string& input) {
  Verdict v;
  try {
    target.read(input);
  } catch (const ConfigError& e) {
    v.refused = true;
    const std::string msg = e.what();
    if (msg.find('\n') != std::string::npos)
      v.failure = target.name + ": a multi-line error: " + msg;
  } catch (const std::exception& e) {
    v.failure = target.name + ": not a ConfigError: " + e.what();
  }
  return v;
}

}  // namespace pw::fuzz
