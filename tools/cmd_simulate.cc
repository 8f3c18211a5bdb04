// `pipewright simulate`: generate (or import) a pipeline schedule, evaluate it with fixed pass
// costs and print makespan, bubble (both conventions), per-device busy/idle time and peak
// activations; optionally draw it, export PyTorch CSV and emit a plan. With a scenario file or
// --plan it hands over to the scenario (discrete-event) mode in tools/simulate_scenario.cc.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "core/lowering.h"
#include "core/plan_io.h"
#include "core/pytorch_csv.h"
#include "core/schedule_io.h"
#include "hwmodels/model_presets.h"
#include "planner/schedules/generator.h"
#include "report/build.h"
#include "report/report.h"
#include "sim/evaluator.h"
#include "tools/command.h"
#include "tools/pass_costs.h"
#include "tools/simulate_scenario.h"

namespace pw::tools {
namespace {

struct SimOptions {
  std::string schedule;
  std::string pp, microbatches, chunks, group_size;  // parsed by hand for one-line errors
  std::string costs = "F=1,B=1,W=1";
  double memory_limit = 0;
  double mw_ratio = 0;
  std::string format = "table";
  bool diagram = false;
  std::string export_csv, csv_form = "compute_only", import_csv, emit;
  std::string report;       ///< --report FILE: the shared HTML renderer (report/)
  std::string model;        ///< --model NAME: a hwmodels preset written into emitted plans
  std::string model_shape;  ///< --model-shape hidden=..,heads=..,...: overrides --model's keys
};

/// The model an emitted plan carries (and the layer count the placement spans).
struct ModelSpec {
  ModelShape shape;  ///< num_layers 0 = no model given (one layer per stage, name "custom")
  int micro_batch_size = 1;
};

/// Pass costs in the user's unit (milliseconds-like; F=1 means one unit).
struct CostSpec {
  double f = 1, b = 1, w = 1, r = 0, comm = 0;
};

constexpr int kMaxDevices = 4096;
constexpr int kMaxMicrobatches = 1'000'000;
constexpr long long kMaxPasses = 20'000'000;  // stages * microbatches

int parse_count(const std::string& text, const char* flag, int lo, int hi) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
    throw ConfigError("", flag,
                      fmt::format("expected an integer in {}..{}, got '{}'", lo, hi, text));
  return v;
}

/// Splits "KEY=VALUE,KEY=VALUE" (the --model-shape syntax) and hands each value text
/// to set(index of KEY in `keys`, value text); an item without '=' or an unknown key is a
/// ConfigError naming `flag`, the expected `what` and the nearest valid key.
template <typename Set>
void for_each_item(const std::string& text, const char* flag, const char* what,
                   const std::vector<std::string>& keys, Set set) {
  std::string_view rest(text);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw ConfigError("", flag,
                        fmt::format("expected KEY={} items (keys {}), got '{}'", what,
                                    fmt::join(keys, ", "), item));
    const std::string key = item.substr(0, eq);
    const auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end())
      throw ConfigError("", flag,
                        fmt::format("unknown key '{}' (did you mean '{}'?); valid: {}", key,
                                    nearest_name(key, keys), fmt::join(keys, ", ")));
    set(static_cast<std::size_t>(it - keys.begin()), key, item.substr(eq + 1));
  }
}

// Plain numbers in the unit the output reports (tools/pass_costs.h, shared with compare).
CostSpec parse_costs(const std::string& text) {
  const PassCostSpec p = parse_pass_costs(text, {});
  const CostSpec c{p.f, p.b, p.w, p.r, p.comm};
  if (c.f + c.b + c.w <= 0) throw ConfigError("", "--costs", "expected F, B or W to be positive");
  return c;
}

int parse_shape_value(const std::string& text, const std::string& key) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 1 || v > 10'000'000)
    throw ConfigError("", "--model-shape",
                      fmt::format("expected a positive integer for {}, got '{}'", key, text));
  return v;
}

