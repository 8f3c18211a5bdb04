// `pipewright plan [SCENARIO.yaml]`: the fastest (or cheapest) way to train a model on a cluster.
#include <fmt/format.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/file_io.h"
#include "core/plan_io.h"
#include "core/pytorch_csv.h"
#include "hwmodels/optimizer.h"
#include "hwmodels/profile.h"
#include "hwmodels/scenario.h"
#include "planner/search/plan_emit.h"
#include "planner/search/scenario_input.h"
#include "planner/search/search.h"
#include "planner/search/search_report.h"
#include "planner/search/shortest_time.h"
#include "report/build.h"
#include "report/report.h"
#include "tools/command.h"

namespace pw::tools {
namespace {

constexpr int kNotGiven = std::numeric_limits<int>::min();  // an int flag left out

constexpr const char* kDefaultScenario = "scenarios/gpt3-175b-1024-a100.yaml";

struct PlanOptions {
  std::string scenario;
  std::string objective = "time";
  double target_loss = 0;
  double tokens = 0;
  double memory_limit_gb = 0;
  int top = 10;
  std::string emit;
  std::string report;  ///< --report FILE: HTML with the best plan's timeline and the Pareto front
  std::string export_csv;
  std::string csv_form = "compute_only";
  std::string format = "table";
  int threads = 0;
  int des_top = 32;
  int des_budget = 4000;
  int max_evaluations = SearchOptions{}.max_evaluations;
  int max_gpus = 1 << 16;
  bool shortest_time = false;
  // Search constraints, as typed (comma-separated lists; parsed by parse_constraints).
  std::string tp, pp, dp, micro_batch, global_batch, schedules, recompute, zero;
  std::string sequence_parallel, offload;  ///< on | off | both
  std::string cp, ep, etp;                 ///< context / expert-(tensor-)parallel degrees
  std::string fp8;                         ///< on | off | both
  std::string tp_comm_overlap;             ///< on | off (default: the scenario's)
  std::string cp_comm_type;                ///< p2p | all_gather | a2a (default: the scenario's)
  std::string overlap_p2p_comm;            ///< on | off (default: the scenario's)
  std::string overlap_param_gather;        ///< on | off | both (default: the scenario's)
  std::string framework = "any";           ///< any | megatron | torchtitan
  int gpus = kNotGiven;                    ///< kNotGiven: not given
};

std::vector<std::string> split_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    out.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (out.back().empty())
      throw ConfigError("", flag + " " + text,
                        "expected a comma-separated list with no empty items");
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

std::vector<int> int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (const std::string& item : split_list(flag, text)) {
    int v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size())
      throw ConfigError("", flag + " " + text,
                        "expected a comma-separated list of integers, got '" + item + "'");
    out.push_back(v);
  }
  return out;
}

std::vector<int> on_off(const std::string& flag, const std::string& text) {
  if (text.empty()) return {};
  if (text == "on") return {1};
  if (text == "off") return {0};
  if (text == "both") return {0, 1};
  throw ConfigError("", flag + " " + text,
                    "expected on, off or both (did you mean '" +
                        nearest_name(text, {"on", "off", "both"}) + "'?)");
}

SearchConstraints parse_constraints(const PlanOptions& o) {
  SearchConstraints c;
  c.tp = int_list("--tp", o.tp);
  c.pp = int_list("--pp", o.pp);
  c.dp = int_list("--dp", o.dp);
  c.micro_batch = int_list("--microbatch-size", o.micro_batch);
  c.global_batch = int_list("--global-batch", o.global_batch);
  c.zero = int_list("--zero", o.zero);
  if (!o.schedules.empty()) c.schedules = split_list("--schedules", o.schedules);
  if (!o.recompute.empty())
    for (const std::string& name : split_list("--recompute", o.recompute)) {
      Recompute r;
      if (!hw::parse_recompute(name, &r))
        throw ConfigError("", "--recompute " + o.recompute,
                          "expected none, selective or full (did you mean '" +
                              nearest_name(name, {"none", "selective", "full"}) + "'?)");
      c.recompute.push_back(r);
    }
  c.sequence_parallel = on_off("--sequence-parallel", o.sequence_parallel);
  c.offload = on_off("--offload", o.offload);
  c.cp = int_list("--cp", o.cp);
  c.ep = int_list("--ep", o.ep);
  c.etp = int_list("--etp", o.etp);
  c.fp8 = on_off("--fp8", o.fp8);
  c.param_gather = on_off("--overlap-param-gather", o.overlap_param_gather);
  if (!parse_framework(o.framework, &c.framework))
    throw ConfigError(
        "", "--framework " + o.framework,
        "expected any, megatron, torchtitan, nemo or deepspeed (did you mean '" +
            nearest_name(o.framework, {"any", "megatron", "torchtitan", "nemo", "deepspeed"}) +
            "'?)");
  if (o.gpus != kNotGiven && o.gpus < 1)
    throw ConfigError("", "--gpus", fmt::format("expected a GPU count >= 1, got {}", o.gpus));
  c.gpus = std::max(0, o.gpus);
  return c;
}

