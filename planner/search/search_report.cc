#include "planner/search/search_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace pw {

double model_tflops_per_gpu(const PlanProblem& pr, const Evaluated& e) {
  return e.mfu * pr.profile.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)] / 1e12;
}

double mfu(const PlanProblem& pr, const Evaluated& e) {
  (void)pr;
  return e.mfu;
}

double pipeline_bubble(const Evaluated& e) {
  return e.tier == Tier::kDes ? e.pipeline_bubble : e.bubble_rate;
}

std::string limits_line(const PlanProblem& pr, const SearchSpace& space, const Evaluated& e) {
  // The breakdown is the evaluator's: take its shares of the evaluator's own iteration time.
  const TimeBreakdown& b = e.breakdown;
  const double T = e.eval_iteration > 0 ? e.eval_iteration : e.iteration;
  struct Part {
    const char* name;
    double v;
  };
  // The pass-blocking collectives: TP, and the MoE all-to-all when experts are split.
  const char* pass_comm = e.config.ep > 1 ? "network: tensor/expert-parallel collectives"
                                          : "network: tensor-parallel collectives";
  const Part parts[] = {{"pipeline bubbles", b.bubble},
                        {pass_comm, b.tp_comm},
                        {"network: data-parallel gradient reduction", b.dp_comm},
                        {"optimizer step", b.optimizer}};
  const Part* top = &parts[0];
  for (const Part& p : parts)
    if (p.v > top->v) top = &p;
  std::string s = fmt::format("{} ({:.1f}% of the iteration; compute {:.1f}%)", top->name,
                              100 * top->v / T, 100 * b.compute / T);
  const double share = e.peak_memory / pr.limit();
  const SearchConfig& c = e.config;
  std::string needs;
  if (c.recompute == 2) needs += " full recomputation";
  if (c.recompute == 1) needs += " selective recomputation";
  if (c.zero == 3) needs += " ZeRO-3";
  if (c.offload) needs += " optimizer offload";
  if (share > 0.85 || !needs.empty())
    s += fmt::format("; memory {:.1f} of {:.1f} GB{}", e.peak_memory / 1e9, pr.limit() / 1e9,
                     needs.empty() ? std::string() : " with" + needs);
  (void)space;
  return s;
}

namespace {

std::string diff(const SearchSpace& space, const SearchConfig& a, const SearchConfig& b) {
  std::vector<std::string> d;
  auto num = [&](const char* n, int x, int y) {
    if (x != y) d.push_back(fmt::format("{} {}->{}", n, x, y));
  };
  num("t", a.t, b.t);
  num("cp", a.cp, b.cp);
  num("p", a.p, b.p);
  num("d", a.d, b.d);
  num("ep", a.ep, b.ep);
  if (a.etp1 != b.etp1)
    d.push_back(fmt::format("etp {}->{}", a.etp1 ? "1" : "t", b.etp1 ? "1" : "t"));
  num("fp8", a.fp8, b.fp8);
  num("mb", a.micro_batch, b.micro_batch);
  num("B", a.global_batch(), b.global_batch());
  const ScheduleOption &sa = space.schedules[a.schedule], &sb = space.schedules[b.schedule];
  if (a.schedule != b.schedule)
    d.push_back(fmt::format("{}{}->{}{}", sa.name, sa.takes_v ? fmt::format(" v{}", sa.v) : "",
                            sb.name, sb.takes_v ? fmt::format(" v{}", sb.v) : ""));
  if (a.recompute != b.recompute)
    d.push_back(fmt::format("rc {}->{}", recompute_name(static_cast<Recompute>(a.recompute)),
                            recompute_name(static_cast<Recompute>(b.recompute))));
  num("sp", a.sequence_parallel, b.sequence_parallel);
  num("zero", a.zero, b.zero);
  if (a.zero == 3 && b.zero == 3 && a.zero3_stage != b.zero3_stage)
    d.push_back(a.zero3_stage ? "z3 gather stage->layer" : "z3 gather layer->stage");
  num("opg", a.param_gather, b.param_gather);
  num("offload", a.offload, b.offload);
  if (a.end_trim != b.end_trim)
    d.push_back(fmt::format("ends {}->{}", end_trim_label(a.end_trim), end_trim_label(b.end_trim)));
  std::string s;
  for (std::size_t i = 0; i < d.size() && i < 3; ++i) s += (i ? ", " : "") + d[i];
  if (d.size() > 3) s += ", ...";
  return s;
}

}  // namespace

