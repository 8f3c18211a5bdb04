// Mutation fuzzing of every input reader pipewright has: scenarios, profiles, Hugging Face
// config.json, plans and measured runs (YAML and JSON, then lined up by `compare`), schedule
// documents, PyTorch CSV and calibration raw files. Seeds are real files of each kind; each
// input gets one to four mutations (bytes flipped, spans dropped or repeated, truncation, and
// tokens that broke readers before: 1e999, integers past 64 bits, YAML aliases and alias bombs,
// map keys that are sequences, deep nesting, invalid UTF-8). A reader must accept the input or
// refuse it with a ConfigError whose message is one line; any other exception fails the test, a
// crash or hang fails the run. Deterministic: fixed seeds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

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

namespace pw {
namespace {

const std::vector<std::string> kTokens = {
    "1e999",
    "-1e999",
    "-1",
    "0",
    "99999999999999999999999",
    "9223372036854775807",
    "2147483648",
    "nan",
    ".inf",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    "\n",
    "\"",
    "&a ",
    "*a",
    "*b",
    "? [x, y]\n: 1\n",
    "~",
    "null",
    "true",
    "- ",
    "\t",
    "\xff\xfe",
    "\xc3\x28",
    std::string(1, '\0'),
    "a: &a [1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b]\n",
    std::string(300, '[') + std::string(300, ']'),
    std::string(300, '{'),
};

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int count = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < count; ++i) {
    const std::size_t at = pick(s.size() + 1);
    switch (rng() % 6) {
      case 0:  // flip one byte to a printable or control character
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng() % 128);
        break;
      case 1:  // drop a span
        s.erase(at, 1 + pick(16));
        break;
      case 2:  // repeat a span
        s.insert(at, s.substr(pick(s.size()), 1 + pick(32)));
        break;
      case 3:  // truncate
        s.resize(at);
        break;
      default:  // insert a token that broke readers before
        s.insert(at, kTokens[pick(kTokens.size())]);
        break;
    }
  }
  return s;
}

struct Outcome {
  int accepted = 0, refused = 0;
};

// Runs `reader` on `n` mutations of `seed`; every failure must be a one-line ConfigError.
Outcome fuzz(const std::string& what, const std::string& seed, int n,
             const std::function<void(const std::string&)>& reader, std::uint64_t salt) {
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL ^ salt);
  Outcome o;
  // The seed itself must be accepted (the harness tests mutations of a valid file).
  EXPECT_NO_THROW(reader(seed)) << what << ": the unmutated seed is refused";
  for (int i = 0; i < n; ++i) {
    const std::string input = mutate(seed, rng);
    try {
      reader(input);
      ++o.accepted;
    } catch (const ConfigError& e) {
      ++o.refused;
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos)
          << what << " #" << i << ": a multi-line error: " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " #" << i << ": " << e.what() << "\ninput:\n"
                    << input.substr(0, 600);
    }
  }
  return o;
}

// 400 inputs per reader in the test command; PW_FUZZ_INPUTS=N runs N (deeper runs by hand).
const int kInputsPerReader = [] {
  const char* e = std::getenv("PW_FUZZ_INPUTS");
  return e != nullptr && std::atoi(e) > 0 ? std::atoi(e) : 400;
}();

std::string source(const std::string& rel) {
  return read_file(std::string(PW_SOURCE_DIR) + "/" + rel);
}

TEST(ReadersFuzz, Scenarios) {
  const std::string base = std::string(PW_SOURCE_DIR) + "/scenarios";
  std::uint64_t salt = 1;
  for (const char* f : {"gpt3-175b-1024-a100.yaml", "h100/mbridge-2604-qwen3-30b-a3b-16.yaml",
                        "h100/dgxc-2411-llama3170b-fp8-512.yaml"}) {
    const Outcome o = fuzz(
        f, source(std::string("scenarios/") + f), kInputsPerReader,
        [&](const std::string& t) {
          hw::parse_scenario(t, f, base, {}, hw::ParallelSection::kOptional);
        },
        salt++);
    EXPECT_GT(o.refused, 0) << f;
  }
}

