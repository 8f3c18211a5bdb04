// Scenario mode of `pipewright simulate`: load a scenario, generate its schedule, simulate one
// iteration with the discrete-event engine, print a table or JSON, optionally write a trace.
#include "tools/simulate_scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/file_io.h"
#include "core/trace.h"
#include "hwmodels/scenario.h"
#include "hwmodels/transformer.h"
#include "planner/schedules/generator.h"
#include "report/build.h"
#include "report/report.h"
#include "sim/iteration.h"

namespace pw::tools {
namespace {

double gb(double bytes) { return bytes / 1e9; }

nlohmann::ordered_json to_json(const hw::Scenario& s, const IterationResult& r) {
  nlohmann::ordered_json j;
  j["scenario"] = s.file;
  j["gpus"] = s.num_gpus();
  j["tensor_parallel"] = s.parallel.tensor_parallel;
  j["pipeline_parallel"] = s.parallel.pipeline_parallel;
  j["data_parallel"] = s.parallel.data_parallel;
  j["virtual_stages"] = s.parallel.virtual_stages;
  j["micro_batch_size"] = s.parallel.micro_batch_size;
  j["global_batch_size"] = s.parallel.global_batch_size;
  j["schedule"] = s.parallel.schedule;
  j["layers_per_stage"] = s.stage_layers();
  j["iteration_ms"] = ps_to_millis(r.iteration);
  j["tokens_per_sec"] = r.tokens_per_sec;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["mfu_causal"] = r.mfu_causal;
  j["hfu"] = r.hfu;
  j["bubble_rate"] = r.bubble_rate;
  j["bubble_fraction"] = r.bubble_fraction;
  j["pipeline_bubble_rate"] = r.pipeline_bubble_rate;
  nlohmann::ordered_json ex;
  for (int k = 0; k < kNumCommKinds; ++k)
    ex[comm_kind_name(static_cast<CommKind>(k))] = ps_to_millis(r.exposed[k]);
  j["exposed_comm_ms"] = ex;
  nlohmann::ordered_json mem = nlohmann::ordered_json::array();
  for (const DeviceMemory& m : r.memory) {
    mem.push_back({{"gpu", m.gpu},
                   {"pipeline_rank", m.pipeline_rank},
                   {"weights_gb", gb(m.weights)},
                   {"grads_gb", gb(m.grads)},
                   {"optimizer_gb", gb(m.optimizer)},
                   {"activations_gb", gb(m.activations)},
                   {"buffers_gb", gb(m.buffers)},
                   {"peak_gb", gb(m.peak)},
                   {"capacity_gb", gb(m.capacity)},
                   {"fits", m.fits}});
  }
  j["memory"] = mem;
  j["fits"] = r.fits;
  j["over_capacity_gb"] = gb(r.worst_overflow);
  if (s.parallel.optimizer_offload) j["offload_gpu_share"] = r.offload_gpu_share;
  j["simulated_gpus"] = r.simulated_gpus;
  j["events"] = r.events;
  j["busiest_gpu"] = {{"gpu", r.busiest_gpu},
                      {"tp", r.busiest_tp},
                      {"dp", r.busiest_dp},
                      {"pp", r.busiest_pp},
                      {"busy_ms", ps_to_millis(r.busiest_busy)}};
  j["most_exposed_gpu"] = {{"gpu", r.exposed_gpu},
                           {"tp", r.exposed_tp},
                           {"dp", r.exposed_dp},
                           {"pp", r.exposed_pp},
                           {"exposed_ms", ps_to_millis(r.exposed_most)}};
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const LinkLoad& l : r.busiest_links)
    links.push_back({{"link", l.name},
                     {"role", l.role},
                     {"saturated_ms", ps_to_millis(l.saturated)},
                     {"saturated_share", r.iteration > 0 ? static_cast<double>(l.saturated) /
                                                               static_cast<double>(r.iteration)
                                                         : 0.0},
                     {"gbytes", gb(l.bytes)},
                     {"capacity_gb_per_s", gb(l.capacity)}});
  j["busiest_links"] = links;
  int slow = 0;
  for (double f : s.topology.gpu_slowdown) slow += f != 1.0;
  if (slow > 0) j["slow_gpus"] = slow;
  if (const int failed = s.topology.num_failed_nics(); failed > 0) j["failed_nics"] = failed;
  if (!s.topology.background_flows.empty())
    j["background_flows"] = s.topology.background_flows.size();
  if (const int failed = s.topology.num_failed_spine_links(); failed > 0)
    j["failed_spine_links"] = failed;
  if (const auto n = s.topology.spine_link_faults.size() - s.topology.num_failed_spine_links(); n)
    j["degraded_spine_links"] = n;
  if (s.published) {
    j["published_tflops_per_gpu"] = s.published->tflops_per_gpu;
    j["published_iteration_s"] = s.published->iteration_time_s;
    j["error_pct"] =
        hw::published_error_pct(*s.published, r.tflops_per_gpu, ps_to_seconds(r.iteration));
  }
  return j;
}

// What bounds the iteration, as (label, text) lines for the table and the report: the GPU with
// the most compute, the one with the most exposed communication, the most saturated link of
// each network tier.
std::vector<std::pair<std::string, std::string>> bounds_lines(const IterationResult& r) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("busiest GPU", fmt::format("GPU {} (tp {}, dp {}, pp {}): {:.1f} ms of compute",
                                              r.busiest_gpu, r.busiest_tp, r.busiest_dp,
                                              r.busiest_pp, ps_to_millis(r.busiest_busy)));
  out.emplace_back(
      "most exposed GPU",
      fmt::format("GPU {} (tp {}, dp {}, pp {}): {:.2f} ms of communication not under compute",
                  r.exposed_gpu, r.exposed_tp, r.exposed_dp, r.exposed_pp,
                  ps_to_millis(r.exposed_most)));
  if (r.busiest_links.empty()) out.emplace_back("busiest links", "none saturated");
  for (std::size_t k = 0; k < r.busiest_links.size(); ++k) {
    const LinkLoad& l = r.busiest_links[k];
    out.emplace_back(
        k == 0 ? "busiest links" : "",
        fmt::format("{} ({}, {:.0f} GB/s): saturated {:.1f} ms ({:.0f}% of the iteration), "
                    "{:.1f} GB",
                    l.name, l.role, gb(l.capacity), ps_to_millis(l.saturated),
                    r.iteration > 0 ? 100.0 * static_cast<double>(l.saturated) /
                                          static_cast<double>(r.iteration)
                                    : 0.0,
                    gb(l.bytes)));
  }
  return out;
}