/// --model NAME (hwmodels preset) then --model-shape KEY=INT items (hidden, heads, seq, vocab,
/// layers, ffn, microbatch). A shape given without a preset needs hidden, heads, seq, vocab and
/// layers; ffn defaults to 4 * hidden.
ModelSpec parse_model(const SimOptions& o) {
  ModelSpec m;
  if (!o.model.empty()) {
    const hw::ModelPreset* p = hw::find_model_preset(o.model);
    if (p == nullptr)
      throw ConfigError("", "--model",
                        fmt::format("unknown preset '{}' (did you mean '{}'?); expected one of: {}",
                                    o.model, nearest_name(o.model, hw::model_preset_names()),
                                    fmt::join(hw::model_preset_names(), ", ")));
    m.shape = p->shape;
  }
  if (o.model_shape.empty()) return m;
  static const std::vector<std::string> kKeys = {"hidden", "heads", "seq",       "vocab",
                                                 "layers", "ffn",   "microbatch"};
  ModelShape& sh = m.shape;
  if (o.model.empty()) sh.name = "custom";
  int* const targets[] = {&sh.hidden_size,    &sh.num_attention_heads, &sh.seq_length,
                          &sh.vocab_size,     &sh.num_layers,          &sh.ffn_hidden_size,
                          &m.micro_batch_size};
  for_each_item(o.model_shape, "--model-shape", "INTEGER", kKeys,
                [&](std::size_t k, const std::string& key, const std::string& value) {
                  *targets[k] = parse_shape_value(value, key);
                });
  const std::pair<const char*, int> required[] = {{"hidden", sh.hidden_size},
                                                  {"heads", sh.num_attention_heads},
                                                  {"seq", sh.seq_length},
                                                  {"vocab", sh.vocab_size},
                                                  {"layers", sh.num_layers}};
  for (const auto& [key, v] : required)
    if (v <= 0)
      throw ConfigError("", "--model-shape",
                        fmt::format("missing {}; expected hidden, heads, seq, vocab and layers "
                                    "(or --model PRESET)",
                                    key));
  if (sh.hidden_size % sh.num_attention_heads != 0)
    throw ConfigError("", "--model-shape",
                      fmt::format("heads {} does not divide hidden {}; expected a divisor",
                                  sh.num_attention_heads, sh.hidden_size));
  if (sh.ffn_hidden_size == 0) sh.ffn_hidden_size = 4 * sh.hidden_size;
  return m;
}

UniformCosts to_uniform(const CostSpec& c, double mw_ratio) {
  UniformCosts u;
  u.f = millis_to_ps(c.f);
  u.b = millis_to_ps(c.b);
  u.w = millis_to_ps(c.w);
  u.r = millis_to_ps(c.r);
  u.comm = millis_to_ps(c.comm);
  u.mw_over_mb = mw_ratio;
  return u;
}

bool has_recompute(const Schedule& s) {
  for (const auto& dev : s.actions)
    for (const Action& a : dev)
      if (a.kind == ActionKind::kR) return true;
  return false;
}

