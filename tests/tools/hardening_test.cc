// The reproducers of the hardening issue, as a user meets them on the command line: each is one
// line naming the file, key or flag, exit 2, and nothing else happens (no crash, no wrapped
// numbers, no silently ignored flag).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "core/file_io.h"
#include "tests/tools/cli_util.h"

namespace {

using pw::testing::kTool;
using pw::testing::occurrences;
using pw::testing::sh;

const std::string kScenario = std::string(PW_SOURCE_DIR) + "/scenarios/gpt3-175b-1024-a100.yaml";

struct Dir {
  std::filesystem::path path;
  Dir() : path(std::filesystem::temp_directory_path() / ("pw-hard-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    pw::write_file_atomic((path / name).string(), text);
    return (path / name).string();
  }
};

// Runs `args`; expects exit 2 and one line containing every `needle`.
void refused(const std::string& args, std::initializer_list<std::string> needles) {
  std::string out;
  EXPECT_EQ(sh(kTool + " " + args, &out), 2) << args << "\n" << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << args << "\n" << out;
  for (const std::string& n : needles)
    EXPECT_NE(out.find(n), std::string::npos) << args << "\n" << out;
}

TEST(Hardening, CostsThatWouldOverflowTheClockAreRefused) {
  // F = 1e9 ms is 1e18 ps per pass: a V-Half order of 192 passes wrapped the 64-bit clock and
  // tripped the gap filler's deadlock assertion (SIGABRT); W = 1e10 s printed a negative
  // iteration time.
  refused("simulate --schedule v-half --pp 4 --microbatches 8 --costs F=1e9", {"--costs", "clock"});
  refused("simulate --schedule v-zb --pp 4 --microbatches 8 --costs F=1e9", {"--costs"});
  refused("compare --pp 4 --microbatches 8 --costs W=1e10s", {"--costs", "1000 s"});
  std::string out;
  EXPECT_EQ(sh(kTool + " simulate --schedule v-half --pp 4 --microbatches 8 --costs F=1e6", &out),
            0)
      << out;
  // Each device runs 2 chunks x 8 microbatches of F + B + W: busy 16 x (1e6 + 2) = 16000032.
  EXPECT_EQ(occurrences(out, " 16000032 "), 4u) << out;
  EXPECT_FALSE(std::regex_search(out, std::regex(" -[0-9]"))) << out;
}

TEST(Hardening, ScenarioNumbersOutOfRangeAreRefusedNotWrapped) {
  const Dir d;
  refused("estimate " + d.write("n.yaml",
                                "model: {preset: gpt3-175b}\n"
                                "cluster: {profile: dgx-a100-80gb, nodes: 9223372036854775807}\n"),
          {"n.yaml", "cluster.nodes", "at most 2147483647"});
  refused("estimate " + d.write("big.yaml",
                                "model: {preset: gpt3-175b}\n"
                                "cluster: {profile: dgx-a100-80gb, nodes: 2000000}\n"),
          {"big.yaml", "cluster.nodes", "1048576 GPUs"});
  refused("estimate " + d.write("layers.yaml",
                                "model: {preset: gpt3-175b, num_layers: 4294967296}\n"
                                "cluster: {profile: dgx-a100-80gb, nodes: 1}\n"),
          {"layers.yaml", "model.num_layers"});
}

// Slow GPUs and degraded NICs are simulated; the commands whose models assume a uniform cluster
// refuse them by key instead of ignoring them, and `simulate` names them and the busiest GPU.
TEST(Hardening, HeterogeneousClustersAreSimulatedOrRefusedNeverIgnored) {
  const Dir d;
  const std::string parallel =
      "parallel: {tensor_model_parallel_size: 8, pipeline_model_parallel_size: 1,\n"
      "           micro_batch_size: 1, global_batch_size: 8}\n";
  const std::string slow =
      d.write("slow.yaml",
              "model: {preset: megatron-1.7b}\n"
              "cluster: {profile: dgx-a100-80gb, nodes: 2, slow_gpus: {3: 1.5}}\n" +
                  parallel);
  const std::string nic =
      d.write("nic.yaml",
              "model: {preset: megatron-1.7b}\n"
              "cluster: {profile: dgx-a100-80gb, nodes: 2, degraded_nics: {0: 2}}\n" +
                  parallel);
  refused("plan " + slow, {"slow.yaml", "cluster.slow_gpus", "simulate"});
  refused("compare " + nic + " --schedules 1f1b", {"nic.yaml", "cluster.degraded_nics"});
  const std::string down =
      d.write("down.yaml",
              "model: {preset: megatron-1.7b}\n"
              "cluster: {profile: dgx-a100-80gb, nodes: 2, failed_nics: [3]}\n" +
                  parallel);
  refused("plan " + down, {"down.yaml", "cluster.failed_nics"});
  const std::string busy =
      d.write("busy.yaml",
              "model: {preset: megatron-1.7b}\n"
              "cluster: {profile: dgx-a100-80gb, nodes: 2, background_flows: [[0, 8]]}\n" +
                  parallel);
  refused("compare " + busy + " --schedules 1f1b", {"busy.yaml", "cluster.background_flows"});
  const std::string spine =
      d.write("spine.yaml",
              "model: {preset: megatron-1.7b}\n"
              "cluster: {profile: dgx-a100-80gb, nodes: 2, fabric: fat-tree, leaf_ports: 8,\n"
              "          failed_spine_links: [[0, 0]]}\n" +
                  parallel);
  refused("plan " + spine, {"spine.yaml", "cluster.failed_spine_links"});
  std::string spine_out;
  ASSERT_EQ(sh(kTool + " simulate " + spine, &spine_out), 0) << spine_out;
  EXPECT_NE(spine_out.find("failed spine links          1 (traffic takes the next spine"),
            std::string::npos)
      << spine_out;
  EXPECT_NE(spine_out.find("busiest links               leaf0 -> spine1 (leaf-spine"),
            std::string::npos)
      << spine_out;
  std::string down_out;
  ASSERT_EQ(sh(kTool + " simulate " + down, &down_out), 0) << down_out;
  EXPECT_NE(down_out.find("failed NICs                 1 (their GPUs use the next working NIC"),
            std::string::npos)
      << down_out;
  std::string out;
  ASSERT_EQ(sh(kTool + " simulate " + slow, &out), 0) << out;
  EXPECT_NE(out.find("all 16 GPUs simulated"), std::string::npos) << out;
  EXPECT_NE(out.find("busiest GPU                 GPU 3 "), std::string::npos) << out;
}

TEST(Hardening, MalformedDocumentsAreOneLineErrors) {
  const Dir d;
  // A YAML alias bomb ("billion laughs"): 9^9 strings once expanded.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c)
    bomb += std::string(1, c) + ": &" + c + " [" + [&] {
      std::string r;
      for (int i = 0; i < 9; ++i) r += std::string(i ? ", *" : "*") + static_cast<char>(c - 1);
      return r;
    }() + "]\n";
  refused("estimate " + d.write("bomb.yaml", bomb + "model: {preset: gpt3-175b}\n"),
          {"bomb.yaml", "aliases"});
  refused("simulate --plan " + d.write("bomb-plan.yaml", bomb), {"bomb-plan.yaml", "aliases"});
  // A map key that is itself a sequence was "internal error", exit 1.
  refused("estimate " + d.write("key.yaml", "? [a, b]\n: 1\nmodel: {preset: gpt3-175b}\n"),
          {"key.yaml", "line 1", "map key"});
  // 1e999 in JSON was an uncaught out_of_range.
  refused("simulate --plan " + d.write("inf.json", "{\"format\": 1e999}"), {"inf.json", "1e999"});
  // Invalid UTF-8 is named by its line.
  refused("estimate " + d.write("utf.yaml", "model: {preset: gpt3-175b}\ncluster: \xff\xfe\n"),
          {"utf.yaml", "line 2", "UTF-8"});
  // A key holding a newline still gives one line.
  refused("estimate " + d.write("nl.yaml", "model: {preset: gpt3-175b, \"num\\nlayers\": 3}\n"),
          {"nl.yaml", "num\\nlayers"});
  // Deep nesting.
  refused(
      "simulate --plan " + d.write("deep.json", std::string(5000, '[') + std::string(5000, ']')),
      {"deep.json", "nested deeper"});
}

TEST(Hardening, EveryFlagActsInItsModeOrIsRefused) {
  // With a scenario, the fixed-cost flags used to be ignored with exit 0 and nothing written.
  for (const std::string flag : {"--export-csv x.csv", "--emit x.yaml", "--diagram", "--costs F=2",
                                 "--schedule 1f1b", "--microbatches 8"})
    refused("simulate " + kScenario + " " + flag, {flag.substr(0, flag.find(' '))});
  // Without one, the simulator's flags have nothing to act on.
  for (const std::string flag : {"--trace t.json", "--all-ranks", "--overlap-grad-reduce"})
    refused("simulate --schedule 1f1b --pp 4 --microbatches 8 " + flag,
            {flag.substr(0, flag.find(' ')), "scenario"});
  // --csv-form shapes the --export-csv file; alone it used to be ignored with exit 0.
  refused("simulate --schedule 1f1b --pp 4 --microbatches 8 --csv-form compute_comms",
          {"--csv-form", "--export-csv"});
  refused("plan " + kScenario + " --csv-form compute_comms", {"--csv-form", "--export-csv"});
}

TEST(Hardening, TheBinaryLinksNoCudaLibrary) {
  // The CUDA backends are the plugin libpipewright_cuda.so, opened only for --backend cuda*:
  // every other command starts without loading cudart, cuBLAS or NCCL.
  std::string out;
  ASSERT_EQ(sh("ldd " + kTool, &out), 0) << out;
  for (const char* lib : {"libcudart", "libcublas", "libnccl", "libcuda."})
    EXPECT_EQ(out.find(lib), std::string::npos) << lib << "\n" << out;
}

TEST(Hardening, CudaBackendWithoutThePluginIsOneLineExit2) {
  // Opened only when asked for; when it cannot be, the reason is one line naming where it
  // looked, exit 2, nothing written.
  std::string out;
  EXPECT_EQ(sh("PIPEWRIGHT_CUDA_PLUGIN=/nonexistent/libpipewright_cuda.so " + kTool +
                   " calibrate --backend cuda --out /tmp/pw-never-written.yaml",
               &out),
            2)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("/nonexistent/libpipewright_cuda.so"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists("/tmp/pw-never-written.yaml"));
}

TEST(Hardening, SimulateScenarioReportDrawsTheSimulatedIteration) {
  // Llama 3.1 70B on 64 H100 (t4 cp2 p4 d2, interleaved v5, b1, B128): m = 128 / (1 x 2) = 64
  // microbatches over p x v = 20 stages, an F and a full backward each: 2 x 20 x 64 = 2560
  // blocks on the representative GPUs' timelines.
  const std::string html =
      std::filesystem::temp_directory_path() / ("pw-iter-" + std::to_string(::getpid()) + ".html");
  std::string out;
  ASSERT_EQ(sh(kTool + " simulate " + PW_SOURCE_DIR +
                   "/scenarios/h100/dgxc-2411-llama3170b-bf16-64.yaml --report " + html,
               &out),
            0)
      << out;
  const std::string page = pw::read_file(html);
  EXPECT_EQ(occurrences(page, "class=\"blk "), 2560u);
  EXPECT_NE(page.find("exposed communication"), std::string::npos);
  EXPECT_NE(page.find("peak memory per GPU"), std::string::npos);
  // Memory over time: one chart per pipeline rank's GPU with its step function (model state,
  // activations, buffers, in GB) and the GPU's usable memory as the limit line.
  EXPECT_NE(page.find("Memory (model state, activations, buffers) per device over time (GB"),
            std::string::npos);
  EXPECT_EQ(occurrences(page, "<svg class=\"mem\""), 1u);
  EXPECT_EQ(occurrences(page, "class=\"area\""), 4u);  // p = 4 pipeline ranks
  EXPECT_NE(page.find("dashed red line: limit 78"), std::string::npos);
  std::filesystem::remove(html);
  // A plan rebuilt on its profile is drawn the same way: a 2-stage 1F1B plan of a small model on
  // one DGX H100 (t1 p2 d4, B16, b1: m = 16 / 4 = 4), 2 passes x 4 microbatches x 2 pipeline
  // ranks = 16 blocks.
  const std::string dir =
      std::filesystem::temp_directory_path() / ("pw-plan-report-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  pw::write_file_atomic(dir + "/small.yaml",
                        "model: {num_layers: 4, hidden_size: 512, num_attention_heads: 8, "
                        "seq_length: 1024, vocab_size: 32000}\n"
                        "cluster: {profile: dgx-h100, nodes: 1}\n"
                        "parallel: {global_batch_size: 16}\n");
  out.clear();
  ASSERT_EQ(sh(kTool + " plan " + dir + "/small.yaml --top 1 --tp 1 --pp 2 --schedules 1f1b " +
                   "--microbatch-size 1 --emit " + dir + "/plan.yaml",
               &out),
            0)
      << out;
  out.clear();
  ASSERT_EQ(sh(kTool + " simulate --plan " + dir + "/plan.yaml --report " + dir + "/p.html" +
                   " --trace " + dir + "/t.json",
               &out),
            0)
      << out;
  EXPECT_EQ(occurrences(pw::read_file(dir + "/p.html"), "class=\"blk "), 16u);
  // The emitted plan is lowered (explicit SEND/RECV): its trace still draws one arrow per
  // pipeline transfer, 4 forward and 4 backward messages, from the send to the pass that
  // consumes it.
  const std::string trace = pw::read_file(dir + "/t.json");
  EXPECT_EQ(occurrences(trace, "\"ph\":\"s\""), 8u);
  EXPECT_EQ(occurrences(trace, "\"ph\":\"f\""), 8u);
  std::filesystem::remove_all(dir);
}

// Traces of many GPUs: by default at most 8 of the simulated GPUs (evenly spaced, named on
// stderr), `--trace-ranks all` every one, a list exactly those; a GPU that is not simulated or a
// selection without a trace is one line, exit 2.
TEST(Hardening, TraceRanksSelectsTheGpusATraceShows) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("pw-trace-ranks-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string scen = dir + "/p16.yaml", trace = dir + "/t.json";
  // t1 p16 d1 on two DGX A100 nodes: pipeline rank k runs on GPU k.
  pw::write_file_atomic(scen,
                        "model: {num_layers: 16, hidden_size: 512, num_attention_heads: 8, "
                        "seq_length: 1024, vocab_size: 32000}\n"
                        "cluster: {profile: dgx-a100-80gb, nodes: 2}\n"
                        "parallel: {pipeline_model_parallel_size: 16, micro_batch_size: 1, "
                        "global_batch_size: 16}\n");
  auto processes = [&](const std::string& flags, std::string* out) {
    out->clear();
    EXPECT_EQ(sh(kTool + " simulate " + scen + " --trace " + trace + flags, out), 0) << *out;
    return occurrences(pw::read_file(trace), "\"process_name\"");
  };
  std::string out;
  EXPECT_EQ(processes("", &out), 8u);
  EXPECT_NE(out.find("trace: 8 of 16 simulated GPUs (GPUs 0,2,4,6,9,11,13,15)"), std::string::npos)
      << out;
  EXPECT_EQ(processes(" --trace-ranks all", &out), 16u);
  EXPECT_EQ(processes(" --trace-ranks 15,0", &out), 2u);
  const std::string two = pw::read_file(trace);
  EXPECT_NE(two.find("GPU 0 "), std::string::npos);
  EXPECT_NE(two.find("GPU 15 "), std::string::npos);
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + scen + " --trace " + trace + " --trace-ranks 3x", &out), 2);
  EXPECT_NE(out.find("--trace-ranks: '3x' is not a simulated GPU"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(sh(kTool + " simulate " + scen + " --trace-ranks 0", &out), 2);
  EXPECT_NE(out.find("expected --trace FILE"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// Optimizer offload runs Adam on the host CPU at the rate the profile's host memory bandwidth
// gives (hw::cpu_adam_rate). A profile without it: `plan` leaves offload out of its search, and
// asking for offload (flag or scenario) is refused naming the key the profile lacks.
TEST(Hardening, OffloadOnAProfileWithoutTheHostsMemoryBandwidthNamesTheKey) {
  const Dir dir;
  // The shipped A100 profile less its two host lines.
  const std::string text =
      pw::read_file(std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/dgx-a100-80gb.yaml");
  std::string profile;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.find("host_memory_") == std::string::npos) profile += line + "\n";
    at = end + 1;
  }
  const std::string prof = dir.write("nohost.yaml", profile);
  const std::string model =
      "model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 8, seq_length: 1024, "
      "vocab_size: 32000}\ncluster: {profile: " +
      prof + ", nodes: 1}\n";
  const std::string plain = dir.write("plain.yaml", model + "parallel: {global_batch_size: 16}\n");
  refused("plan " + plain + " --offload on",
          {"node.host_memory_bandwidth_gb_per_s", "--offload on"});
  refused("plan " + plain + " --offload both", {"node.host_memory_bandwidth_gb_per_s"});
  refused("plan " + plain + " --shortest-time --offload on",
          {"node.host_memory_bandwidth_gb_per_s"});
  const std::string off =
      dir.write("off.yaml", model +
                                "parallel: {pipeline_model_parallel_size: 2, micro_batch_size: 1, "
                                "global_batch_size: 16, optimizer_offload: true}\n");
  refused("simulate " + off, {"node.host_memory_bandwidth_gb_per_s", "optimizer offload"});
  refused("plan " + off, {"node.host_memory_bandwidth_gb_per_s", "parallel.optimizer_offload"});
  // Without the ask, plan searches without offload.
  std::string out;
  EXPECT_EQ(sh(kTool + " plan " + plain + " --top 40", &out), 0) << out;
  EXPECT_EQ(out.find(" offload"), std::string::npos) << out;
  // With the shipped profile, offload is in the search.
  std::string shipped = model;
  shipped.replace(shipped.find(prof), prof.size(), "dgx-a100-80gb");
  const std::string with = dir.write("with.yaml", shipped + "parallel: {global_batch_size: 16}\n");
  EXPECT_EQ(sh(kTool + " plan " + with + " --offload on --top 1", &out), 0) << out;
  EXPECT_NE(out.find(" offload"), std::string::npos) << out;
}

}  // namespace

// Two flags that set one switch both ways: refused, not settled by the order the tool reads them
// in (estimate took --no-sequence-parallel silently).
TEST(Hardening, EstimateRefusesSequenceParallelismBothOnAndOff) {
  refused("estimate " + std::string(PW_SOURCE_DIR) +
              "/scenarios/megatron/weak-scaling-1.7b.yaml --sequence-parallel "
              "--no-sequence-parallel",
          {"--sequence-parallel --no-sequence-parallel", "contradictory"});
}

// compare's modes take different flags; one given to the other mode was silently ignored
// (--plan/--measured printed the same comparison with --schedules, --pp or --costs; a
// scenario's comparison has no adaptive curve for --no-tradeoff to leave out). The flags are
// checked before the files are read.
TEST(Hardening, CompareRefusesFlagsOfTheOtherMode) {
  for (const char* flag : {"--schedules 1f1b", "--pp 8", "--microbatches 16", "--costs F=2",
                           "--memory-limit 3", "--no-tradeoff"})
    refused(std::string("compare --plan p.yaml --measured m.json ") + flag,
            {std::string(flag).substr(0, std::string(flag).find(' ')), "--plan/--measured"});
  refused("compare " + kScenario + " --no-tradeoff", {"--no-tradeoff", "a scenario"});
}

// A fixed-cost flag the chosen generator does not read was silently ignored (1F1B printed the
// same schedule with --memory-limit 2, --chunks 3 or --mw-ratio 0.5; GPipe took R = 1). Refused,
// naming the generators that do read it (their declared capabilities, GeneratorCaps).
TEST(Hardening, SimulateRefusesFlagsTheGeneratorDoesNotRead) {
  const std::string base = "simulate --pp 4 --microbatches 8 --schedule ";
  refused(base + "1f1b --memory-limit 2", {"--memory-limit", "1f1b does not read", "zb-1p"});
  refused(base + "1f1b --chunks 3", {"--chunks", "interleaved"});
  refused(base + "zb-1p --group-size 4", {"--group-size", "interleaved, zeropp"});
  refused(base + "1f1b --mw-ratio 0.5", {"--mw-ratio", "no separate weight pass", "zb-h1"});
  refused(base + "gpipe --costs F=1,B=1,W=1,R=1", {"--costs", "R = 1", "1f1b-r"});
  // The readers take them.
  std::string out;
  EXPECT_EQ(sh(kTool + " " + base + "zb-1p --memory-limit 3 --mw-ratio 0.5", &out), 0) << out;
  EXPECT_EQ(sh(kTool + " " + base + "interleaved --chunks 3 --group-size 8", &out), 0) << out;
  EXPECT_EQ(sh(kTool + " " + base + "1f1b-r --costs F=1,B=1,W=1,R=1", &out), 0) << out;
}

// A command-line parse error (a missing positional, an unknown flag or command, a value outside
// a set) is one line like every other bad input. CLI11 printed two ("... is required" and "Run
// with --help for more information."), without the "pipewright: error:" prefix, and an unknown
// command read "A subcommand is required".
TEST(Hardening, ParseErrorsAreOneLineNamingWhereHelpIs) {
  refused("export --to megatron",
          {"pipewright: error: plan is required", "pipewright export --help"});
  refused("plan --bogus", {"pipewright: error: ", "--bogus", "pipewright plan --help"});
  refused("calibrate --backend gpu", {"--backend", "pipewright calibrate --help"});
  refused("", {"pipewright: error: ", "subcommand", "`pipewright --help`"});
  refused("bogus",
          {"pipewright: error: 'bogus': unknown command; expected one of simulate,", "export"});
  std::string out;
  EXPECT_EQ(sh(kTool + " --version", &out), 0) << out;
  EXPECT_EQ(sh(kTool + " estimate --help", &out), 0) << out;
}

// A memory limit given as 0 was read as not given (the generator's default, no limit, the GPU's
// memory) without a word; now it is one line naming the flag, in each command that takes one.
TEST(Hardening, AMemoryLimitOfZeroIsRefusedNotReadAsTheDefault) {
  refused("simulate --schedule zb-1p --pp 4 --microbatches 8 --memory-limit 0",
          {"pipewright: error: --memory-limit:", "above 0, got 0"});
  refused("compare --pp 4 --microbatches 8 --memory-limit 0",
          {"pipewright: error: --memory-limit:", "above 0, got 0"});
  refused("compare " + kScenario + " --memory-limit 0",
          {"pipewright: error: --memory-limit:", "above 0, got 0"});
}