std::string to_table(const hw::Scenario& s, const IterationResult& r, const char* source) {
  std::string o;
  auto line = [&](const std::string& k, const std::string& v) {
    o += fmt::format("{:<28}{}\n", k, v);
  };
  const ParallelConfig& p = s.parallel;
  line(source, s.file);
  line("configuration",
       fmt::format("{} GPUs: t={}{} p={} d={}{}{} v={} b={} B={} schedule={} recompute={}{}{}{}{}",
                   s.num_gpus(), p.tensor_parallel, cp_label(p), p.pipeline_parallel,
                   p.data_parallel,
                   p.expert_parallel > 1 ? fmt::format(" ep={}", p.expert_parallel) : "",
                   p.expert_tp() != p.tensor_parallel ? fmt::format(" etp={}", p.expert_tp()) : "",
                   p.virtual_stages, p.micro_batch_size, p.global_batch_size, p.schedule,
                   p.recompute, p.sequence_parallel ? " sp" : "",
                   p.zero_stage == 3  ? fmt::format(" zero=3 (gathers by {})", p.zero3_gather)
                   : p.zero_stage > 0 ? fmt::format(" zero={}", p.zero_stage)
                                      : "",
                   p.fp8 != "off" ? fmt::format(" fp8={}{}", p.fp8,
                                                p.fp8_recipe == "delayed" ? "" : " " + p.fp8_recipe)
                                  : "",
                   s.flash_attention ? "" : " attention=unfused"));
  if (s.uneven_split())
    line("layers per stage",
         fmt::format("{}{}", fmt::join(s.stage_layers(), " "),
                     p.mtp_standalone
                         ? fmt::format(" (the multi-token prediction depths on stage {}, the loss "
                                       "alone on the last)",
                                       s.stage_layers().size() - 2)
                         : std::string()));
  line("iteration time", fmt::format("{:.1f} ms", ps_to_millis(r.iteration)));
  line("tokens/s", fmt::format("{:.0f}", r.tokens_per_sec));
  line("TFLOP/s per GPU",
       fmt::format("{:.1f} hardware, {:.1f} model", r.tflops_per_gpu, r.model_tflops_per_gpu));
  line("HFU / MFU", fmt::format("{:.1f}% / {:.1f}% (MFU counts attention over all s x s pairs; "
                                "{:.1f}% with the causal half), of the BF16 peak",
                                100 * r.hfu, 100 * r.mfu, 100 * r.mfu_causal));
  line("idle",
       fmt::format("{:.1f}% of the span ({:.1f}% of busy time): pipeline bubble {:.1f}%, "
                   "exposed communication {:.1f}%",
                   100 * r.bubble_rate, 100 * r.bubble_fraction, 100 * r.pipeline_bubble_rate,
                   100 * (r.bubble_rate - r.pipeline_bubble_rate)));
  std::string ex;
  for (int k = 0; k < kNumCommKinds; ++k)
    ex += fmt::format("{}{} {:.2f} ms", k ? ", " : "", comm_kind_name(static_cast<CommKind>(k)),
                      ps_to_millis(r.exposed[k]));
  line("exposed communication", ex);
  int slow = 0;
  double worst = 1;
  for (double f : s.topology.gpu_slowdown) {
    slow += f != 1.0;
    worst = std::max(worst, f);
  }
  if (slow > 0)
    line("slow GPUs",
         fmt::format("{} (slowest x{:.2f}); all {} GPUs simulated", slow, worst, r.simulated_gpus));
  if (const int failed = s.topology.num_failed_nics(); failed > 0)
    line("failed NICs", fmt::format("{} (their GPUs use the next working NIC of the node); all {} "
                                    "GPUs simulated",
                                    failed, r.simulated_gpus));
  if (!s.topology.background_flows.empty())
    line(
        "background flows",
        fmt::format("{} (other jobs' traffic, sharing links max-min fairly); all {} GPUs simulated",
                    s.topology.background_flows.size(), r.simulated_gpus));
  const int failed_spine = s.topology.num_failed_spine_links();
  const auto degraded_spine = s.topology.spine_link_faults.size() - failed_spine;
  if (failed_spine > 0)
    line("failed spine links",
         fmt::format("{} (traffic takes the next spine both leaves reach); all {} GPUs simulated",
                     failed_spine, r.simulated_gpus));
  if (degraded_spine > 0)
    line("degraded spine links", fmt::format("{} (at their reduced rate); all {} GPUs simulated",
                                             degraded_spine, r.simulated_gpus));
  for (const auto& [k, v] : bounds_lines(r)) line(k, v);
  if (s.parallel.optimizer_offload)
    line("offload GPU share",
         fmt::format("{:.0f}% of the optimizer update", 100 * r.offload_gpu_share));
  if (s.published) {
    const hw::PublishedFigures& pub = *s.published;
    const double err = hw::published_error_pct(pub, r.tflops_per_gpu, ps_to_seconds(r.iteration));
    line("published", pub.tflops_per_gpu > 0
                          ? fmt::format("{:.1f} TFLOP/s per GPU ({}): error {:+.1f}%",
                                        pub.tflops_per_gpu, pub.source, err)
                          : fmt::format("iteration {:.2f} s ({}): throughput error {:+.1f}%",
                                        pub.iteration_time_s, pub.source, err));
  }
  o += fmt::format("\nmemory per GPU (GB)   {:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}\n", "weights",
                   "grads", "optim", "activ", "buffers", "peak", "fits");
  for (const DeviceMemory& m : r.memory) {
    o += fmt::format("  GPU {:<5} pp {:<5}  {:8.2f}{:8.2f}{:8.2f}{:8.2f}{:8.2f}{:8.2f}{:>8}\n",
                     m.gpu, m.pipeline_rank, gb(m.weights), gb(m.grads), gb(m.optimizer),
                     gb(m.activations), gb(m.buffers), gb(m.peak), m.fits ? "yes" : "NO");
  }
  if (r.fits) {
    o +=
        fmt::format("fits in {:.0f} GB per GPU\n", gb(r.memory.empty() ? 0 : r.memory[0].capacity));
  } else {
    o += fmt::format("DOES NOT FIT: the worst GPU needs {:.2f} GB more than its {:.0f} GB\n",
                     gb(r.worst_overflow), gb(r.memory[0].capacity));
  }
  return o;
}

}  // namespace