Schedule build_schedule(const SimOptions& o, const CostSpec& costs, const ModelSpec& model) {
  if (!o.import_csv.empty()) {
    if (!o.schedule.empty())
      throw ConfigError("", "--import-csv", "give either --schedule or --import-csv, not both");
    // The CSV is the schedule: what a generator would read has nothing to act on.
    for (const auto& [given, flag] : {std::pair{!o.chunks.empty(), "--chunks"},
                                      std::pair{!o.group_size.empty(), "--group-size"},
                                      std::pair{o.memory_limit > 0, "--memory-limit"}})
      if (given)
        throw ConfigError(o.import_csv, flag,
                          "applies to a generated schedule (--schedule); the CSV gives the order");
    Schedule s = load_pytorch_csv(o.import_csv);
    if (!o.pp.empty() && parse_count(o.pp, "--pp", 1, kMaxDevices) != s.placement.num_devices)
      throw ConfigError(o.import_csv, "--pp",
                        fmt::format("the CSV has {} ranks", s.placement.num_devices));
    if (model.shape.num_layers > 0)
      throw ConfigError(o.import_csv, "--model",
                        "a PyTorch CSV carries no layer split; give --model/--model-shape with "
                        "--schedule");
    return s;
  }
  if (o.schedule.empty())
    throw ConfigError("", "--schedule",
                      "expected a schedule name (or --import-csv FILE, or a scenario file)");
  const GeneratorRegistry registry = default_registry();
  // Unknown names fail first, listing the valid ones; then a flag the generator does not read
  // is refused rather than ignored, naming the generators that read it.
  const GeneratorCaps& caps = registry.get(o.schedule).caps;
  auto readers = [&](bool GeneratorCaps::*cap) {
    std::string names;
    for (const GeneratorInfo& g : registry.all())
      if (g.caps.*cap) names += (names.empty() ? "" : ", ") + g.name;
    return names;
  };
  if (!o.chunks.empty() && !caps.takes_v)
    throw ConfigError("", "--chunks",
                      fmt::format("{} places its own stages per device; schedules that take "
                                  "--chunks: {}",
                                  o.schedule, readers(&GeneratorCaps::takes_v)));
  if (!o.group_size.empty() && !caps.takes_group_size)
    throw ConfigError("", "--group-size",
                      fmt::format("{} has no microbatch groups; schedules that take "
                                  "--group-size: {}",
                                  o.schedule, readers(&GeneratorCaps::takes_group_size)));
  if (o.memory_limit > 0 && !caps.memory_aware)
    throw ConfigError("", "--memory-limit",
                      fmt::format("{} does not read a memory limit (p and m set its memory); "
                                  "memory-aware schedules: {}",
                                  o.schedule, readers(&GeneratorCaps::memory_aware)));
  if (o.mw_ratio > 0 && !caps.split_backward)
    throw ConfigError("", "--mw-ratio",
                      fmt::format("{} has no separate weight pass (W) for a share of the "
                                  "activation to wait for; schedules with one: {}",
                                  o.schedule, readers(&GeneratorCaps::split_backward)));
  if (costs.r > 0 && !caps.explicit_recompute)
    throw ConfigError(
        "", "--costs",
        fmt::format("R = {} but {} has no recomputation pass (R); schedules with "
                    "one: {}",
                    costs.r, o.schedule, readers(&GeneratorCaps::explicit_recompute)));
  if (o.pp.empty()) throw ConfigError("", "--pp", "expected the pipeline size (--pp P)");
  if (o.microbatches.empty())
    throw ConfigError("", "--microbatches", "expected the microbatch count (--microbatches M)");
  GeneratorParams gp;
  gp.p = parse_count(o.pp, "--pp", 1, kMaxDevices);
  gp.m = parse_count(o.microbatches, "--microbatches", 1, kMaxMicrobatches);
  gp.v = o.chunks.empty() ? 0 : parse_count(o.chunks, "--chunks", 1, 256);
  gp.group_size =
      o.group_size.empty() ? 0 : parse_count(o.group_size, "--group-size", 1, kMaxMicrobatches);
  if (static_cast<long long>(gp.p) * std::max(gp.v, 2) * gp.m > kMaxPasses)
    throw ConfigError("", "--microbatches",
                      fmt::format("p * chunks * m is too large (limit {} passes)", kMaxPasses));
  gp.costs = to_uniform(costs, o.mw_ratio);
  // Cost-aware generators time their candidates with these costs: refuse absurd ones first.
  check_clock_headroom(3.0 * gp.p * std::max(gp.v, 2) * gp.m, gp.costs, "--costs");
  gp.memory_limit = o.memory_limit;
  gp.num_layers = model.shape.num_layers;
  Schedule s = generate_schedule(registry, o.schedule, gp);
  if (model.shape.num_layers > 0 && model.shape.num_layers < s.placement.num_stages())
    throw ConfigError("", o.model_shape.empty() ? "--model" : "--model-shape",
                      fmt::format("{} layers cannot fill the schedule's {} stages; expected at "
                                  "least one layer per stage",
                                  model.shape.num_layers, s.placement.num_stages()));
  return s;
}

// --- diagram -----------------------------------------------------------------------------------

char kind_letter(ActionKind k) {
  switch (k) {
    case ActionKind::kF:
      return 'F';
    case ActionKind::kB:
    case ActionKind::kBW:
      return 'B';
    case ActionKind::kW:
      return 'W';
    case ActionKind::kR:
      return 'R';
    default:
      return 'X';  // OVERLAP_F_B
  }
}