// The constraints as JSON: the flags as typed and each list.
nlohmann::json constraints_json(const SearchConstraints& c) {
  nlohmann::json j;
  j["flags"] = c.describe();
  if (c.gpus > 0) j["gpus"] = c.gpus;
  const std::pair<const char*, const std::vector<int>*> lists[] = {
      {"tensor_parallel", &c.tp},
      {"pipeline_parallel", &c.pp},
      {"data_parallel", &c.dp},
      {"micro_batch_size", &c.micro_batch},
      {"global_batch_size", &c.global_batch},
      {"zero_stage", &c.zero},
      {"context_parallel", &c.cp},
      {"expert_parallel", &c.ep},
      {"expert_tensor_parallel", &c.etp}};
  for (const auto& [key, list] : lists)
    if (!list->empty()) j[key] = *list;
  if (!c.schedules.empty()) j["schedule"] = c.schedules;
  if (!c.recompute.empty()) {
    std::vector<std::string> rc;
    for (Recompute r : c.recompute) rc.emplace_back(recompute_name(r));
    j["recompute"] = rc;
  }
  if (!c.sequence_parallel.empty()) j["sequence_parallel"] = c.sequence_parallel;
  if (!c.offload.empty()) j["optimizer_offload"] = c.offload;
  if (!c.fp8.empty()) j["fp8"] = c.fp8;
  if (!c.param_gather.empty()) j["overlap_param_gather"] = c.param_gather;
  if (c.framework != Framework::kAny) j["framework"] = std::string(framework_name(c.framework));
  return j;
}

// The rendered report with the constraints named: a line under the table's first line, or a
// "constraints" member of the JSON object.
std::string with_constraints(const std::string& report, const SearchConstraints& c, bool json) {
  if (c.empty()) return report;
  if (json) {
    nlohmann::json j = nlohmann::json::parse(report);
    j["constraints"] = constraints_json(c);
    return j.dump(2) + "\n";
  }
  const std::size_t eol = report.find('\n') + 1;
  std::string rest = report.substr(eol);
  // "no feasible plan" speaks of the constrained space, not of every configuration.
  const std::string any = "under any configuration;";
  if (const std::size_t at = rest.find(any); at != std::string::npos)
    rest.replace(at, any.size(), "under any configuration these constraints allow;");
  return report.substr(0, eol) + "constraints: " + c.describe() +
         " (the search covers only configurations that satisfy them)\n" + rest;
}

// A constrained space in which the screen found no well-formed configuration at all: the
// constraints contradict what the schedules accept (exit 2, naming them).
void check_not_empty(const SearchConstraints& c, const SearchSpace& space, const SearchResult& r) {
  if (c.empty() || r.stats.valid > 0) return;
  std::string why;
  for (const ScheduleOption& o : space.schedules) {
    if (o.max_devices > 0 && why.find("memory-controllable") == std::string::npos)
      why += "; memory-controllable schedules (" + o.name +
             ", ...) are searched only for p <= " + std::to_string(o.max_devices);
    if (o.takes_v && why.find("p*v") == std::string::npos)
      why += "; " + o.name + " needs p*v <= the model's layers";
  }
  throw ConfigError("", c.describe(),
                    "no well-formed configuration satisfies these constraints" + why);
}