TEST(ReadersFuzz, ProfilesAndHuggingFaceConfigs) {
  const Outcome p = fuzz(
      "dgx-h100.yaml", source("hwmodels/profiles/dgx-h100.yaml"), kInputsPerReader,
      [](const std::string& t) { hw::parse_profile(t, "dgx-h100.yaml"); }, 11);
  EXPECT_GT(p.refused, 0);
  const Outcome h = fuzz(
      "config.json", source("docs/examples/llama3-8b-config.json"), kInputsPerReader,
      [](const std::string& t) { hw::parse_hf_config(t, "config.json"); }, 12);
  EXPECT_GT(h.refused, 0);
}

// A plan (1F1B p=2 m=4, predicted times) and a measured run of it.
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

TEST(ReadersFuzz, PlansAndMeasuredRunsThroughCompare) {
  const PlanAndRun f = plan_and_run();
  std::uint64_t salt = 21;
  for (DocFormat fmt : {DocFormat::kYaml, DocFormat::kJson}) {
    const std::string ext = fmt == DocFormat::kJson ? ".json" : ".yaml";
    // A mutated plan is lined up against the unmutated run, and the other way round: compare
    // must refuse what does not match, not index past it.
    const Outcome p = fuzz(
        "plan" + ext, plan_to_text(f.plan, fmt), kInputsPerReader,
        [&](const std::string& t) {
          const Plan plan = parse_plan(t, fmt, "plan" + ext);
          compare_run(plan, f.run, "run" + ext);
        },
        salt++);
    EXPECT_GT(p.refused, 0);
    const Outcome m = fuzz(
        "run" + ext, measured_run_to_text(f.run, fmt), kInputsPerReader,
        [&](const std::string& t) {
          const MeasuredRun run = parse_measured_run(t, fmt, "run" + ext);
          compare_run(f.plan, run, "run" + ext);
        },
        salt++);
    EXPECT_GT(m.refused, 0);
  }
}

TEST(ReadersFuzz, SchedulesAndPytorchCsv) {
  GeneratorParams gp;
  gp.p = 4;
  gp.m = 8;
  const Schedule s = generate_schedule(default_registry(), "zb-h1", gp);
  std::uint64_t salt = 31;
  for (DocFormat fmt : {DocFormat::kYaml, DocFormat::kJson}) {
    const Outcome o = fuzz(
        "schedule", schedule_to_text(s, fmt), kInputsPerReader,
        [&](const std::string& t) { parse_schedule(t, fmt, "schedule"); }, salt++);
    EXPECT_GT(o.refused, 0);
  }
  for (CsvForm form : {CsvForm::kComputeOnly, CsvForm::kComputeComms}) {
    const Outcome o = fuzz(
        "csv", schedule_to_pytorch_csv(s, form), kInputsPerReader,
        [](const std::string& t) { schedule_from_pytorch_csv(t, "s.csv"); }, salt++);
    EXPECT_GT(o.refused, 0);
  }
}