void add_scenario_sim_flags(CLI::App* sub, ScenarioSimOptions* opts) {
  sub->add_option("scenario", opts->scenario, "Scenario YAML (model, cluster, parallel config)");
  sub->add_option("--plan", opts->plan, "Re-simulate an emitted plan");
  sub->add_option("--trace", opts->trace,
                  "Write a Perfetto/Chrome trace JSON (gzip-compressed when the name ends in .gz)");
  sub->add_option("--trace-ranks", opts->trace_ranks,
                  "GPUs the trace shows: all, or a list of GPU indices (default: at most 8 of the "
                  "simulated GPUs, evenly spaced)");
  sub->add_option("--report", opts->report, "Write a self-contained HTML report");
  sub->add_flag("--overlap-grad-reduce", opts->overlap_grad_reduce,
                "Overlap the DP gradient reduction with the backward (bucketed); sets "
                "parallel.overlap_grad_reduce");
  sub->add_flag("--overlap-param-gather", opts->overlap_param_gather,
                "ZeRO-1/2: gather the updated weights under the next step's forwards, Megatron's "
                "overlap_param_gather (needs overlap_grad_reduce); sets "
                "parallel.overlap_param_gather");
  sub->add_flag("--overlap-p2p-comm", opts->overlap_p2p_comm,
                "Interleaved schedule over p > 1: post each direction's pipeline transfers one "
                "pass ahead and wait for them late, Megatron's overlap_p2p_comm; sets "
                "parallel.overlap_p2p_comm");
  sub->add_option("--grad-reduce-bytes", opts->grad_reduce_bytes,
                  "Bytes per gradient element in the buffer and the reduction (4 = fp32, 2 = "
                  "bf16); sets parallel.grad_reduce_in_fp32");
  sub->add_flag("--all-ranks", opts->all_ranks,
                "Simulate every GPU instead of one representative per pipeline rank");
  sub->add_option("--comm-compute-slowdown", opts->comm_slowdown,
                  "Share by which compute slows while NCCL kernels overlap it (0..0.9)");
}