// The scenario through the one reader every command uses (its `parallel:` section optional).
hw::Scenario resolve_scenario(const PlanOptions& o) {
  if (!o.scenario.empty()) {
    hw::Scenario s = hw::load_scenario(o.scenario, {}, hw::ParallelSection::kOptional);
    hw::require_uniform_cluster(s, "plan");
    return s;
  }
  // The bundled default: the working directory's scenarios/, else the bundled scenarios
  // (hw::shipped_scenario_dir, as `validate` finds them).
  const std::filesystem::path name = std::filesystem::path(kDefaultScenario).filename();
  for (const std::filesystem::path& p :
       {std::filesystem::path(kDefaultScenario),
        std::filesystem::path(hw::shipped_scenario_dir()) / name}) {
    std::error_code ec;
    if (std::filesystem::exists(p, ec))
      return hw::load_scenario(p.string(), {}, hw::ParallelSection::kOptional);
  }
  throw ConfigError(kDefaultScenario, "",
                    fmt::format("the bundled default scenario was found neither in the working "
                                "directory nor in {} (set PIPEWRIGHT_SCENARIO_DIR); name a "
                                "scenario file",
                                hw::shipped_scenario_dir()));
}

PlanProblem make_problem(const PlanOptions& o, const hw::Scenario& sc) {
  PlanProblem pr = plan_problem(sc);
  if (!o.tp_comm_overlap.empty()) {
    const std::vector<int> v = on_off("--tp-comm-overlap", o.tp_comm_overlap);
    if (v.size() != 1)
      throw ConfigError("", "--tp-comm-overlap " + o.tp_comm_overlap,
                        "expected on or off (every configuration with sequence parallelism and "
                        "t > 1 overlaps, or none does)");
    pr.tp_comm_overlap = v[0] != 0;
  }
  if (!o.cp_comm_type.empty()) {
    if (!is_cp_comm_type(o.cp_comm_type))
      throw ConfigError("", "--cp-comm-type " + o.cp_comm_type,
                        "expected " + cp_comm_type_choices());
    pr.cp_comm_type = o.cp_comm_type;
  }
  if (!o.overlap_p2p_comm.empty()) {
    const std::vector<int> v = on_off("--overlap-p2p-comm", o.overlap_p2p_comm);
    if (v.size() != 1)
      throw ConfigError("", "--overlap-p2p-comm " + o.overlap_p2p_comm,
                        "expected on or off (every interleaved configuration over p > 1 "
                        "overlaps its pipeline transfers, or none does)");
    pr.overlap_p2p_comm = v[0] != 0;
  }
  if (o.objective == "time")
    pr.objective = Objective::kTime;
  else if (o.objective == "cost")
    pr.objective = Objective::kCost;
  else if (o.objective == "time-to-loss")
    pr.objective = Objective::kTimeToLoss;
  else
    throw ConfigError("", "--objective",
                      "expected time, cost or time-to-loss (did you mean '" +
                          nearest_name(o.objective, {"time", "cost", "time-to-loss"}) + "'?)");
  if (o.target_loss < 0) throw ConfigError("", "--target-loss", "expected a positive loss");
  if (o.tokens < 0) throw ConfigError("", "--tokens", "expected a positive token count");
  if (o.target_loss > 0 && o.tokens > 0)
    throw ConfigError("", "--target-loss/--tokens",
                      "contradictory constraints: give a target loss or a token budget, not both");
  if (pr.objective == Objective::kTimeToLoss && o.target_loss <= 0 && o.tokens <= 0)
    throw ConfigError("", "--objective time-to-loss",
                      "needs --target-loss or --tokens (what is the target?)");
  pr.target.loss = o.target_loss;
  pr.target.tokens = o.tokens;
  if (o.memory_limit_gb < 0) throw ConfigError("", "--memory-limit", "expected GB > 0");
  const double usable = pr.profile.gpu.usable_memory().value;
  if (o.memory_limit_gb * 1e9 > usable)
    throw ConfigError("", "--memory-limit",
                      fmt::format("contradictory constraints: {} GB is more than the {} GPU's "
                                  "{:.1f} GB usable ({:.0f} GB less {:.1f} GB reserved)",
                                  o.memory_limit_gb, sc.cluster_profile, usable / 1e9,
                                  pr.profile.gpu.hbm_capacity.value / 1e9,
                                  pr.profile.gpu.reserved_memory.value / 1e9));
  pr.memory_limit = o.memory_limit_gb * 1e9;
  if (o.top < 1) throw ConfigError("", "--top", "expected at least 1");
  if (o.threads < 0) throw ConfigError("", "--threads", "expected 0 (all cores) or more");
  if (o.max_gpus < 1) throw ConfigError("", "--max-gpus", "expected at least 1");
  if (o.des_top < 0) throw ConfigError("", "--des-top", "expected 0 (off) or more");
  if (o.des_budget < 1) throw ConfigError("", "--des-budget", "expected 1 or more");
  if (o.max_evaluations < 1) throw ConfigError("", "--max-evaluations", "expected 1 or more");
  return pr;
}