std::string why_line(const SearchSpace& space, const std::vector<Evaluated>& top, std::size_t i) {
  if (top.empty()) return "";
  if (i == 0) {
    const Evaluated& e = top[0];
    // The same figures as the table's columns: pipeline bubble, and the rest of the idle time
    // (exposed communication) from the engine that ranked the row.
    std::string s =
        fmt::format("bubble {:.1f}%, exposed communication {:.1f}%", 100 * pipeline_bubble(e),
                    100 * std::max(0.0, e.bubble_rate - pipeline_bubble(e)));
    if (top.size() > 1)
      s = fmt::format("{:.1f}% ahead of #2 ({}); ", 100 * (top[1].objective / e.objective - 1),
                      diff(space, e.config, top[1].config)) +
          s;
    return s;
  }
  return fmt::format("+{:.1f}%: {}", 100 * (top[i].objective / top[0].objective - 1),
                     diff(space, top[0].config, top[i].config));
}

TrainTime train_time(const PlanProblem& pr, const Evaluated& e) {
  TrainTime t;
  const double params = hw::non_embedding_parameter_count(pr.model);
  const double tokens = batch_tokens(pr, e.config);
  TrainingTarget target = pr.target;
  if (target.empty()) {
    target.tokens = 300e9;
    t.note = "for 300B tokens (GPT-3's budget; set --tokens or --target-loss)";
  } else if (target.loss > 0) {
    t.note = fmt::format("to loss {:.3f} nats (Kaplan)", target.loss);
  } else {
    t.note = fmt::format("for {:.3g} tokens", target.tokens);
  }
  const TrainingNeed need = training_need(params, target, tokens);
  t.feasible = need.feasible;
  if (!need.feasible) {
    t.note = need.reason;
    return t;
  }
  t.tokens = need.tokens;
  t.steps = need.steps;
  t.b_crit_tokens = need.b_crit;
  t.days = need.steps * e.iteration / 86400.0;
  t.gpu_hours = need.steps * e.iteration * e.config.gpus() / 3600.0;
  return t;
}

namespace {

std::vector<std::string> row(const PlanReportInput& in, const Evaluated& e, std::size_t rank,
                             const std::string& why) {
  const PlanProblem& pr = *in.problem;
  const double tokens = batch_tokens(pr, e.config);
  return {std::to_string(rank),
          describe_config(*in.space, e.config),
          fmt::format("{:.3f}", e.iteration),
          tier_name(e.tier),
          fmt::format("{:.0f}", tokens / e.iteration),
          fmt::format("{:.1f}%", 100 * e.mfu),
          fmt::format("{:.1f}%", 100 * e.hfu),
          fmt::format("{:.1f}%", 100 * pipeline_bubble(e)),
          fmt::format("{:.1f}", e.peak_memory / 1e9),
          why};
}

// Column widths of the CLI's table (negative: left-aligned); the last column runs free.
constexpr int kWidths[] = {3, -58, 9, 4, 10, 6, 6, 7, 7};

std::string aligned(const std::vector<std::string>& cells) {
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const int w = i < std::size(kWidths) ? kWidths[i] : 0;
    if (i > 0) out += i == 1 || i + 1 == cells.size() ? "  " : " ";
    out += w < 0 ? fmt::format("{:<{}}", cells[i], -w) : fmt::format("{:>{}}", cells[i], w);
  }
  return out + "\n";
}

}  // namespace

RankingTable ranking_table(const PlanReportInput& in) {
  RankingTable t;
  t.header = {"#",   "configuration", "iter (s)", "tier",   "tokens/s",
              "MFU", "HFU",           "bubble",   "mem GB", "why"};
  const SearchResult& r = *in.result;
  for (std::size_t i = 0; i < r.top.size(); ++i)
    t.rows.push_back(row(in, r.top[i], i + 1, why_line(*in.space, r.top, i)));
  return t;
}

