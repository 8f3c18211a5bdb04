// `pipewright compare`: schedules side by side (fixed costs or a scenario) as an HTML report,
// Markdown, a text table or JSON; and `--plan --measured`: predicted against measured.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "core/plan_io.h"
#include "executor/probe.h"
#include "hwmodels/profile.h"
#include "hwmodels/scenario.h"
#include "planner/schedules/adaptive.h"
#include "planner/schedules/generator.h"
#include "report/build.h"
#include "report/report.h"
#include "report/scenario_compare.h"
#include "tools/command.h"
#include "tools/pass_costs.h"

namespace pw::tools {
namespace {

constexpr const char* kDefaultSchedules =
    "1f1b,interleaved,zb-h1,zb-2p,v-min,v-half,v-zb,bitpipe,dualpipev";

struct CompareOptions {
  std::string scenario;
  std::string schedules = kDefaultSchedules;
  int pp = 4;
  int microbatches = 8;
  std::string costs;
  double memory_limit = 0;
  std::string report;
  std::string format = "table";
  std::string plan;
  std::string measured;
  bool no_tradeoff = false;
  CLI::App* app = nullptr;
};

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : list + ",") {
    if (c != ',') {
      if (!std::isspace(static_cast<unsigned char>(c))) cur += c;
      continue;
    }
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  }
  if (out.empty()) throw ConfigError("", "--schedules", "expected a comma-separated list of names");
  return out;
}

// --costs F=..,B=..,W=..,R=..,comm=..,mw=.. (times per 1F1B stage, default unit ms; the reader
// simulate uses too, tools/pass_costs.h).
UniformCosts parse_costs(const std::string& text) {
  const PassCostSpec p = parse_pass_costs(text, {true, true});
  auto ps = [](double ms) { return static_cast<TimePs>(std::llround(ms * 1e9)); };
  UniformCosts c{ps(p.f), ps(p.b), ps(p.w), ps(p.r), ps(p.comm)};
  c.mw_over_mb = p.mw.value_or(1.0);
  if (c.f <= 0 || c.b <= 0) throw ConfigError("", "--costs", "F and B must be positive");
  return c;
}

std::string costs_text(const UniformCosts& c) {
  auto t = [](TimePs v) { return fmt::format("{:g} ms", ps_to_millis(v)); };
  std::string s = fmt::format("F={}, B={}, W={}", t(c.f), t(c.b), t(c.w));
  if (c.r > 0) s += ", R=" + t(c.r);
  s += ", comm=" + t(c.comm);
  return s + fmt::format(", M_W/M_B={:g}", c.mw_over_mb);
}

// The adaptive scheduler's memory/bubble trade-off for the same costs (V placement).
std::optional<Curve> adaptive_curve(int p, int m, const UniformCosts& uc) {
  if (p < 2) return std::nullopt;
  const CostTable t = layer_scaled_cost_table(v_placement(p), uc);
  TimePs ideal = 0;
  for (int d = 0; d < p; ++d) {
    TimePs busy = 0;
    for (int s : {d, 2 * p - 1 - d})
      busy +=
          m * (t.time(s, ActionKind::kF) + t.time(s, ActionKind::kB) + t.time(s, ActionKind::kW));
    ideal = std::max(ideal, busy);
  }
  const TradeoffCurve tc = adaptive_tradeoff(p, m, t);
  if (tc.points.empty()) return std::nullopt;
  Curve c;
  c.title =
      fmt::format("Adaptive V-shape schedule: activation memory vs bubble (p={}, m={})", p, m);
  c.x_label = "peak activation memory (M_B)";
  c.y_label = "bubble rate";
  c.y_is_fraction = true;
  for (const TradeoffPoint& pt : tc.points) {
    const double cost = static_cast<double>(pt.cost);
    const double bubble = cost > 0 ? (cost - static_cast<double>(ideal)) / cost : 0;
    c.points.push_back({pt.peak_memory, std::max(0.0, bubble),
                        fmt::format("{:.1f}%", std::max(0.0, bubble) * 100)});
  }
  return c;
}