// Global batches: the scenario's, or for a loss target optimised over batch, a grid of powers
// of two around the critical batch.
std::vector<int> global_batches(const PlanProblem& pr, const hw::Scenario& sc) {
  if (pr.objective == Objective::kTime || pr.target.empty()) return {sc.parallel.global_batch_size};
  const double params = hw::non_embedding_parameter_count(pr.model);
  const TrainingNeed need = training_need(params, pr.target, 1.0);
  const double crit_seqs = need.b_crit / pr.model.seq_length;
  std::vector<int> out;
  const int center =
      std::max(0, static_cast<int>(std::lround(std::log2(std::max(1.0, crit_seqs)))));
  for (int k = std::max(0, center - 4); k <= center + 3 && k < 17; ++k) out.push_back(1 << k);
  return out;
}

void progress_bar(double f) {
  const int w = 40, n = static_cast<int>(f * w);
  std::fprintf(stderr, "\r[%s%s] %3d%%", std::string(n, '#').c_str(),
               std::string(w - n, ' ').c_str(), static_cast<int>(f * 100));
  std::fflush(stderr);
}

/// The planner's HTML report, drawn by the same renderer as `pipewright compare`: the ranking
/// with the CLI table's columns, the best configuration's timeline and memory, and the Pareto
/// front of time vs memory.
void write_plan_report(const std::string& path, const CostModel& model,
                       const GeneratorRegistry& registry, const PlanReportInput& ranked,
                       const std::string& cluster) {
  const SearchSpace& space = *ranked.space;
  const SearchResult& result = *ranked.result;
  ReportInput in;
  in.title = "pipewright plan";
  const RankingTable ranking = ranking_table(ranked);
  in.tables.push_back({"Ranking", ranking.header, ranking.rows});
  const Evaluated& best = result.top[0];
  // The same figures as the table, JSON and emitted plan (from the engine that ranked the row),
  // and the timeline from that engine too: the DES's run of the plan `--emit` writes (what
  // `simulate --plan` re-simulates), or the fixed-cost evaluator's when it ranked the row.
  in.context = {{"cluster", cluster},
                {"best", describe_config(space, best.config)},
                {"iteration", fmt::format("{:.3f} s ({})", best.iteration, tier_name(best.tier))},
                {"MFU / HFU", fmt::format("{:.1f}% / {:.1f}%", 100 * best.mfu, 100 * best.hfu)},
                {"bubble", fmt::format("{:.1f}%", 100 * pipeline_bubble(best))},
                {"memory", fmt::format("{:.1f} GB per GPU ({})", best.peak_memory / 1e9,
                                       best.feasible ? "fits" : "does not fit")}};
  if (best.tier == Tier::kDes) {
    const Plan plan = build_plan(model, registry, best.config, cluster, Provenance{},
                                 EmitOptions{false});  // its schedule; the DES runs just below
    std::vector<ActionTiming> timings;
    const IterationResult r = simulate_emitted_plan(model, plan, true, &timings);  // + memory
    in.memory_unit = "GB";
    in.memory_total = true;
    in.memory_limit = model.problem().limit() * 1e-9;
    in.schedules.push_back(simulated_iteration_report(
        describe_config(space, best.config),
        "discrete-event simulation of the emitted plan (as simulate --plan re-runs it)",
        plan.schedule, timings, r));
  } else {
    Schedule s;
    evaluate_config(model, registry, best.config, &s);
    ScheduleReport sr = evaluate_for_report(s, config_cost_table(model, best.config, s),
                                            describe_config(space, best.config));
    // The evaluator's activation figures are bytes: shown in GB.
    for (DeviceStats& d : sr.result.device) d.peak_memory *= 1e-9;
    for (auto& dev : sr.result.memory)
      for (MemoryPoint& p : dev) p.value *= 1e-9;
    in.memory_unit = "GB act.";
    in.schedules.push_back(std::move(sr));
  }
  for (const Evaluated& e : result.pareto) {
    ParetoPoint pt;
    pt.label = describe_config(space, e.config);
    pt.iteration_time = seconds_to_ps(e.iteration);
    pt.peak_memory_bytes = e.peak_memory;
    pt.on_front = true;
    if (e.iteration > 0)
      pt.tokens_per_second = batch_tokens(model.problem(), e.config) / e.iteration;
    in.pareto.push_back(pt);
  }
  write_file_atomic(path, render_html(in));
}