TEST(ReadersFuzz, ProfilerTracesAndNcclTestsLogs) {
  const hw::HardwareProfile base = hw::resolve_profile("dgx-h100", "", "", "");
  const std::string trace =
      "{\"traceEvents\": [\n"
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"ts\": 1.0, \"dur\": 5.0, "
      "\"args\": {\"External id\": 1, \"Input Dims\": [[64, 32], [32, 16]], \"Input type\": "
      "[\"c10::BFloat16\", \"c10::BFloat16\"]}},\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"ts\": 7.0, \"dur\": 9.5, "
      "\"args\": {\"External id\": 1}},\n"
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"ts\": 20.0, "
      "\"dur\": 5.0, \"args\": {\"External id\": 2, \"Collective name\": \"allreduce\", \"In msg "
      "nelems\": 1024, \"Out msg nelems\": 1024, \"dtype\": \"BFloat16\", \"Group size\": 8}},\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce\", \"ts\": 26.0, "
      "\"dur\": 30.0, \"args\": {\"External id\": 2}},\n"
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
      "\"aten::_scaled_dot_product_flash_attention\", \"ts\": 60.0, \"dur\": 5.0, \"args\": "
      "{\"External id\": 3, \"Input Dims\": [[1, 8, 256, 64], [1, 2, 256, 64], [1, 2, 256, 64], "
      "[], [], [], []], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", "
      "\"c10::BFloat16\", \"Scalar\", \"Scalar\", \"Scalar\", \"\"], \"Concrete Inputs\": "
      "[\"\", \"\", \"\", \"0.\", \"True\", \"False\", \"\"]}},\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"flash_fwd_kernel\", \"ts\": 66.0, "
      "\"dur\": 12.0, \"args\": {\"External id\": 3}}\n]}\n";
  const Outcome t = fuzz(
      "trace.json", trace, kInputsPerReader,
      [&](const std::string& s) { calibration::raw_from_kineto(s, "trace.json", base); }, 51);
  EXPECT_GT(t.refused, 0);
  std::string log = "# Collective test starting: all_reduce_perf\n";
  for (int i = 0; i < 6; ++i)
    log += fmt::format("{:>12} {:>10} float sum -1 {:>8.2f} 1.00 1.75 0 {:>8.2f} 1.00 1.75 0\n",
                       1024 << (2 * i), 256 << (2 * i), 10.0 + 3 * i, 10.0 + 3 * i);
  calibration::NcclTestsHints h;
  h.ranks = 8;
  h.nodes = 1;
  const Outcome n = fuzz(
      "all_reduce_perf.txt", log, kInputsPerReader,
      [&](const std::string& s) {
        const calibration::NcclTestsLog l =
            calibration::parse_nccl_tests(s, "all_reduce_perf.txt", h);
        calibration::fit_nccl_tests({l}, base);
      },
      52);
  EXPECT_GT(n.refused, 0);
  // The same log as nccl-tests' -J JSON.
  std::string json = "{\"version\": 1, \"args\": [\"./all_reduce_perf\"], \"devices\": [";
  for (int r = 0; r < 8; ++r)
    json += fmt::format("{}{{\"rank\": {}, \"hostname\": \"h\"}}", r ? ", " : "", r);
  json += "], \"results\": [";
  for (int i = 0; i < 6; ++i)
    json += fmt::format(
        "{}{{\"size\": {}, \"out_of_place\": {{\"time\": {:.2f}, \"bus_bw\": 1.75}}, "
        "\"in_place\": null}}",
        i ? ", " : "", 1024 << (2 * i), 10.0 + 3 * i);
  json += "]}";
  const Outcome nj = fuzz(
      "all_reduce_perf.json", json, kInputsPerReader,
      [&](const std::string& s) {
        const calibration::NcclTestsLog l = calibration::parse_nccl_tests(s, "x.json");
        calibration::fit_nccl_tests({l}, base);
      },
      53);
  EXPECT_GT(nj.refused, 0);
}

TEST(ReadersFuzz, CalibrationRawFiles) {
  calibration::RawResults raw;
  raw.provenance.backend = "cpu";
  raw.provenance.device = "fuzz";
  raw.provenance.date = "2026-01-01T00:00:00Z";
  raw.gemms.push_back({"qkv", "fp64", 64, 64, 64, 1, {1e-5, 1e-5, 1e-5, 3}});
  raw.memory.push_back({"copy", "fp64", 1e6, {1e-4, 1e-4, 1e-4, 3}});
  raw.transfers.push_back({"mpi_p2p", 1e6, {1e-4, 1e-4, 1e-4, 3}});
  raw.collectives.push_back({"mpi", "all_reduce", 2, 1e6, {2e-4, 2e-4, 2e-4, 3}, 0});
  const Outcome o = fuzz(
      "raw.json", calibration::raw_to_json(raw), kInputsPerReader,
      [](const std::string& t) { calibration::raw_from_json(t, "raw.json"); }, 41);
  EXPECT_GT(o.refused, 0);
}

}  // namespace
}  // namespace pw
