#include "planner/search/plan_emit.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/lowering.h"
#include "planner/search/search.h"
#include "sim/evaluator.h"
#include "sim/plan_prediction.h"

namespace pw {

bool config_from_parallel(const SearchSpace& space, const ParallelConfig& pc, SearchConfig* out,
                          std::string* why) {
  int found = -1;
  for (std::size_t i = 0; i < space.schedules.size(); ++i) {
    const ScheduleOption& o = space.schedules[i];
    if (o.name != pc.schedule) continue;
    if (o.takes_v && o.v != pc.virtual_stages) continue;
    found = static_cast<int>(i);
    break;
  }
  if (found < 0) {
    *why = fmt::format("schedule '{}' with v={} is not among the registered schedules", pc.schedule,
                       pc.virtual_stages);
    return false;
  }
  SearchConfig c;
  c.t = static_cast<std::uint16_t>(pc.tensor_parallel);
  c.p = static_cast<std::uint16_t>(pc.pipeline_parallel);
  c.d = static_cast<std::uint16_t>(pc.data_parallel);
  c.micro_batch = static_cast<std::uint16_t>(pc.micro_batch_size);
  c.microbatches =
      static_cast<std::uint16_t>(pc.global_batch_size / (pc.micro_batch_size * pc.data_parallel));
  c.schedule = static_cast<std::uint8_t>(found);
  c.recompute = pc.recompute == "full" ? 2 : pc.recompute == "selective" ? 1 : 0;
  c.sequence_parallel = pc.sequence_parallel ? 1 : 0;
  c.zero = static_cast<std::uint8_t>(pc.zero_stage);
  c.zero3_stage = pc.zero_stage == 3 && pc.zero3_gather == "stage" ? 1 : 0;
  c.param_gather = pc.overlap_param_gather ? 1 : 0;
  c.offload = pc.optimizer_offload ? 1 : 0;
  c.end_trim = 0;
  if (pc.context_parallel > 255 || pc.expert_parallel > 65535) {
    *why = fmt::format(
        "cp = {} / ep = {} is beyond what the search represents (cp <= 255, "
        "ep <= 65535)",
        pc.context_parallel, pc.expert_parallel);
    return false;
  }
  c.cp = static_cast<std::uint8_t>(pc.context_parallel);
  c.ep = static_cast<std::uint16_t>(pc.expert_parallel);
  c.fp8 = pc.fp8 != "off" ? 1 : 0;
  if (pc.expert_tp() != pc.tensor_parallel && pc.expert_tp() != 1) {
    *why = fmt::format("expert_tensor_parallel {} is neither 1 nor t = {} (what the search runs)",
                       pc.expert_tp(), pc.tensor_parallel);
    return false;
  }
  c.etp1 = pc.expert_tp() == 1 && pc.tensor_parallel > 1 ? 1 : 0;
  *out = c;
  return true;
}

namespace {

/// The evaluator's prediction (the fallback): fixed per-(stage, kind) costs from the planner's
/// cost model, hops on the send -> receive edges, DP and optimizer added to the iteration.
void predict_with_evaluator(const CostModel& model, const SearchConfig& c, const Schedule& s,
                            double eval_iteration, Plan* plan) {
  const CostTable table = config_cost_table(model, c, s);
  Evaluator ev(plan->schedule);
  const EvalResult& r = ev.run(table);
  const DependencyGraph& g = ev.graph();
  plan->predicted.clear();
  plan->predicted.reserve(r.start.size());
  for (int d = 0; d + 1 < static_cast<int>(g.device_begin.size()); ++d)
    for (int id = g.device_begin[d]; id < g.device_begin[d + 1]; ++id)
      plan->predicted.push_back({d, id - g.device_begin[d], r.start[id], r.end[id]});
  plan->predicted_iteration = seconds_to_ps(eval_iteration);
}

}  // namespace

Plan build_plan(const CostModel& model, const GeneratorRegistry& registry, const SearchConfig& c,
                const std::string& cluster, const Provenance& provenance,
                const EmitOptions& options, std::string* source) {
  Schedule s;
  const Evaluated e = evaluate_config(model, registry, c, &s);
  if (s.actions.empty())
    throw ConfigError("", "--emit", "the chosen configuration cannot be generated: " + e.why_not);
  Plan plan;
  plan.model = model.problem().model;
  plan.flash_attention = model.problem().sim.flash_attention;
  plan.cluster = cluster;
  plan.config = parallel_from_config(model.space(), c);
  plan.schedule = complete_for_execution(s, c.cp * c.d);
  for (int rank = 0; rank < c.p; ++rank) plan.rank_to_gpu.push_back(rank * c.t * c.cp * c.d);
  plan.provenance = provenance;

  // The plan's own lowered schedule on the DES, with the input and options `simulate --plan`
  // rebuilds (sim/plan_prediction.h), so the plan re-simulates to its own prediction.
  std::string used = kPredictionEvaluator, why;
  if (!options.des) {
    why = "the ranking was by the evaluator";
  } else {
    std::vector<ActionTiming> timings;
    const IterationResult r = simulate_emitted_plan(model, plan, false, &timings);
    plan.predicted = std::move(timings);
    plan.predicted_iteration = r.iteration;
    used = kPredictionDes;
  }
  if (used == kPredictionEvaluator) predict_with_evaluator(model, c, s, e.iteration, &plan);
  plan.provenance.prediction_source = used;
  if (!why.empty()) plan.provenance.prediction_source += " (" + why + ")";
  if (source) *source = used;
  return plan;
}

IterationResult simulate_emitted_plan(const CostModel& model, const Plan& plan, bool trace,
                                      std::vector<ActionTiming>* timings) {
  IterationOptions opt = model.problem().sim;
  opt.representative = true;  // as the ranking (des_rescore)
  opt.trace = trace;
  ParallelConfig par = plan.config;
  par.virtual_stages = std::max(1, par.virtual_stages);
  return simulate_iteration(
      plan_iteration_input(plan.model, par, model.problem().profile, plan.schedule), opt, timings);
}

}  // namespace pw