/// One row per device, one cell per slot of `slot` ps (the smallest positive pass cost). A cell
/// holds the pass letter and microbatch; lowercase marks a device's later chunks (stage not the
/// first it holds). Idle cells are '.'.
std::vector<std::string> draw(const Schedule& s, const EvalResult& r, TimePs slot) {
  const Placement& pl = s.placement;
  std::vector<int> first_stage(pl.num_devices, -1);
  for (int st = 0; st < pl.num_stages(); ++st)
    if (first_stage[pl.stages[st].device] < 0) first_stage[pl.stages[st].device] = st;
  const int width =
      1 + static_cast<int>(std::to_string(std::max(0, s.num_microbatches - 1)).size());
  TimePs t0 = r.device.empty() ? 0 : r.device[0].first_start;
  for (const DeviceStats& d : r.device) t0 = std::min(t0, d.first_start);
  const TimePs cells = (r.makespan + slot - 1) / slot;
  std::vector<std::string> rows;
  std::size_t id = 0;
  for (int d = 0; d < pl.num_devices; ++d) {
    std::vector<std::string> cell(static_cast<std::size_t>(cells), std::string(width, '.'));
    for (const Action& a : s.actions[d]) {
      const std::size_t me = id++;
      if (!is_compute(a.kind)) continue;
      const TimePs c0 = (r.start[me] - t0) / slot;
      const TimePs c1 = std::max<TimePs>(c0 + 1, (r.end[me] - t0 + slot - 1) / slot);
      char letter = kind_letter(a.kind);
      if (a.stage != first_stage[d]) letter = static_cast<char>(letter - 'A' + 'a');
      std::string label = fmt::format("{}{:<{}}", letter, a.microbatch, width - 1);
      for (TimePs c = c0; c < c1 && c < cells; ++c) cell[static_cast<std::size_t>(c)] = label;
    }
    std::string row = fmt::format("d{:<{}}|", d, std::to_string(pl.num_devices - 1).size());
    for (TimePs c = 0; c < cells; ++c) row += (c ? " " : "") + cell[static_cast<std::size_t>(c)];
    rows.push_back(row);
  }
  return rows;
}

TimePs diagram_slot(const CostSpec& c) {
  double slot = 0;
  for (double v : {c.f, c.b, c.w, c.r})
    if (v > 0 && (slot == 0 || v < slot)) slot = v;
  const TimePs ps = millis_to_ps(slot);
  if (ps <= 0) throw ConfigError("", "--diagram", "needs a positive pass cost");
  return ps;
}

// --- output ------------------------------------------------------------------------------------

// Division (not ps_to_millis's multiplication by 1e-9) so whole units print exactly.
double units(TimePs t) { return static_cast<double>(t) / static_cast<double>(kPsPerMilli); }

// The activation-memory rule `--mw-ratio` (M_W / M_B) selects, in words: the zero-bubble
// papers' accounting frees a forward's activation at its B (0); the controllable-memory paper's
// holds it until its W (1); between, W keeps that share of it from B on.
std::string memory_rule(double mw_ratio) {
  if (mw_ratio <= 0) return "M_W/M_B=0: an activation is freed at its B";
  if (mw_ratio >= 1) return "M_W/M_B=1: an activation is held until its W";
  return fmt::format("M_W/M_B={:g}: that share of an activation is held from its B until its W",
                     mw_ratio);
}