int run_plan(const PlanOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw ConfigError("", "--format", "expected table or json");
  CsvForm csv_form = CsvForm::kComputeOnly;
  if (!parse_csv_form(o.csv_form, &csv_form))
    throw ConfigError("", "--csv-form",
                      "expected compute_only or compute_comms, got '" + o.csv_form + "'");
  const hw::Scenario sc = resolve_scenario(o);
  PlanProblem pr = make_problem(o, sc);
  SearchConstraints cons = parse_constraints(o);
  // A scenario that trains in FP8 keeps FP8 unless --fp8 says otherwise.
  if (cons.fp8.empty() && sc.has_parallel && sc.parallel.fp8 != "off") cons.fp8 = {1};
  // Offload asked for on a profile that cannot price the host's Adam: refused with its key
  // (--shortest-time too).
  if (std::find(cons.offload.begin(), cons.offload.end(), 1) != cons.offload.end())
    hw::require_cpu_adam_rate(pr.profile, "--offload on");
  if (sc.has_parallel && sc.parallel.optimizer_offload)
    hw::require_cpu_adam_rate(pr.profile, "parallel.optimizer_offload");
  const GeneratorRegistry registry = default_registry();
  // --threads bounds every parallel step of the command, the search's and the generators'
  // candidates outside it (the published configuration's schedule) alike.
  std::optional<tbb::global_control> limit;
  if (o.threads > 0)
    limit.emplace(tbb::global_control::max_allowed_parallelism,
                  static_cast<std::size_t>(o.threads));
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (o.shortest_time) {
    ShortestTimeOptions so;
    so.threads = o.threads;
    so.max_gpus = o.max_gpus;
    so.constraints = cons;
    const ShortestTimeResult r = shortest_time(pr, registry, so);
    const bool json = o.format == "json";
    std::fputs(
        with_constraints(json ? shortest_time_json(pr, r) : shortest_time_table(pr, r), cons, json)
            .c_str(),
        stdout);
    return 0;
  }
  std::vector<std::string> skipped;
  SearchSpace space = default_space(pr, registry, global_batches(pr, sc), &skipped);
  if (cons.global_batch.size() > 1 && (pr.objective == Objective::kTime || pr.target.empty()))
    throw ConfigError("", cons.describe(),
                      "several global batches need an objective that compares them: iteration "
                      "time grows with the batch; give one, or use --objective time-to-loss (or "
                      "cost) with --target-loss or --tokens");
  // The scenario's own configuration is searched too.
  if (sc.has_parallel) add_scenario_chunks(sc.parallel, &space);
  if (!cons.empty()) constrain_space(cons, pr.model, pr.num_gpus, &space);
  SearchOptions opts;
  opts.top = o.top;
  opts.threads = o.threads;
  opts.des_top = o.des_top;
  opts.des_budget = o.des_budget;
  opts.max_evaluations = o.max_evaluations;
  if (tty) opts.progress = progress_bar;
  const SearchResult result = run_search(pr, space, registry, opts);
  if (tty) std::fputs("\r\033[K", stderr);
  check_not_empty(cons, space, result);
  PlanReportInput in{&pr,
                     &space,
                     &result,
                     sc.file,
                     sc.cluster_profile,
                     std::nullopt,
                     sc.published ? sc.published->source : std::string(),
                     sc.published ? sc.published->tflops_per_gpu : 0.0,
                     std::string()};
  // A published uneven split that no trim gives is scored as written (end_trim kOwnSplit).
  if (sc.has_parallel && sc.uneven_split()) {
    pr.own_split = sc.stage_layers();
    space.own_split_mtp_standalone = sc.parallel.mtp_standalone;
  }
  const CostModel model(pr, space);
  // The published configuration is compared at its own batch and GPU count only.
  const ParallelConfig& pub = sc.parallel;
  const bool same_batch =
      cons.global_batch.empty() ||
      (cons.global_batch.size() == 1 && cons.global_batch[0] == pub.global_batch_size);
  const bool same_gpus = cons.gpus == 0 || cons.gpus == pub.num_gpus();
  if (sc.has_parallel && same_batch && same_gpus) {
    SearchConfig pc;
    std::string why;
    // Scored by the same engine as the ranking's first row.
    const bool des = !result.top.empty() && result.top[0].tier == Tier::kDes;
    if (config_from_parallel(space, sc.parallel, &pc, &why)) {
      // An uneven split is named by its trim when it is one the search lays out (the depths
      // on their own stage or not, as the layout has them), and scored as written otherwise.
      bool searched_split = !sc.uneven_split();
      for (const int code : space.end_trim) {
        if (searched_split) break;
        const auto c8 = static_cast<std::uint8_t>(code);
        if (is_mtp_standalone_code(c8) != sc.parallel.mtp_standalone) continue;
        std::vector<int> split;
        if (split_for_trim_code(sc.model.num_layers,
                                sc.parallel.pipeline_parallel * sc.parallel.virtual_stages, c8,
                                &split) &&
            split == sc.stage_layers()) {
          pc.end_trim = static_cast<std::uint8_t>(code);
          searched_split = true;
        }
      }
      if (!searched_split) pc.end_trim = kOwnSplit;
      if (sc.microbatch_group_size > 0 && sc.microbatch_group_size != pub.pipeline_parallel) {
        Evaluated e;
        e.config = pc;
        e.why_not = fmt::format(
            "its interleaved microbatch groups of {} (microbatch_group_size_per_vp_stage) are "
            "not searched (the planner runs Megatron's default, p = {}); `pipewright simulate "
            "{}` simulates it",
            sc.microbatch_group_size, pub.pipeline_parallel, sc.file);
        in.published = e;
      } else if (pub.zero_stage == 3 && pub.zero3_gather == "tensor") {
        Evaluated e;
        e.config = pc;
        e.why_not = fmt::format(
            "its ZeRO-3 gathers in DeepSpeed's prefetch buckets of tensors (zero3_gather: tensor) "
            "are not a form the planner searches (by layer or by stage); `pipewright simulate {}` "
            "simulates it",
            sc.file);
        in.published = e;
      } else {
        in.published =
            des ? evaluate_config_des(model, registry, pc) : evaluate_config(model, registry, pc);
      }
    } else {
      // Outside the searched space (e.g. --schedules leaves its schedule out): named as the
      // scenario writes it, not as an empty search configuration.
      Evaluated e;
      e.why_not = why + " (outside the searched space)";
      in.published = e;
      in.published_outside = fmt::format(
          "t{}{} p{} d{} mb{} B{} {}{}", pub.tensor_parallel,
          pub.context_parallel > 1 ? fmt::format(" cp{}", pub.context_parallel) : std::string(),
          pub.pipeline_parallel, pub.data_parallel, pub.micro_batch_size, pub.global_batch_size,
          pub.schedule,
          pub.virtual_stages > 1 ? fmt::format(" v{}", pub.virtual_stages) : std::string());
    }
  }
  const bool json = o.format == "json";
  std::fputs(with_constraints(json ? render_json(in) : render_table(in), cons, json).c_str(),
             stdout);
  if (result.top.empty()) return 0;
  const SearchConfig& best = result.top[0].config;
  if (!o.report.empty()) write_plan_report(o.report, model, registry, in, sc.cluster_profile);
  if (!o.emit.empty() || !o.export_csv.empty()) {
    Provenance prov;
    prov.version = "pipewright 0.1.0";
    prov.profile_source = sc.cluster_profile;
    prov.command = "pipewright plan" + (o.scenario.empty() ? std::string() : " " + o.scenario) +
                   (cons.empty() ? std::string() : " " + cons.describe());
    // Predicted by the engine that ranked it (sim/plan_prediction.h: the DES re-simulates it).
    const Plan plan = build_plan(model, registry, best, sc.cluster_profile, prov,
                                 EmitOptions{result.top[0].tier == Tier::kDes});
    if (!o.emit.empty()) save_plan(o.emit, plan);
    if (!o.export_csv.empty()) save_pytorch_csv(o.export_csv, plan.schedule, csv_form);
  }
  return 0;
}

}  // namespace