ReportInput fixed_cost_input(const CompareOptions& o) {
  if (o.pp < 1) throw ConfigError("", "--pp", "expected a positive pipeline size");
  if (o.microbatches < 1) throw ConfigError("", "--microbatches", "expected a positive count");
  if (o.memory_limit < 0) throw ConfigError("", "--memory-limit", "expected a limit >= 0");
  const UniformCosts uc = parse_costs(o.costs);
  // Every compared schedule runs at most 4 chunks per device, F + B + W (+ R) each.
  check_clock_headroom(16.0 * o.pp * o.microbatches, uc, "--costs");
  GeneratorParams gp;
  gp.p = o.pp;
  gp.m = o.microbatches;
  gp.costs = uc;
  gp.memory_limit = o.memory_limit;
  ReportInput in;
  in.title = fmt::format("pipewright compare: p={}, m={}", o.pp, o.microbatches);
  in.context = {{"p", std::to_string(o.pp)},
                {"m", std::to_string(o.microbatches)},
                {"costs per 1F1B stage", costs_text(uc)},
                {"memory unit", "M_B = one microbatch's activations of a 1F1B stage"}};
  if (o.memory_limit > 0)
    in.context.push_back({"memory limit", fmt::format("{:g} M_B", o.memory_limit)});
  in.memory_unit = "M_B";
  in.memory_limit = o.memory_limit;
  in.schedules = build_schedule_reports(
      default_registry(), split_names(o.schedules), gp,
      [&uc](const Placement& pl) { return layer_scaled_cost_table(pl, uc); });
  if (o.memory_limit > 0) {
    for (ScheduleReport& s : in.schedules) {
      if (!s.ok()) continue;
      double peak = 0;
      for (const DeviceStats& d : s.result.device) peak = std::max(peak, d.peak_memory);
      s.fits = peak <= o.memory_limit + 1e-9;
    }
  }
  if (!o.no_tradeoff) {
    try {
      if (auto c = adaptive_curve(o.pp, o.microbatches, uc)) in.curves.push_back(*c);
    } catch (const ConfigError&) {
      // The curve is an extra: a size the adaptive search rejects leaves it out.
    }
  }
  return in;
}

/// The run's ranks' machine probes (executor/probe.h) set against the one calibration took on
/// the core its figures come from (the plan's profile's calibration_probe): a run whose slowest
/// rank reads the probe 1.2x calibration's ran on a machine 1.2x slower than the one the plan
/// was priced for, whatever the model does.
std::string machine_line(const Plan& plan, const MeasuredRun& run, const std::string& plan_file) {
  std::string ranks;
  double slowest = 0;
  for (const double ms : run.probe_ms) {
    ranks += fmt::format("{}{:.2f}", ranks.empty() ? "" : ", ", ms);
    slowest = std::max(slowest, ms);
  }
  std::string out = fmt::format(
      "probe (executor layer forward h={}, {} tokens) {} ms on the "
      "run's ranks",
      exec::kProbeHidden, exec::kProbeTokens, ranks);
  double calibrated = 0;
  try {
    const std::string dir = std::filesystem::path(plan_file).parent_path().string();
    calibrated = hw::resolve_profile(plan.cluster, dir, plan_file, "cluster").calibration_probe_ms;
  } catch (const ConfigError&) {
    return out + fmt::format("; the plan's profile '{}' is not found here", plan.cluster);
  }
  if (calibrated <= 0) return out + "; the plan's profile records no calibration probe";
  return out + fmt::format(
                   ", {:.2f} ms on the core the profile was calibrated on: the slowest "
                   "rank took {:.2f}x that",
                   calibrated, slowest / calibrated);
}

ReportInput measured_input(const CompareOptions& o) {
  if (o.plan.empty() || o.measured.empty())
    throw ConfigError("", o.plan.empty() ? "--plan" : "--measured",
                      "--plan and --measured go together");
  const Plan plan = load_plan(o.plan);
  const MeasuredRun run = load_measured_run(o.measured);
  ReportInput in;
  in.title = "pipewright compare: predicted vs measured";
  in.context = {{"plan", o.plan},
                {"measured", o.measured},
                {"schedule", plan.schedule.name},
                {"backend", run.backend},
                {"device", run.device},
                {"iterations", std::to_string(run.iterations)}};
  // The model prices Adam's step: say so where the run stepped something else.
  if (!run.optimizer.empty())
    in.context.emplace_back("optimizer", run.optimizer == "adam"
                                             ? run.optimizer
                                             : run.optimizer + " (the plan prices Adam's step)");
  if (!run.probe_ms.empty()) in.context.emplace_back("machine", machine_line(plan, run, o.plan));
  in.measured = compare_run(plan, run, o.measured);
  return in;
}