Doc result_doc(const SimOptions& o, const Schedule& s, const CostSpec& c, const EvalResult& r,
               const std::vector<std::string>& diagram) {
  Doc d = Doc::object();
  d["schedule"] = s.name;
  if (!o.import_csv.empty()) d["imported_from"] = o.import_csv;
  d["pp"] = s.placement.num_devices;
  d["microbatches"] = s.num_microbatches;
  d["chunks"] = s.placement.num_stages() / s.placement.num_devices;
  d["actions"] = s.total_actions();
  d["costs"] = Doc{{"F", c.f}, {"B", c.b}, {"W", c.w}, {"R", c.r}, {"comm", c.comm}};
  d["mw_ratio"] = o.mw_ratio;
  d["memory_rule"] = memory_rule(o.mw_ratio);
  d["makespan"] = units(r.makespan);
  d["cost"] = units(r.cost);
  d["ideal"] = units(r.ideal);
  d["bubble_rate"] = r.bubble_rate;
  d["bubble_fraction"] = r.bubble_fraction;
  if (o.memory_limit > 0) d["memory_limit"] = o.memory_limit;
  Doc devs = Doc::array();
  for (std::size_t i = 0; i < r.device.size(); ++i) {
    const DeviceStats& ds = r.device[i];
    Doc dev = Doc::object();
    dev["device"] = i;
    dev["first_start"] = units(ds.first_start);
    dev["last_end"] = units(ds.last_end);
    dev["busy"] = units(ds.busy);
    dev["idle"] = units(r.makespan - ds.busy);
    dev["peak_activations"] = ds.peak_memory;
    if (o.memory_limit > 0) dev["within_memory_limit"] = ds.peak_memory <= o.memory_limit + 1e-9;
    devs.push_back(std::move(dev));
  }
  d["devices"] = std::move(devs);
  if (!diagram.empty()) d["diagram"] = diagram;
  return d;
}

std::string result_table(const Schedule& s, const CostSpec& c, const EvalResult& r,
                         double memory_limit, double mw_ratio) {
  std::string out = fmt::format(
      "schedule {}: p={} m={} chunks={} ({} actions); costs F={} B={} W={} R={} comm={}\n"
      "memory rule      {}\n",
      s.name, s.placement.num_devices, s.num_microbatches,
      s.placement.num_stages() / s.placement.num_devices, s.total_actions(), c.f, c.b, c.w, c.r,
      c.comm, memory_rule(mw_ratio));
  out += fmt::format("makespan         {}\n", units(r.makespan));
  out += fmt::format("bubble_rate      {:.4f}  (zero-bubble: (cost - ideal) / cost, cost {})\n",
                     r.bubble_rate, units(r.cost));
  out += fmt::format("bubble_fraction  {:.4f}  (Megatron: bubble / ideal, ideal {})\n",
                     r.bubble_fraction, units(r.ideal));
  out += fmt::format("{:>6} {:>12} {:>12} {:>12} {:>12} {:>17}\n", "device", "first_start",
                     "last_end", "busy", "idle", "peak_activations");
  for (std::size_t i = 0; i < r.device.size(); ++i) {
    const DeviceStats& ds = r.device[i];
    out +=
        fmt::format("{:>6} {:>12} {:>12} {:>12} {:>12} {:>17}{}\n", i, units(ds.first_start),
                    units(ds.last_end), units(ds.busy), units(r.makespan - ds.busy), ds.peak_memory,
                    memory_limit > 0 && ds.peak_memory > memory_limit + 1e-9 ? "  over limit" : "");
  }
  return out;
}

std::string command_line(const SimOptions& o) {
  std::string cmd = "pipewright simulate";
  auto add = [&](const char* flag, const std::string& v) {
    if (!v.empty()) cmd += fmt::format(" {} {}", flag, v);
  };
  add("--schedule", o.schedule);
  add("--import-csv", o.import_csv);
  add("--pp", o.pp);
  add("--microbatches", o.microbatches);
  add("--chunks", o.chunks);
  add("--group-size", o.group_size);
  add("--costs", o.costs);
  add("--model", o.model);
  add("--model-shape", o.model_shape);
  if (o.mw_ratio > 0) add("--mw-ratio", fmt::format("{}", o.mw_ratio));
  if (o.memory_limit > 0) add("--memory-limit", fmt::format("{}", o.memory_limit));
  return cmd;
}

