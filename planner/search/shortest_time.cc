#include "planner/search/shortest_time.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "planner/search/search_report.h"

namespace pw {
namespace {

// The space searched at one sweep point: a lighter default (microbatch 1..4, ZeRO 0-1, no
// offload) unless the constraints name that dimension, in which case they choose among all of
// the default space's values. Throws ConfigError when the constraints leave nothing here.
SearchSpace point_space(const SearchSpace& base, const ModelShape& model,
                        const SearchConstraints& c, int gpus, int batch) {
  SearchSpace s = base;
  s.gpu_counts = {gpus};
  s.global_batches = {batch};
  s.micro_batches = {1, 2, 4};
  if (c.zero.empty()) s.zero = {0, 1};
  if (c.offload.empty()) s.offload = {0};
  s.end_trim = {0, 1};
  if (!c.empty()) constrain_space(c, model, gpus, &s);
  return s;
}

// Refuses what the sweep chooses itself, and constraints that contradict the model or every
// point of the sweep (the same checks as `plan`, over all swept GPU counts and batches).
// Returns the constrained space used to describe configurations.
SearchSpace check_constraints(const SearchSpace& base, const ModelShape& model,
                              const SearchConstraints& c, const std::vector<int>& counts,
                              const std::vector<int>& batches) {
  SearchSpace s = base;
  s.micro_batches = {1, 2, 4};
  if (c.empty()) return s;
  if (c.gpus > 0 || !c.global_batch.empty())
    throw ConfigError("", "--shortest-time " + c.describe(),
                      "the sweep chooses the GPU count and the global batch itself; drop --gpus "
                      "and --global-batch (or plan one point: pipewright plan --gpus N "
                      "--global-batch B ...)");
  if (counts.empty()) return s;
  s.gpu_counts = counts;
  s.global_batches = batches;
  SearchConstraints all = c;
  if (all.micro_batch.empty()) all.micro_batch = {1, 2, 4};
  constrain_space(all, model, counts.front(), &s);
  return s;
}

std::string bound_text(const PlanProblem& pr, const ShortestTimeResult& r) {
  const ShortestTimePoint& b = r.best;
  const double tokens = static_cast<double>(b.global_batch) * pr.model.seq_length;
  std::string s = fmt::format(
      "critical batch: at B = {:.3g} tokens (B_crit = {:.3g}) training takes {:.3g} steps = "
      "{:.2f} x S_min; ",
      tokens, r.b_crit_tokens, b.steps, b.steps / r.s_min);
  // What doubling the GPUs at the same batch would give.
  for (const ShortestTimePoint& p : r.points) {
    if (p.global_batch != b.global_batch || p.gpus != 2 * b.gpus) continue;
    if (!p.feasible)
      s += fmt::format("{} GPUs at this batch has no feasible configuration; ", p.gpus);
    else
      s += fmt::format("{} GPUs would take {:.2f} days ({}); ", p.gpus, p.days,
                       limits_line(pr, r.space, p.best));
  }
  s += "per step: " + limits_line(pr, r.space, b.best);
  return s;
}

}  // namespace

ShortestTimeResult shortest_time(const PlanProblem& problem, const GeneratorRegistry& registry,
                                 const ShortestTimeOptions& options) {
  ShortestTimeResult r;
  r.max_gpus = options.max_gpus;
  // The sweep doubles whole nodes from one: a ceiling below a node would sweep nothing.
  if (options.max_gpus < problem.gpus_per_node())
    throw ConfigError("", "--max-gpus",
                      fmt::format("{}: the sweep counts whole nodes of {} {} GPUs, from one; "
                                  "expected at least {}",
                                  options.max_gpus, problem.gpus_per_node(), problem.profile.name,
                                  problem.gpus_per_node()));
  const double params = hw::non_embedding_parameter_count(problem.model);
  const double all_params = hw::parameter_count(problem.model);
  if (problem.target.loss > 0) {
    r.target_loss = problem.target.loss;
    r.note = fmt::format("target loss {:.3f} nats", r.target_loss);
  } else {
    const double tokens = problem.target.tokens > 0 ? problem.target.tokens : 20 * all_params;
    r.target_loss = chinchilla_loss(all_params, tokens);
    r.note = fmt::format("target loss {:.3f} nats = Chinchilla's loss after {:.3g} tokens{}",
                         r.target_loss, tokens,
                         problem.target.tokens > 0 ? "" : " (20 tokens per parameter)");
  }
  r.b_crit_tokens = critical_batch_tokens(r.target_loss);
  r.s_min = min_steps(params, r.target_loss);
  if (!std::isfinite(r.s_min)) {
    r.note = fmt::format("target loss {:.3f} is below what this model can reach ({:.3f})",
                         r.target_loss, loss_floor(params));
    return r;
  }
  PlanProblem pr = problem;
  pr.objective = Objective::kTime;
  const SearchSpace base = default_space(pr, registry, {1});
  const double crit_seqs = r.b_crit_tokens / problem.model.seq_length;
  const int center = static_cast<int>(std::lround(std::log2(std::max(1.0, crit_seqs))));
  const int gpn = problem.gpus_per_node();
  const SearchConstraints& cons = options.constraints;
  {
    std::vector<int> counts, batches;
    for (long long n = gpn; n <= options.max_gpus; n *= 2) counts.insert(counts.begin(), n);
    for (int k = std::max(0, center - 3); k <= std::min(16, center + 3); ++k)
      batches.push_back(1 << k);
    r.space = check_constraints(base, problem.model, cons, counts, batches);
  }
  for (int k = std::max(0, center - 3); k <= std::min(16, center + 3); ++k) {
    const int batch = 1 << k;
    double best_days = INFINITY;
    int worse = 0;
    const int max_n =
        std::min<long long>(options.max_gpus, 1LL * batch * gpn * problem.model.num_layers);
    for (int n = gpn; n <= max_n && worse < 2; n *= 2) {
      pr.num_gpus = n;
      SearchOptions so;
      so.top = 1;
      so.threads = options.threads;
      so.max_evaluations = 400;
      // Dozens of points: the fixed-cost evaluator ranks each (tier "eval"); the DES tier is
      // for a single search (`pipewright plan`).
      so.des_top = 0;
      ShortestTimePoint pt;
      pt.global_batch = batch;
      pt.gpus = n;
      pt.steps = steps_at_batch(r.s_min, r.b_crit_tokens,
                                static_cast<double>(batch) * problem.model.seq_length);
      SearchResult sr;
      try {
        sr = run_search(pr, point_space(base, problem.model, cons, n, batch), registry, so);
      } catch (const ConfigError&) {
        // The constraints leave no configuration at this point (e.g. t*p above n).
      }
      if (!sr.top.empty()) {
        pt.feasible = true;
        pt.best = sr.top[0];
        pt.days = pt.steps * pt.best.iteration / 86400.0;
      }
      r.points.push_back(pt);
      if (!pt.feasible) continue;
      if (pt.days < best_days * 0.98) {
        best_days = pt.days;
        worse = 0;
      } else {
        ++worse;
      }
      if (!r.feasible || pt.days < r.best.days) {
        r.best = pt;
        r.feasible = true;
      }
    }
  }
  if (r.feasible) r.bound = bound_text(problem, r);
  return r;
}

std::string shortest_time_table(const PlanProblem& pr, const ShortestTimeResult& r) {
  // The default ceiling (1 << 16) stands for no limit; `--max-gpus N` is named.
  const std::string gpus =
      r.max_gpus >= (1 << 16) ? std::string("unlimited") : fmt::format("up to {}", r.max_gpus);
  std::string o = fmt::format("shortest possible training time: {} on {} {} GPUs\n", pr.model.name,
                              gpus, pr.profile.name);
  // Below the loss floor no number of steps reaches the target (S_min is infinite).
  const std::string s_min = std::isfinite(r.s_min) ? fmt::format("S_min {:.3g} steps", r.s_min)
                                                   : std::string("no S_min (unreachable)");
  o += fmt::format("{}; critical batch {:.3g} tokens; {}\n", r.note, r.b_crit_tokens, s_min);
  if (!r.feasible) return o + "no feasible configuration at any batch size or GPU count\n";
  o += fmt::format("\n{:>8} {:>7} {:>10} {:>9} {:>8}  {}\n", "batch", "GPUs", "steps", "iter (s)",
                   "days", "configuration");
  for (const ShortestTimePoint& p : r.points) {
    if (!p.feasible) {
      o += fmt::format("{:>8} {:>7} {:>10.3g} {:>9} {:>8}  no feasible configuration\n",
                       p.global_batch, p.gpus, p.steps, "-", "-");
      continue;
    }
    o += fmt::format("{:>8} {:>7} {:>10.3g} {:>9.3f} {:>8.2f}  {}\n", p.global_batch, p.gpus,
                     p.steps, p.best.iteration, p.days, describe_config(r.space, p.best.config));
  }
  const ShortestTimePoint& b = r.best;
  o += fmt::format("\nfastest: {:.2f} days on {} GPUs ({:.3g} GPU-hours) with {}\n", b.days, b.gpus,
                   b.days * 24 * b.gpus, describe_config(r.space, b.best.config));
  o += "bounded by: " + r.bound + "\n";
  return o;
}

std::string shortest_time_json(const PlanProblem& pr, const ShortestTimeResult& r) {
  nlohmann::json j;
  j["model"] = pr.model.name;
  j["gpu"] = pr.profile.name;
  j["note"] = r.note;
  j["target_loss"] = r.target_loss;
  j["critical_batch_tokens"] = r.b_crit_tokens;
  j["s_min"] = r.s_min;
  j["feasible"] = r.feasible;
  j["max_gpus"] = r.max_gpus;
  nlohmann::json pts = nlohmann::json::array();
  for (const ShortestTimePoint& p : r.points) {
    nlohmann::json x = {{"global_batch", p.global_batch},
                        {"gpus", p.gpus},
                        {"steps", p.steps},
                        {"feasible", p.feasible}};
    if (p.feasible) {
      x["iteration_s"] = p.best.iteration;
      x["days"] = p.days;
      x["config"] = describe_config(r.space, p.best.config);
    }
    pts.push_back(x);
  }
  j["points"] = pts;
  if (r.feasible) {
    j["best"] = {{"global_batch", r.best.global_batch},
                 {"gpus", r.best.gpus},
                 {"days", r.best.days},
                 {"gpu_hours", r.best.days * 24 * r.best.gpus},
                 {"config", describe_config(r.space, r.best.best.config)},
                 {"bounded_by", r.bound}};
    const SearchConfig& c = r.best.best.config;
    const ScheduleOption& so = r.space.schedules[c.schedule];
    j["best"]["configuration"] = {
        {"tensor_parallel", c.t},
        {"pipeline_parallel", c.p},
        {"data_parallel", c.d},
        {"micro_batch_size", c.micro_batch},
        {"schedule", so.name},
        {"virtual_stages", so.v},
        {"recompute", recompute_name(static_cast<Recompute>(c.recompute))},
        {"sequence_parallel", c.sequence_parallel != 0},
        {"zero_stage", c.zero},
        {"optimizer_offload", c.offload != 0}};
  }
  return j.dump(2) + "\n";
}

}  // namespace pw