namespace {

// The published configuration as the report names it: its search description, and its layers
// per stage where it keeps the scenario's own split.
std::string published_name(const PlanReportInput& in, const Evaluated& p) {
  std::string s = describe_config(*in.space, p.config);
  if (p.config.end_trim == kOwnSplit)
    s += fmt::format(" ({} layers per stage{})", fmt::join(in.problem->own_split, "/"),
                     in.space->own_split_mtp_standalone
                         ? fmt::format(", the multi-token prediction depths alone on stage {}",
                                       in.problem->own_split.size() - 2)
                         : std::string());
  return s;
}

}  // namespace

std::string render_table(const PlanReportInput& in) {
  const PlanProblem& pr = *in.problem;
  const SearchResult& r = *in.result;
  const SearchStats& st = r.stats;
  std::string o;
  // The context-parallel form every cp > 1 row shares, when not the ring.
  const bool cp_form = in.space->cp_comm_type != "p2p" &&
                       std::any_of(in.space->context_parallel.begin(),
                                   in.space->context_parallel.end(), [](int cp) { return cp > 1; });
  o += fmt::format(
      "pipewright plan: {} ({:.1f}B parameters) on {} x {} ({} GPUs), objective {}{}\n",
      pr.model.name, hw::parameter_count(pr.model) / 1e9, pr.num_gpus / pr.gpus_per_node(),
      in.cluster, pr.num_gpus, objective_name(pr.objective),
      cp_form ? fmt::format(", context parallelism as {}", in.space->cp_comm_type) : "");
  o += fmt::format(
      "searched {} configurations ({} well formed, {} fit the screen's memory bound) in {:.2f} s "
      "on {} threads; {} simulated ({} schedules generated) in {:.2f} s{}\n",
      st.space, st.valid, st.fit, st.screen_seconds, st.threads, st.evaluated, st.generated,
      st.evaluate_seconds, st.budget_hit ? " (evaluation budget hit: ranking not proven)" : "");
  if (st.des_simulated > 0)
    o += fmt::format(
        "{} simulated with the discrete-event simulator in {:.2f} s and ranked by it{}\n",
        st.des_simulated, st.des_seconds,
        st.certified ? "; no other configuration's lower bound can beat the top (certified)" : "");
  if (!st.des_note.empty()) o += st.des_note + "\n";
  if (r.top.empty()) {
    // The GPUs the space uses (`--gpus N` fixes one count), and the need printed with as many
    // decimals as it takes to read above the limit (78.04 GB, not 78.0, against 78.0).
    const std::vector<int>& counts = in.space->gpu_counts;
    const int gpus = counts.size() == 1 ? counts[0] : pr.num_gpus;
    const double limit_gb = pr.limit() / 1e9, need_gb = r.min_memory_needed / 1e9;
    std::string need;
    if (r.min_memory_strict) {
      need = fmt::format(
          "more than {:.1f} GB per GPU (its schedule cannot be generated within "
          "the limit)",
          limit_gb);
    } else {
      int digits = 1;
      while (digits < 3 &&
             fmt::format("{:.{}f}", need_gb, digits) == fmt::format("{:.{}f}", limit_gb, digits))
        ++digits;
      need = fmt::format("at least {:.{}f} GB per GPU", need_gb, digits);
    }
    o += fmt::format(
        "\nno feasible plan: {} does not fit in {:.1f} GB per GPU on {} GPUs under any "
        "configuration; the smallest configuration needs {}\n",
        pr.model.name, limit_gb, gpus, need);
    return o;
  }
  const RankingTable t = ranking_table(in);
  o += "\n" + aligned(t.header);
  for (const auto& cells : t.rows) o += aligned(cells);
  const Evaluated& best = r.top[0];
  o += fmt::format("\nbest: {:.1f} model TFLOP/s per GPU; limited by {}\n",
                   model_tflops_per_gpu(pr, best), limits_line(pr, *in.space, best));
  if (in.published) {
    const Evaluated& p = *in.published;
    // "Published" only where the scenario names a source (its `published:` block); otherwise it
    // is the configuration the scenario's parallel section writes, whoever chose it.
    const std::string label =
        in.published_source.empty()
            ? std::string("the scenario's configuration")
            : fmt::format("published configuration ({})", in.published_source);
    if (p.feasible) {
      // The published configuration can lie outside a constrained space (or, rarely, beyond the
      // DES tier's re-simulated rows) and beat the planner's choice: say "slower", never
      // "-X% faster".
      const double gain = 100 * (p.iteration / best.iteration - 1);
      const std::string verdict = gain >= 0
                                      ? fmt::format("{:.1f}% faster", gain)
                                      : fmt::format(
                                            "{:.1f}% slower (is that configuration outside the "
                                            "constraints?)",
                                            100 * (best.iteration / p.iteration - 1));
      o += fmt::format("{}: {} -> {:.3f} s per iteration ({}); the planner's choice is {}\n", label,
                       published_name(in, p), p.iteration, tier_name(p.tier), verdict);
    } else {
      o += fmt::format("{}: {} is not feasible here: {}\n", label,
                       in.published_outside.empty() ? published_name(in, p) : in.published_outside,
                       p.why_not);
    }
  }
  const TrainTime tt = train_time(pr, best);
  if (tt.feasible)
    o += fmt::format(
        "time to train {}: {:.1f} days, {:.3g} GPU-hours ({:.3g} steps; critical "
        "batch {:.3g} tokens, this batch {:.3g})\n",
        tt.note, tt.days, tt.gpu_hours, tt.steps, tt.b_crit_tokens, batch_tokens(pr, best.config));
  else
    o += "time to train: " + tt.note + "\n";
  // With fused attention the two count attention differently, so MFU can exceed HFU: say so.
  o += fmt::format(
      "\nMFU/HFU: model/hardware FLOPs (recomputation counted in HFU{}) over time x "
      "GPUs x the {:.0f} TFLOP/s BF16 peak; bubble: pipeline idle share of the "
      "busiest GPU (exposed communication excluded)\n",
      pr.sim.flash_attention ? "; attention over all s x s pairs in MFU, as Megatron counts, "
                               "and over the causal half the fused kernels run in HFU"
                             : "",
      pr.profile.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)] / 1e12);
  o += fmt::format("\nPareto front ({}: iteration time vs peak memory per GPU):\n",
                   !r.pareto.empty() && r.pareto[0].tier == Tier::kDes ? "discrete-event simulator"
                                                                       : "fixed-cost evaluator");
  for (const Evaluated& e : r.pareto)
    o += fmt::format("  {:>7.1f} GB  {:>9.3f} s  {}\n", e.peak_memory / 1e9, e.iteration,
                     describe_config(*in.space, e.config));
  return o;
}