namespace {

/// Checks the flags shared by the scenario and plan modes.
void check_common_flags(const ScenarioSimOptions& opts) {
  if (opts.format != "table" && opts.format != "json")
    throw ConfigError("", "--format", fmt::format("'{}'; expected table or json", opts.format));
  if (!opts.trace_ranks.empty() && opts.trace.empty())
    throw ConfigError("", "--trace-ranks", "selects what --trace writes; expected --trace FILE");
  if (opts.grad_reduce_bytes != 0 && opts.grad_reduce_bytes != 2 && opts.grad_reduce_bytes != 4)
    throw ConfigError("", "--grad-reduce-bytes",
                      fmt::format("{}; expected 2 or 4", opts.grad_reduce_bytes));
  if (!(opts.comm_slowdown >= 0 && opts.comm_slowdown <= 0.9))
    throw ConfigError("", "--comm-compute-slowdown",
                      fmt::format("{}; expected a share in [0, 0.9]", opts.comm_slowdown));
}

}  // namespace

// `simulate SCENARIO --report FILE`: the iteration the simulator ran, drawn by the shared
// renderer: each pipeline rank's representative GPU, its actions at their simulated times, the
// iteration's figures and the exposed communication by kind.
void write_iteration_report(const std::string& path, const hw::Scenario& s,
                            const IterationInput& in, const std::vector<ActionTiming>& timings,
                            const IterationResult& r) {
  const ParallelConfig& pc = in.parallel;
  ReportInput ri;
  ri.title = "pipewright simulate: one iteration";
  ri.memory_unit = "GB";
  ri.memory_total = true;
  if (!r.memory.empty()) ri.memory_limit = r.memory.front().capacity * 1e-9;
  ri.context = {
      {"scenario", s.file},
      {"cluster", fmt::format("{} GPUs ({})", pc.num_gpus(), s.cluster_profile)},
      {"configuration",
       fmt::format("t={}{} p={} d={} v={} micro-batch {} global batch {} schedule {}",
                   pc.tensor_parallel, cp_label(pc), pc.pipeline_parallel, pc.data_parallel,
                   pc.virtual_stages, pc.micro_batch_size, pc.global_batch_size, pc.schedule)},
      {"iteration",
       fmt::format("{:.1f} ms, MFU {:.1f}% (HFU {:.1f}%), {:.0f} tokens/s",
                   ps_to_seconds(r.iteration) * 1e3, 100 * r.mfu, 100 * r.hfu, r.tokens_per_sec)}};
  std::string comm;
  for (int k = 0; k < kNumCommKinds; ++k)
    comm +=
        fmt::format("{}{} {:.1f} ms", comm.empty() ? "" : ", ",
                    comm_kind_name(static_cast<CommKind>(k)), ps_to_seconds(r.exposed[k]) * 1e3);
  ri.context.emplace_back("exposed communication", comm);
  for (const auto& [k, v] : bounds_lines(r)) {
    if (k.empty())
      ri.context.back().second += "; " + v;  // the next link of the same entry
    else
      ri.context.emplace_back(k, v);
  }
  std::string mem;
  for (const DeviceMemory& m : r.memory)
    mem += fmt::format(
        "{}rank {}: {:.1f} GB (weights {:.1f}, grads {:.1f}, optimizer {:.1f}, "
        "activations {:.1f}) of {:.1f}",
        mem.empty() ? "" : "; ", m.pipeline_rank, m.peak * 1e-9, m.weights * 1e-9, m.grads * 1e-9,
        m.optimizer * 1e-9, m.activations * 1e-9, m.capacity * 1e-9);
  ri.context.emplace_back("peak memory per GPU", mem);
  ri.schedules.push_back(simulated_iteration_report(
      pc.schedule, "discrete-event simulation, one representative GPU per pipeline rank",
      in.schedule, timings, r));
  write_file_atomic(path, render_html(ri));
}