void register_plan(CLI::App& app, int* status) {
  auto* o = new PlanOptions;  // lives as long as the app (one process, one parse)
  auto* sub = app.add_subcommand(
      "plan", "Search every schedule and 3D-parallel configuration for the fastest plan");
  sub->add_option("scenario", o->scenario,
                  "scenario YAML (default: scenarios/gpt3-175b-1024-a100.yaml)");
  sub->add_option("--objective", o->objective, "time | cost | time-to-loss")->capture_default_str();
  sub->add_option("--target-loss", o->target_loss, "target loss in nats per token (Kaplan)");
  sub->add_option("--tokens", o->tokens, "token budget");
  sub->add_option("--memory-limit", o->memory_limit_gb, "memory per GPU, GB (default: the GPU's)");
  sub->add_option("--top", o->top, "rows in the ranking")->capture_default_str();
  sub->add_option("--emit", o->emit, "write the best plan (YAML, or JSON by extension)");
  sub->add_option("--report", o->report,
                  "write an HTML report (best plan's timeline, Pareto front)");
  sub->add_option("--export-csv", o->export_csv, "write the best schedule as PyTorch CSV");
  sub->add_option("--csv-form", o->csv_form,
                  "--export-csv form: compute_only (what torchtitan and PyTorch's _load_csv read) "
                  "or compute_comms")
      ->capture_default_str();
  sub->add_option("--format", o->format, "table | json")->capture_default_str();
  sub->add_option("--threads", o->threads, "worker threads (0 = all cores)");
  sub->add_option("--des-top", o->des_top,
                  "simulate the evaluator's best N with the discrete-event simulator first, then "
                  "every configuration whose lower bound can still win; rank by it (0 = off: "
                  "the evaluator's ranking)")
      ->capture_default_str();
  sub->add_option("--des-budget", o->des_budget,
                  "most discrete-event simulations; the output says when it stops certification")
      ->capture_default_str();
  sub->add_option("--max-evaluations", o->max_evaluations,
                  "most configurations scored by the evaluator (the second tier); the output says "
                  "when it stops certification")
      ->capture_default_str();
  sub->add_flag("--shortest-time", o->shortest_time,
                "fastest possible time to train with unlimited GPUs of this type");
  sub->add_option("--max-gpus", o->max_gpus, "--shortest-time: largest GPU count swept")
      ->capture_default_str();
  // Search constraints: each restricts one dimension of the space (comma-separated lists).
  sub->add_option("--gpus", o->gpus, "use exactly N GPUs (default: the cluster's, or fewer)");
  sub->add_option("--tp", o->tp, "allowed tensor-parallel degrees, e.g. 1,2,4,8");
  sub->add_option("--pp", o->pp, "allowed pipeline-parallel degrees");
  sub->add_option("--dp", o->dp, "allowed data-parallel degrees");
  sub->add_option("--microbatch-size", o->micro_batch, "allowed microbatch sizes (sequences)");
  sub->add_option("--global-batch", o->global_batch,
                  "global batch(es) in sequences (default: the scenario's, or the critical-batch "
                  "grid with a target)");
  sub->add_option("--schedules", o->schedules,
                  "allowed schedules (generator names; NAME:vK pins K stages per device, e.g. "
                  "interleaved:v3)");
  sub->add_option("--recompute", o->recompute, "allowed recomputation: none,selective,full");
  sub->add_option("--zero", o->zero, "allowed ZeRO stages (0..3)");
  sub->add_option("--sequence-parallel", o->sequence_parallel, "on | off | both (default)");
  sub->add_option("--offload", o->offload, "optimizer offload: on | off | both (default)");
  sub->add_option("--cp", o->cp,
                  "allowed context-parallel degrees (default 1,2,4,8 with fused attention)");
  sub->add_option("--ep", o->ep,
                  "allowed expert-parallel degrees (MoE; default powers of two dividing the "
                  "experts)");
  sub->add_option("--etp", o->etp,
                  "allowed expert-tensor-parallel degrees: 1 (experts whole, EP over the tensor "
                  "and data ranks) and/or the tensor-parallel size (MoE; default both)");
  sub->add_option("--tp-comm-overlap", o->tp_comm_overlap,
                  "TP communication under the GEMMs (Megatron's tp_comm_overlap) for every "
                  "configuration with sequence parallelism and t > 1: on | off (default: the "
                  "scenario's parallel.tp_comm_overlap)");
  sub->add_option("--cp-comm-type", o->cp_comm_type,
                  "How every configuration with context parallelism exchanges keys and values "
                  "(Megatron's cp_comm_type): p2p (a ring under attention) | all_gather | a2a "
                  "(Ulysses) (default: the scenario's parallel.cp_comm_type, else p2p)");
  sub->add_option("--overlap-p2p-comm", o->overlap_p2p_comm,
                  "Pipeline transfers of every interleaved configuration over p > 1 posted one "
                  "pass ahead and waited for late (Megatron's overlap_p2p_comm): on | off "
                  "(default: the scenario's parallel.overlap_p2p_comm)");
  sub->add_option("--overlap-param-gather", o->overlap_param_gather,
                  "ZeRO-1/2's weight all-gather under the next step's forwards (Megatron's "
                  "overlap_param_gather; needs overlap_grad_reduce) for every configuration with "
                  "ZeRO-1/2: on | off | both (default: the scenario's "
                  "parallel.overlap_param_gather)");
  sub->add_option("--fp8", o->fp8,
                  "FP8 GEMMs: on | off | both (default off, or on when the scenario trains in "
                  "FP8)");
  sub->add_option("--framework", o->framework,
                  "only configurations this framework runs, so the best plan can be exported "
                  "(`pipewright export`): any (default) | megatron | torchtitan | "
                  "nemo | deepspeed");
  sub->callback([o, status, sub] {
    const auto given = [sub](const char* name) { return sub->get_option(name)->count() > 0; };
    require_positive_if_given(*sub, "--target-loss", o->target_loss, "no target");
    require_positive_if_given(*sub, "--tokens", o->tokens, "the default token budget");
    require_positive_if_given(*sub, "--memory-limit", o->memory_limit_gb, "the GPU's memory");
    // --csv-form shapes the --export-csv file: alone it would do nothing.
    if (given("--csv-form") && o->export_csv.empty())
      throw ConfigError("", "--csv-form",
                        "sets the form of the --export-csv file; give --export-csv FILE too");
    // A flag of the other mode would be silently ignored: --shortest-time runs a sweep of
    // searches (each ranked by the evaluator, its best row kept, the objective the time to the
    // target), a plain plan one search on the scenario's cluster.
    if (o->shortest_time) {
      for (const char* f : {"--objective", "--top", "--emit", "--report", "--export-csv",
                            "--des-top", "--des-budget", "--max-evaluations"})
        if (given(f))
          throw ConfigError("", f,
                            "does not apply to --shortest-time (a sweep of searches, each ranked "
                            "by the fixed-cost evaluator, reporting the fastest time to the "
                            "target); plan the point it finds with --gpus N --global-batch B");
    } else if (given("--max-gpus")) {
      throw ConfigError("", "--max-gpus",
                        "applies to --shortest-time (the largest GPU count it sweeps); to plan "
                        "on fewer GPUs than the cluster's, give --gpus N");
    }
    if (given("--des-budget") && o->des_top == 0)
      throw ConfigError("", "--des-budget",
                        "bounds the discrete-event tier, which --des-top 0 turns off");
    *status = run_plan(*o);
  });
}

}  // namespace pw::tools