namespace {

nlohmann::json to_json(const PlanReportInput& in, const Evaluated& e) {
  const PlanProblem& pr = *in.problem;
  const SearchConfig& c = e.config;
  const ScheduleOption& so = in.space->schedules[c.schedule];
  nlohmann::json j;
  j["config"] = {{"tensor_parallel", c.t},
                 {"pipeline_parallel", c.p},
                 {"data_parallel", c.d},
                 {"micro_batch_size", c.micro_batch},
                 {"global_batch_size", c.global_batch()},
                 {"microbatches", c.microbatches},
                 {"schedule", so.name},
                 {"virtual_stages", so.v},
                 {"recompute", recompute_name(static_cast<Recompute>(c.recompute))},
                 {"sequence_parallel", c.sequence_parallel != 0},
                 {"zero_stage", c.zero},
                 {"optimizer_offload", c.offload != 0},
                 {"context_parallel", c.cp},
                 {"expert_parallel", c.ep},
                 {"expert_tensor_parallel", c.etp()},
                 {"fp8", c.fp8 ? "hybrid" : "off"}};
  if (c.end_trim == kOwnSplit) {
    j["config"]["stage_layers"] = pr.own_split;
    if (in.space->own_split_mtp_standalone) j["config"]["mtp_standalone"] = true;
  } else {
    j["config"]["end_layers_trimmed"] = first_trim(c.end_trim);
    if (is_mtp_standalone_code(c.end_trim)) {
      j["config"]["mtp_standalone"] = true;
      j["config"]["mtp_stage_layers_trimmed"] = last_trim(c.end_trim);
      std::vector<int> layers;
      if (split_for_trim_code(pr.model.num_layers, c.p * so.v, c.end_trim, &layers))
        j["config"]["stage_layers"] = layers;
    } else {
      j["config"]["last_stage_layers_trimmed"] = last_trim(c.end_trim);
    }
  }
  if (c.zero == 3) j["config"]["zero3_gather"] = c.zero3_stage ? "stage" : "layer";
  if (c.cp > 1) j["config"]["cp_comm_type"] = in.space->cp_comm_type;
  if (c.fp8) j["config"]["fp8_recipe"] = in.space->fp8_recipe;
  if (c.zero == 1 || c.zero == 2) j["config"]["overlap_param_gather"] = c.param_gather != 0;
  j["iteration_s"] = e.iteration;
  j["tier"] = tier_name(e.tier);
  j["evaluator_iteration_s"] = e.eval_iteration;
  j["tokens_per_s"] = batch_tokens(pr, c) / e.iteration;
  j["mfu"] = e.mfu;
  j["hfu"] = e.hfu;
  j["bubble"] = pipeline_bubble(e);
  j["idle_rate"] = e.bubble_rate;
  j["memory_gb"] = e.peak_memory / 1e9;
  j["fits"] = e.feasible;
  j["objective"] = e.objective;
  j["breakdown_s"] = {{"compute", e.breakdown.compute},
                      {"tp_comm", e.breakdown.tp_comm},
                      {"bubble", e.breakdown.bubble},
                      {"dp_comm", e.breakdown.dp_comm},
                      {"optimizer", e.breakdown.optimizer}};
  return j;
}

}  // namespace