void emit_plan(const SimOptions& o, const Schedule& s, const CostTable& table,
               const ModelSpec& model) {
  Plan plan;
  plan.model.name = "custom";
  if (model.shape.num_layers > 0) plan.model = model.shape;
  plan.model.num_layers = s.placement.num_layers;
  plan.config.micro_batch_size = model.micro_batch_size;
  plan.config.pipeline_parallel = s.placement.num_devices;
  plan.config.virtual_stages = s.placement.num_stages() / s.placement.num_devices;
  plan.config.schedule = s.name;
  plan.config.global_batch_size = s.num_microbatches * model.micro_batch_size;
  for (int d = 0; d < s.placement.num_devices; ++d) plan.rank_to_gpu.push_back(d);
  plan.schedule = lower_communication(s);
  Evaluator ev(plan.schedule);
  const EvalResult& r = ev.run(table);
  const DependencyGraph& g = ev.graph();
  plan.predicted.reserve(g.size());
  for (std::size_t id = 0; id < g.size(); ++id) {
    const int d = g.device_of[id];
    plan.predicted.push_back(
        {d, static_cast<std::int32_t>(id - g.device_begin[d]), r.start[id], r.end[id]});
  }
  plan.predicted_iteration = r.makespan;
  plan.provenance.version = "0.1.0";
  plan.provenance.profile_source = "uniform costs " + o.costs;
  plan.provenance.command = command_line(o);
  save_plan(o.emit, plan);
}

/// Renders the evaluated schedule with the same renderer as `pipewright compare`.
void write_report(const SimOptions& o, const Schedule& s, const CostTable& table) {
  ReportInput in;
  in.title = "pipewright simulate: " + s.name;
  in.context = {{"schedule", s.name},
                {"p", std::to_string(s.placement.num_devices)},
                {"m", std::to_string(s.num_microbatches)},
                {"costs", o.costs}};
  in.memory_limit = o.memory_limit;
  in.schedules.push_back(evaluate_for_report(s, table));
  write_file_atomic(o.report, render_html(in));
}

