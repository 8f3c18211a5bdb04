// Plan mode of `pipewright simulate --plan plan.yaml`: re-simulates an emitted plan's own
// schedule, rebuilt on its hardware profile when it has one, otherwise with its predicted
// per-action times as costs, and compares the result with the plan's prediction.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/dependency.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/plan_io.h"
#include "core/trace.h"
#include "hwmodels/profile.h"
#include "hwmodels/topology.h"
#include "hwmodels/transformer.h"
#include "sim/engine.h"
#include "sim/iteration.h"
#include "sim/plan_prediction.h"
#include "sim/schedule_sim.h"
#include "sim/task_graph.h"
#include "tools/simulate_scenario.h"

namespace pw::tools {
namespace {

constexpr TimePs kNever = std::numeric_limits<TimePs>::max();

double ms(TimePs t) { return static_cast<double>(t) / static_cast<double>(kPsPerMilli); }

/// "plan predicted X, re-simulated Y, difference Z%" (Z relative to the prediction).
std::string comparison_line(TimePs predicted, TimePs simulated) {
  if (predicted <= 0)
    return fmt::format(
        "plan predicted nothing (predicted_iteration_ps is 0), re-simulated {:.3f} ms\n",
        ms(simulated));
  const double diff = 100.0 * (static_cast<double>(simulated) - static_cast<double>(predicted)) /
                      static_cast<double>(predicted);
  return fmt::format("plan predicted {:.3f} ms, re-simulated {:.3f} ms, difference {:+.2f}%\n",
                     ms(predicted), ms(simulated), diff);
}

void add_comparison(nlohmann::ordered_json* j, const std::string& file, const char* mode,
                    TimePs predicted, TimePs simulated) {
  (*j)["plan"] = file;
  (*j)["resimulation"] = mode;
  (*j)["predicted_iteration_ms"] = ms(predicted);
  (*j)["resimulated_iteration_ms"] = ms(simulated);
  if (predicted > 0) {
    (*j)["difference_pct"] = 100.0 *
                             (static_cast<double>(simulated) - static_cast<double>(predicted)) /
                             static_cast<double>(predicted);
  } else {
    (*j)["difference_pct"] = nullptr;
  }
}

bool complete_shape(const ModelShape& m) {
  return m.num_layers > 0 && m.hidden_size > 0 && m.num_attention_heads > 0 && m.seq_length > 0 &&
         m.vocab_size > 0;
}

// --- rebuilt on the plan's hardware profile ------------------------------------------------------

/// The scenario the plan was made for, with its profile resolved (run_rebuilt fills in the
/// model, configuration and topology). Checks what the simulator would otherwise assert.
hw::Scenario plan_scenario(const Plan& plan, const std::string& file) {
  const ParallelConfig& c = plan.config;
  const Placement& pl = plan.schedule.placement;
  auto need = [&](bool ok, const char* key, const std::string& msg) {
    if (!ok) throw ConfigError(file, key, msg);
  };
  need(c.tensor_parallel >= 1 && c.data_parallel >= 1 && c.micro_batch_size >= 1, "config",
       "expected tensor_parallel, data_parallel and micro_batch_size >= 1");
  need(c.pipeline_parallel == pl.num_devices, "config.pipeline_parallel",
       fmt::format("is {} but the schedule has {} devices; expected them equal",
                   c.pipeline_parallel, pl.num_devices));
  need(pl.num_layers == plan.model.num_layers, "schedule.placement.num_layers",
       fmt::format("is {} but model.num_layers is {}; expected them equal", pl.num_layers,
                   plan.model.num_layers));
  need(plan.model.hidden_size % plan.model.num_attention_heads == 0, "model.num_attention_heads",
       fmt::format("{} does not divide hidden_size {}", plan.model.num_attention_heads,
                   plan.model.hidden_size));
  need(plan.model.num_attention_heads % c.tensor_parallel == 0, "config.tensor_parallel",
       fmt::format("{} does not divide num_attention_heads {}; expected a divisor",
                   c.tensor_parallel, plan.model.num_attention_heads));
  need(c.recompute == "none" || c.recompute == "selective" || c.recompute == "full",
       "config.recompute", fmt::format("'{}'; expected none, selective or full", c.recompute));
  need(c.context_parallel <= 1 || hw::attention_window(plan.model) == 0, "config.context_parallel",
       fmt::format("{} with a sliding attention window (model.window_size {}): context "
                   "parallelism over a window is not modelled; expected 1",
                   c.context_parallel, plan.model.window_size));
  need(c.zero_stage >= 0 && c.zero_stage <= 3, "config.zero_stage",
       fmt::format("{}; expected 0, 1, 2 or 3", c.zero_stage));
  const long long per_step = 1LL * c.micro_batch_size * c.data_parallel;
  need(c.global_batch_size % per_step == 0 &&
           c.global_batch_size / per_step == plan.schedule.num_microbatches,
       "config.global_batch_size",
       fmt::format("{} is not micro_batch_size x data_parallel x the schedule's {} microbatches "
                   "= {}",
                   c.global_batch_size, plan.schedule.num_microbatches,
                   per_step * plan.schedule.num_microbatches));
  // A stage may hold no transformer layer (a layout's "E|" or "|L" ends, the loss alone after
  // the multi-token prediction depths' stage, an empty middle stage), as the scenario path has it.
  for (const StageInfo& st : pl.stages)
    need(st.layer_end >= st.layer_begin, "schedule.placement",
         "a stage ends before it begins; expected layer_end >= layer_begin");
  hw::Scenario s;
  s.file = file;
  const std::string dir = std::filesystem::path(file).parent_path().string();
  s.profile = hw::resolve_profile(plan.cluster, dir, file, "cluster");
  const long long gpus =
      1LL * c.tensor_parallel * c.context_parallel * c.pipeline_parallel * c.data_parallel;
  const int per_node = std::max(1, s.profile.node.gpus_per_node);
  need((gpus + per_node - 1) / per_node <= 1'000'000, "config",
       fmt::format("t*p*d = {} GPUs is too many", gpus));
  return s;
}

int run_rebuilt(const ScenarioSimOptions& opts, const Plan& plan) {
  hw::Scenario s = plan_scenario(plan, opts.plan);
  // The plan's own (lowered) schedule, not a regenerated one, with the input `plan --emit`
  // predicted it with (sim/plan_prediction.h); the summary shows what was simulated.
  ParallelConfig config = plan.config;
  apply_config_flags(opts, &config);
  const IterationInput in = plan_iteration_input(plan.model, config, s.profile, plan.schedule);
  s.model = in.model;
  s.parallel = in.parallel;
  s.topology = in.topology;
  s.flash_attention = plan.flash_attention;
  std::vector<ActionTiming> times;
  const IterationResult r =
      simulate_iteration(in, iteration_options(opts, plan.flash_attention), &times);
  const TimingAgreement agree = compare_timings(plan.schedule, plan.predicted, times);
  if (!opts.trace.empty()) write_trace_file(opts.trace, selected_trace(opts, r));
  if (!opts.report.empty()) {
    s.cluster_profile = plan.cluster;
    write_iteration_report(opts.report, s, in, times, r);
  }
  std::string text;
  if (opts.format == "json") {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(scenario_summary(s, r, true));
    add_comparison(&j, opts.plan, "rebuilt", plan.predicted_iteration, r.iteration);
    j["predicted_actions"] = {{"compared", agree.compared},
                              {"identical", agree.exact},
                              {"worst_difference_ms", ms(agree.worst)}};
    text = j.dump(2) + "\n";
  } else {
    text = scenario_summary(s, r, false, "plan");
    text += fmt::format("{:<28}rebuilt on profile '{}' ({} GPU(s) per node)\n", "costs",
                        plan.cluster, s.topology.node.gpus_per_node);
    if (agree.compared > 0)
      text += fmt::format("{:<28}{} of {} re-simulated identically, worst difference {:.3f} ms\n",
                          "predicted action times", agree.exact, agree.compared, ms(agree.worst));
    text += comparison_line(plan.predicted_iteration, r.iteration);
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

// --- fixed per-action costs ---------------------------------------------------------------------

struct FixedRun {
  std::vector<TimePs> start, end;  ///< per action id
  std::vector<TimePs> first, last, busy;
  TimePs makespan = 0, cost = 0, ideal = 0;
  double bubble_rate = 0, bubble_fraction = 0;
};

/// "device 1 action 4 (F stage 1 mb 2)" for error messages.
std::string where(const DependencyGraph& g, std::size_t id) {
  const int d = g.device_of[id];
  return fmt::format("device {} action {} ({})", d, static_cast<int>(id) - g.device_begin[d],
                     describe_action(g.action[id]));
}

/// Predicted [start, end) of every action, numbered like `g`; throws naming `predicted` when an
/// action has none.
void predicted_intervals(const Plan& plan, const DependencyGraph& g, const std::string& file,
                         std::vector<TimePs>* ps, std::vector<TimePs>* pe) {
  ps->assign(g.size(), -1);
  pe->assign(g.size(), -1);
  for (const ActionTiming& t : plan.predicted) {
    const std::size_t id = static_cast<std::size_t>(g.device_begin[t.device] + t.index);
    (*ps)[id] = t.start;
    (*pe)[id] = t.end;
  }
  for (std::size_t id = 0; id < g.size(); ++id)
    if ((*ps)[id] < 0)
      throw ConfigError(file, "predicted",
                        fmt::format("no timing for {}; expected one [device, index, start, end] "
                                    "per action to re-simulate a plan without a hardware profile",
                                    where(g, id)));
}

/// Hop latency per sending stage: the smallest predicted gap across that stage boundary (0 where
/// no transfer leaves it). Throws naming `predicted` when a prerequisite ends after its
/// dependant starts.
std::vector<TimePs> inferred_hops(const DependencyGraph& g, int num_stages,
                                  const std::vector<TimePs>& ps, const std::vector<TimePs>& pe,
                                  const std::string& file) {
  std::vector<TimePs> hop(static_cast<std::size_t>(num_stages), kNever);
  for (std::size_t id = 0; id < g.size(); ++id) {
    for (int k = g.dep_begin[id]; k < g.dep_begin[id + 1]; ++k) {
      const std::size_t dep = static_cast<std::size_t>(g.dep[k]);
      const TimePs gap = ps[id] - pe[dep];
      if (gap < 0)
        throw ConfigError(file, "predicted",
                          fmt::format("{} starts at {} ps, before its prerequisite {} ends at {} "
                                      "ps; expected predicted times that respect dependencies",
                                      where(g, id), ps[id], where(g, dep), pe[dep]));
      if (g.dep_hop[k] >= 0) hop[g.dep_hop[k]] = std::min(hop[g.dep_hop[k]], gap);
    }
  }
  for (TimePs& h : hop)
    if (h == kNever) h = 0;
  return hop;
}

/// Per-device statistics as the evaluator defines them (compute kinds count as busy; the span
/// runs from the first compute start to the last end).
void fixed_stats(const DependencyGraph& g, int num_devices, FixedRun* r) {
  r->first.assign(num_devices, kNever);
  r->last.assign(num_devices, 0);
  r->busy.assign(num_devices, 0);
  for (std::size_t id = 0; id < g.size(); ++id) {
    const int d = g.device_of[id];
    if (is_compute(g.action[id].kind)) {
      r->busy[d] += r->end[id] - r->start[id];
      r->first[d] = std::min(r->first[d], r->start[id]);
    }
    r->last[d] = std::max(r->last[d], r->end[id]);
  }
  TimePs first = kNever, last = 0;
  for (int d = 0; d < num_devices; ++d) {
    if (r->first[d] == kNever) r->first[d] = 0;
    first = std::min(first, r->first[d]);
    last = std::max(last, r->last[d]);
    r->cost = std::max(r->cost, r->last[d] - r->first[d]);
    r->ideal = std::max(r->ideal, r->busy[d]);
  }
  r->makespan = last > first ? last - first : 0;
  const double cost = static_cast<double>(r->cost), ideal = static_cast<double>(r->ideal);
  r->bubble_rate = cost > 0 ? (cost - ideal) / cost : 0.0;
  r->bubble_fraction = ideal > 0 ? (cost - ideal) / ideal : 0.0;
}

/// Runs the plan's schedule on the discrete-event engine: one task per action lasting its
/// predicted duration; every cross-device prerequisite waits its stage boundary's inferred hop
/// latency (the evaluator starts an action at max(device clock, prerequisite end + hop), so the
/// smallest gap is the hop whenever some transfer binds, and any larger value it could be
/// changes no start).
FixedRun run_fixed(const Plan& plan, const std::string& file) {
  const DependencyGraph g = build_dependency_graph(plan.schedule, file);
  const int D = plan.schedule.placement.num_devices;
  std::vector<TimePs> ps, pe;
  predicted_intervals(plan, g, file, &ps, &pe);
  const std::vector<TimePs> hop =
      inferred_hops(g, plan.schedule.placement.num_stages(), ps, pe, file);
  std::vector<TimePs> duration(g.size());
  for (std::size_t id = 0; id < g.size(); ++id) duration[id] = pe[id] - ps[id];
  des::TaskGraph tg;
  des::build_timed_schedule_graph(g, duration, hop, &tg);
  des::Engine engine;
  const des::EngineResult& er = engine.run(tg);
  PW_ASSERT(er.completed, "a validated schedule left actions unrun");
  FixedRun r;
  r.start = er.start;
  r.end = er.end;
  fixed_stats(g, D, &r);
  return r;
}

/// One process per device, one compute thread, a slice per action, flow arrows across devices.
Trace fixed_trace(const Plan& plan, const FixedRun& r) {
  const DependencyGraph g = build_dependency_graph(plan.schedule);
  Trace t;
  const int D = plan.schedule.placement.num_devices;
  for (int d = 0; d < D; ++d) {
    t.process_names.push_back(fmt::format("device {}", d));
    t.thread_names.push_back({"compute"});
  }
  std::vector<std::int32_t> slice_of(g.size());
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Action& a = g.action[id];
    TraceSlice s;
    s.pid = g.device_of[id];
    s.name = fmt::format("{}{}", action_kind_name(a.kind), a.microbatch);
    s.category = is_compute(a.kind) ? "compute" : "pp";
    s.start = r.start[id];
    s.duration = r.end[id] - r.start[id];
    s.stage = a.stage;
    s.microbatch = a.microbatch;
    slice_of[id] = static_cast<std::int32_t>(t.slices.size());
    t.slices.push_back(std::move(s));
  }
  std::int32_t flow = 0;
  for (std::size_t id = 0; id < g.size(); ++id) {
    for (int k = g.dep_begin[id]; k < g.dep_begin[id + 1]; ++k) {
      if (g.dep_hop[k] < 0) continue;
      TraceSlice& from = t.slices[slice_of[g.dep[k]]];
      TraceSlice& to = t.slices[slice_of[id]];
      if (from.flow_out >= 0 || to.flow_in >= 0) continue;
      from.flow_out = to.flow_in = flow++;
    }
  }
  return t;
}

int run_fixed_costs(const ScenarioSimOptions& opts, const Plan& plan, const std::string& why) {
  if (plan.predicted.empty())
    throw ConfigError(opts.plan, "predicted",
                      fmt::format("is empty and {}; expected per-action predicted times (or a "
                                  "complete model shape and a hardware profile in `cluster`)",
                                  why));
  const ScenarioSimOptions defaults;
  const std::pair<const char*, bool> hw_flags[] = {
      {"--overlap-grad-reduce", opts.overlap_grad_reduce},
      {"--overlap-param-gather", opts.overlap_param_gather},
      {"--overlap-p2p-comm", opts.overlap_p2p_comm},
      {"--grad-reduce-bytes", opts.grad_reduce_bytes != defaults.grad_reduce_bytes},
      {"--all-ranks", opts.all_ranks},
      {"--comm-compute-slowdown", opts.comm_slowdown != defaults.comm_slowdown},
      {"--report", !opts.report.empty()},
      {"--trace-ranks", !opts.trace_ranks.empty()}};
  for (const auto& [flag, given] : hw_flags)
    if (given)
      throw ConfigError(opts.plan, flag,
                        fmt::format("applies only to a plan rebuilt on a hardware profile, and "
                                    "{}; expected the flag to be absent",
                                    why));
  const FixedRun r = run_fixed(plan, opts.plan);
  if (!opts.trace.empty()) write_trace_file(opts.trace, fixed_trace(plan, r));
  const Schedule& s = plan.schedule;
  const int D = s.placement.num_devices;
  const int chunks = s.placement.num_stages() / std::max(1, D);
  std::string text;
  if (opts.format == "json") {
    nlohmann::ordered_json j;
    add_comparison(&j, opts.plan, "fixed-costs", plan.predicted_iteration, r.makespan);
    j["why_fixed_costs"] = why;
    j["model"] = plan.model.name;
    j["schedule"] = s.name;
    j["pipeline_parallel"] = D;
    j["virtual_stages"] = chunks;
    j["microbatches"] = s.num_microbatches;
    j["actions"] = s.total_actions();
    j["iteration_ms"] = ms(r.makespan);
    j["bubble_rate"] = r.bubble_rate;
    j["bubble_fraction"] = r.bubble_fraction;
    nlohmann::ordered_json devs = nlohmann::ordered_json::array();
    for (int d = 0; d < D; ++d)
      devs.push_back({{"device", d},
                      {"first_start_ms", ms(r.first[d])},
                      {"last_end_ms", ms(r.last[d])},
                      {"busy_ms", ms(r.busy[d])},
                      {"idle_ms", ms(r.makespan - r.busy[d])}});
    j["devices"] = devs;
    text = j.dump(2) + "\n";
  } else {
    auto line = [&](const std::string& k, const std::string& v) {
      text += fmt::format("{:<28}{}\n", k, v);
    };
    line("plan", opts.plan);
    line("configuration",
         fmt::format("p={} v={} m={} schedule={} model={} ({} actions)", D, chunks,
                     s.num_microbatches, s.name,
                     plan.model.name.empty() ? "custom" : plan.model.name, s.total_actions()));
    line("costs", "the plan's predicted per-action times (" + why + ")");
    line("iteration time", fmt::format("{:.3f} ms", ms(r.makespan)));
    line("bubble", fmt::format("{:.1f}% of the span ({:.1f}% of busy time)", 100 * r.bubble_rate,
                               100 * r.bubble_fraction));
    text += fmt::format("\n{:>6} {:>16} {:>16} {:>16} {:>16}\n", "device", "first_start (ms)",
                        "last_end (ms)", "busy (ms)", "idle (ms)");
    for (int d = 0; d < D; ++d)
      text += fmt::format("{:>6} {:>16.3f} {:>16.3f} {:>16.3f} {:>16.3f}\n", d, ms(r.first[d]),
                          ms(r.last[d]), ms(r.busy[d]), ms(r.makespan - r.busy[d]));
    text += comparison_line(plan.predicted_iteration, r.makespan);
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

int run_plan_simulation(const ScenarioSimOptions& opts) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(opts.plan, ec))
    throw ConfigError(opts.plan, "--plan", "no such plan file; expected a YAML or JSON plan");
  const Plan plan = load_plan(opts.plan);  // format, version, checksum, legality, timings
  if (!complete_shape(plan.model))
    return run_fixed_costs(opts, plan, "the model shape is incomplete");
  if (plan.cluster.empty()) return run_fixed_costs(opts, plan, "the plan names no cluster profile");
  return run_rebuilt(opts, plan);
}

}  // namespace pw::tools