std::string render_json(const PlanReportInput& in) {
  const PlanProblem& pr = *in.problem;
  const SearchResult& r = *in.result;
  nlohmann::json j;
  j["model"] = pr.model.name;
  j["cluster"] = in.cluster;
  j["gpus"] = pr.num_gpus;
  j["objective"] = objective_name(pr.objective);
  j["memory_limit_gb"] = pr.limit() / 1e9;
  const SearchStats& st = r.stats;
  j["stats"] = {{"space", st.space},
                {"valid", st.valid},
                {"fit", st.fit},
                {"evaluated", st.evaluated},
                {"generated", st.generated},
                {"budget_hit", st.budget_hit},
                {"des_simulated", st.des_simulated},
                {"certified", st.certified},
                {"note", st.des_note}};
  j["feasible"] = !r.top.empty();
  if (r.top.empty()) {
    j["min_memory_needed_gb"] = r.min_memory_needed / 1e9;
    // true: the need is more than that figure (the limit), by an amount not known.
    j["min_memory_needed_strict"] = r.min_memory_strict;
    return j.dump(2) + "\n";
  }
  nlohmann::json top = nlohmann::json::array();
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    nlohmann::json e = to_json(in, r.top[i]);
    e["why"] = why_line(*in.space, r.top, i);
    top.push_back(e);
  }
  j["top"] = top;
  nlohmann::json pf = nlohmann::json::array();
  for (const Evaluated& e : r.pareto) pf.push_back(to_json(in, e));
  j["pareto"] = pf;
  j["limited_by"] = limits_line(pr, *in.space, r.top[0]);
  if (in.published) {
    nlohmann::json p = to_json(in, *in.published);
    p["source"] = in.published_source;
    if (!in.published_outside.empty()) {
      p.erase("config");  // not a configuration of the searched space
      p["configuration"] = in.published_outside;
    }
    j["published"] = p;
  }
  const TrainTime tt = train_time(pr, r.top[0]);
  j["train"] = {{"feasible", tt.feasible},
                {"note", tt.note},
                {"days", tt.days},
                {"gpu_hours", tt.gpu_hours},
                {"steps", tt.steps},
                {"tokens", tt.tokens},
                {"critical_batch_tokens", tt.b_crit_tokens}};
  return j.dump(2) + "\n";
}

}  // namespace pw