Trace selected_trace(const ScenarioSimOptions& opts, const IterationResult& r) {
  constexpr int kDefaultGpus = 8;
  const int n = static_cast<int>(r.trace.process_names.size());
  PW_ASSERT(static_cast<int>(r.memory.size()) == n, "one trace process per simulated GPU");
  std::vector<int> keep;
  if (opts.trace_ranks == "all" || (opts.trace_ranks.empty() && n <= kDefaultGpus)) {
    for (int i = 0; i < n; ++i) keep.push_back(i);
  } else if (opts.trace_ranks.empty()) {
    for (int k = 0; k < kDefaultGpus; ++k) {
      const int i = static_cast<int>(std::lround(double(k) * (n - 1) / (kDefaultGpus - 1)));
      if (keep.empty() || keep.back() != i) keep.push_back(i);
    }
    std::string gpus;
    for (int i : keep) gpus += (gpus.empty() ? "" : ",") + std::to_string(r.memory[i].gpu);
    std::fprintf(stderr,
                 "trace: %d of %d simulated GPUs (GPUs %s); --trace-ranks all writes every one\n",
                 static_cast<int>(keep.size()), n, gpus.c_str());
  } else {
    std::stringstream in(opts.trace_ranks);
    for (std::string item; std::getline(in, item, ',');) {
      char* end = nullptr;
      const long gpu = std::strtol(item.c_str(), &end, 10);
      int at = -1;
      if (!item.empty() && *end == '\0')
        for (int i = 0; i < n; ++i)
          if (r.memory[i].gpu == gpu) at = i;
      if (at < 0)
        throw ConfigError("", "--trace-ranks",
                          fmt::format("'{}' is not a simulated GPU; expected all or GPU indices "
                                      "from {} .. {} (one GPU per pipeline rank unless "
                                      "--all-ranks)",
                                      item, r.memory.front().gpu, r.memory.back().gpu));
      keep.push_back(at);
    }
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  }
  return select_processes(r.trace, keep);
}