int run_compare(const CompareOptions& o) {
  static const std::vector<std::string> kFormats = {"table", "markdown", "json", "html"};
  if (std::find(kFormats.begin(), kFormats.end(), o.format) == kFormats.end())
    throw ConfigError("", "--format",
                      fmt::format("unknown format '{}' (did you mean '{}'?); expected table, "
                                  "markdown, json or html",
                                  o.format, nearest_name(o.format, kFormats)));
  ReportInput in;
  const auto given = [&](const char* flag) { return o.app->count(flag) > 0; };
  require_positive_if_given(*o.app, "--memory-limit", o.memory_limit,
                            o.scenario.empty() ? "no limit" : "the GPU's memory");
  if (!o.plan.empty() || !o.measured.empty()) {
    if (!o.scenario.empty())
      throw ConfigError("", "--plan", "give a scenario or --plan/--measured, not both");
    // The schedule comparison's flags would be silently ignored here.
    for (const char* flag :
         {"--schedules", "--pp", "--microbatches", "--costs", "--memory-limit", "--no-tradeoff"})
      if (given(flag))
        throw ConfigError("", flag,
                          "applies to comparing schedules; --plan/--measured compares one plan's "
                          "prediction with its measured run");
    in = measured_input(o);
  } else if (!o.scenario.empty()) {
    for (const char* flag : {"--pp", "--microbatches", "--costs"})
      if (given(flag))
        throw ConfigError("", flag, "comes from the scenario file; drop it or drop the scenario");
    if (given("--no-tradeoff"))
      throw ConfigError("", "--no-tradeoff",
                        "applies without a scenario (the adaptive scheduler's curve under fixed "
                        "costs); a scenario's comparison draws none");
    if (o.memory_limit < 0) throw ConfigError("", "--memory-limit", "expected GB >= 0");
    const hw::Scenario sc = hw::load_scenario(o.scenario);
    hw::require_uniform_cluster(sc, "compare");
    in = compare_on_scenario(sc, split_names(o.schedules), o.memory_limit * 1e9);
  } else {
    in = fixed_cost_input(o);
  }
  if (!o.report.empty()) write_file_atomic(o.report, render_html(in));
  std::fputs(render_report(in, o.format).c_str(), stdout);
  return 0;
}

}  // namespace

void register_compare(CLI::App& app, int* status) {
  auto* o = new CompareOptions;  // lives as long as the app (one process, one parse)
  auto* sub = app.add_subcommand(
      "compare",
      "Compare schedules side by side (HTML report with timelines, Markdown, table, JSON), or a "
      "plan's prediction with a measured run");
  o->app = sub;
  sub->add_option("scenario", o->scenario,
                  "scenario YAML: schedules scored with its model, cluster and parallel "
                  "configuration (without it: --pp, --microbatches, --costs)");
  sub->add_option("--schedules", o->schedules, "comma-separated generator names")
      ->default_str(kDefaultSchedules);
  sub->add_option("--pp", o->pp, "pipeline devices p (no scenario)")->default_str("4");
  sub->add_option("--microbatches", o->microbatches, "microbatches m (no scenario)")
      ->default_str("8");
  sub->add_option("--costs", o->costs,
                  "per-1F1B-stage costs, e.g. F=1,B=1,W=1,comm=0.1,R=1,mw=1 (times in ms unless "
                  "suffixed ps/ns/us/ms/s; mw = M_W/M_B, the share B keeps until W)")
      ->default_str("F=1,B=1,W=1,comm=0,mw=1");
  sub->add_option("--memory-limit", o->memory_limit,
                  "activation limit per device in M_B (no scenario; feeds memory-aware "
                  "generators and the fits column), or GB per GPU with a scenario");
  sub->add_option("--report", o->report, "write a self-contained HTML report to this file");
  sub->add_option("--format", o->format, "stdout format: table, markdown, json or html")
      ->default_str("table");
  sub->add_option("--plan", o->plan, "plan (YAML/JSON) whose prediction is compared");
  sub->add_option("--measured", o->measured, "measured run (YAML/JSON) of that plan");
  sub->add_flag("--no-tradeoff", o->no_tradeoff,
                "leave out the adaptive scheduler's memory/bubble curve");
  sub->callback([o, status] { *status = run_compare(*o); });
}

}  // namespace pw::tools