int run_simulation(const SimOptions& o) {
  if (o.format != "table" && o.format != "json" && o.format != "yaml")
    throw ConfigError("", "--format", "expected table, json or yaml, got '" + o.format + "'");
  if (!std::isfinite(o.mw_ratio) || o.mw_ratio < 0 || o.mw_ratio > 1)
    throw ConfigError("", "--mw-ratio", "expected a number in 0..1 (M_W / M_B)");
  if (!std::isfinite(o.memory_limit) || o.memory_limit < 0)
    throw ConfigError("", "--memory-limit", "expected a non-negative number of activations");
  CsvForm form;
  if (!parse_csv_form(o.csv_form, &form))
    throw ConfigError("", "--csv-form", "expected compute_only or compute_comms");
  const CostSpec costs = parse_costs(o.costs);
  const ModelSpec model = parse_model(o);
  const Schedule s = build_schedule(o, costs, model);
  check_clock_headroom(static_cast<double>(s.total_actions()), to_uniform(costs, o.mw_ratio),
                       "--costs");
  const CostTable table =
      make_uniform_cost_table(s.placement, to_uniform(costs, o.mw_ratio), has_recompute(s));
  Evaluator ev(s);
  const EvalResult& r = ev.run(table);
  std::vector<std::string> diagram;
  if (o.diagram) diagram = draw(s, r, diagram_slot(costs));
  if (!o.export_csv.empty()) save_pytorch_csv(o.export_csv, s, form);
  if (!o.emit.empty()) emit_plan(o, s, table, model);
  if (!o.report.empty()) write_report(o, s, table);
  std::string out;
  if (o.format == "table") {
    out = result_table(s, costs, r, o.memory_limit, o.mw_ratio);
    for (const std::string& row : diagram) out += row + "\n";
  } else {
    out = dump_document(result_doc(o, s, costs, r, diagram),
                        o.format == "json" ? DocFormat::kJson : DocFormat::kYaml);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void register_simulate(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand(
      "simulate",
      "Evaluate a pipeline schedule with fixed pass costs (bubble, busy/idle, peak activations), "
      "or simulate a scenario/plan");
  // Owned by the callback, which lives as long as the App.
  auto state = std::make_shared<std::pair<SimOptions, ScenarioSimOptions>>();
  SimOptions& opts = state->first;
  ScenarioSimOptions& scenario = state->second;
  sub->add_option("--schedule", opts.schedule, "Schedule generator name (e.g. gpipe, 1f1b)");
  sub->add_option("--pp", opts.pp, "Pipeline devices P");
  sub->add_option("--microbatches", opts.microbatches, "Microbatches per iteration M");
  sub->add_option("--chunks", opts.chunks,
                  "Chunks (stages) per device V for multi-chunk schedules");
  sub->add_option("--group-size", opts.group_size,
                  "Interleaved 1F1B microbatch group size G (p <= G <= M; default P)");
  sub->add_option("--costs", opts.costs,
                  "Pass costs per stage: F=..,B=..,W=..[,R=..][,comm=..] (same unit as output; "
                  "full backward = B+W)")
      ->capture_default_str();
  sub->add_option("--memory-limit", opts.memory_limit,
                  "Activation limit per device (units of one 1F1B stage's microbatch)");
  sub->add_option("--mw-ratio", opts.mw_ratio,
                  "Activation kept after B until W, as a share of F's (M_W / M_B; default 0)");
  sub->add_option("--format", opts.format, "Output: table, json or yaml")->capture_default_str();
  sub->add_flag("--diagram", opts.diagram,
                "Draw the schedule: one row per device, one cell per slot");
  sub->add_option("--export-csv", opts.export_csv, "Write the schedule as PyTorch pipelining CSV");
  sub->add_option("--csv-form", opts.csv_form, "CSV form: compute_only or compute_comms")
      ->capture_default_str();
  sub->add_option("--import-csv", opts.import_csv, "Simulate a PyTorch pipelining CSV schedule");
  sub->add_option("--emit", opts.emit, "Write a plan (schedule + predicted times), .yaml or .json");
  sub->add_option("--model", opts.model,
                  "Model preset written into an emitted plan (e.g. megatron-1.7b); its layers "
                  "are split over the stages");
  sub->add_option("--model-shape", opts.model_shape,
                  "Model shape for an emitted plan: hidden=..,heads=..,seq=..,vocab=..,layers=..[,"
                  "ffn=..][,microbatch=..] (overrides --model's keys; `execute` can run it)");
  add_scenario_sim_flags(sub, &scenario);
  sub->callback([status, state, sub] {
    ScenarioSimOptions& scen = state->second;
    const bool whole = !scen.scenario.empty() || !scen.plan.empty();
    // Every flag acts in the mode it is given in, or is refused: none is silently ignored.
    static const char* const kFixedCostOnly[] = {
        "--schedule", "--pp",           "--microbatches", "--chunks",  "--group-size",
        "--costs",    "--memory-limit", "--mw-ratio",     "--diagram", "--export-csv",
        "--csv-form", "--import-csv",   "--emit",         "--model",   "--model-shape"};
    static const char* const kWholeOnly[] = {
        "--trace",     "--trace-ranks",           "--overlap-grad-reduce",  "--grad-reduce-bytes",
        "--all-ranks", "--comm-compute-slowdown", "--overlap-param-gather", "--overlap-p2p-comm"};
    auto refuse = [&](const char* flag, const char* why) {
      if (sub->get_option(flag)->count() > 0) throw ConfigError("", flag, why);
    };
    require_positive_if_given(*sub, "--memory-limit", state->first.memory_limit,
                              "the generator's default");
    if (whole) {
      // A scenario's interleaved groups are its own key (a plan's are in its order).
      refuse("--group-size",
             "applies to a fixed-cost schedule (--schedule or --import-csv); a scenario's "
             "interleaved groups are parallel.microbatch_group_size_per_vp_stage, a plan's are "
             "in its order");
      for (const char* flag : kFixedCostOnly)
        refuse(flag,
               "applies to a fixed-cost schedule (--schedule or --import-csv); a scenario or "
               "--plan is simulated with the workload model's costs (use `pipewright plan "
               "--emit` / `--export-csv` to write a plan or CSV of a scenario)");
    } else {
      for (const char* flag : kWholeOnly)
        refuse(flag, "applies to a scenario or --plan (the discrete-event simulator)");
      // --csv-form shapes the --export-csv file: alone it would do nothing.
      if (state->first.export_csv.empty())
        refuse("--csv-form", "sets the form of the --export-csv file; give --export-csv FILE too");
    }
    if (whole) {
      scen.format = state->first.format;
      *status = run_scenario_simulation(scen);
      return;
    }
    state->first.report = scen.report;
    *status = run_simulation(state->first);
  });
}

}  // namespace pw::tools