void apply_config_flags(const ScenarioSimOptions& opts, ParallelConfig* c) {
  if (opts.overlap_grad_reduce) c->overlap_grad_reduce = true;
  if (opts.grad_reduce_bytes != 0) c->grad_reduce_in_fp32 = opts.grad_reduce_bytes == 4;
  if (opts.overlap_param_gather) {
    // The checks the scenario loader makes of the key (Megatron's assertions).
    if (!c->overlap_grad_reduce)
      throw ConfigError("", "--overlap-param-gather",
                        "without overlap_grad_reduce; expected --overlap-grad-reduce too (or "
                        "parallel.overlap_grad_reduce: true)");
    if (c->zero_stage < 1 || c->zero_stage > 2)
      throw ConfigError("", "--overlap-param-gather",
                        fmt::format("with zero_stage {}; expected the distributed optimizer "
                                    "(zero_stage 1 or 2)",
                                    c->zero_stage));
    c->overlap_param_gather = true;
  }
  if (opts.overlap_p2p_comm) {
    // The check the scenario loader makes of the key.
    if (!c->p2p_overlappable())
      throw ConfigError("", "--overlap-p2p-comm",
                        fmt::format("with schedule {}, p = {} and v = {}; expected the "
                                    "interleaved schedule over p > 1 (Megatron overlaps only its "
                                    "transfers)",
                                    c->schedule, c->pipeline_parallel, c->virtual_stages));
    c->overlap_p2p_comm = true;
  }
}

IterationOptions iteration_options(const ScenarioSimOptions& opts, bool flash_attention) {
  IterationOptions io;
  io.trace = !opts.trace.empty() || !opts.report.empty();  // the report draws memory over time
  io.representative = !opts.all_ranks;
  io.comm_compute_slowdown = opts.comm_slowdown;
  io.flash_attention = flash_attention;
  return io;
}

std::string scenario_summary(const hw::Scenario& s, const IterationResult& r, bool json,
                             const char* source) {
  return json ? to_json(s, r).dump(2) + "\n" : to_table(s, r, source);
}

int run_scenario_simulation(const ScenarioSimOptions& opts) {
  if (!opts.plan.empty()) {
    if (!opts.scenario.empty())
      throw ConfigError(
          "", "--plan",
          fmt::format("give a scenario or --plan, not both (got scenario '{}')", opts.scenario));
    check_common_flags(opts);
    return run_plan_simulation(opts);
  }
  if (opts.scenario.empty()) throw ConfigError("", "SCENARIO", "expected a scenario YAML file");
  check_common_flags(opts);
  hw::Scenario s = hw::load_scenario(opts.scenario);
  apply_config_flags(opts, &s.parallel);
  const IterationInput in = scenario_iteration_input(s);
  std::vector<ActionTiming> timings;
  const IterationResult r = simulate_iteration(in, iteration_options(opts, s.flash_attention),
                                               opts.report.empty() ? nullptr : &timings);
  if (!opts.trace.empty()) write_trace_file(opts.trace, selected_trace(opts, r));
  if (!opts.report.empty()) write_iteration_report(opts.report, s, in, timings, r);
  std::fputs(scenario_summary(s, r, opts.format == "json").c_str(), stdout);
  return 0;
}

}  // namespace pw::tools
