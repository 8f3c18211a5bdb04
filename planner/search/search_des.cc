// Third tier of the search: the discrete-event simulator (sim/iteration.h) on the evaluator's
// best configurations.
#include <fmt/format.h>

#include <algorithm>

#include "hwmodels/topology.h"
#include "planner/search/plan_emit.h"
#include "planner/search/search.h"
#include "sim/plan_prediction.h"

namespace pw {

const char* tier_name(Tier t) { return t == Tier::kDes ? "DES" : "eval"; }

IterationInput des_input(const PlanProblem& problem, const SearchSpace& space,
                         const SearchConfig& c, const Schedule& schedule) {
  // The same input `plan --emit` predicts a plan with and `simulate --plan` re-simulates.
  ParallelConfig par = parallel_from_config(space, c);
  par.virtual_stages = std::max(1, par.virtual_stages);
  return plan_iteration_input(problem.model, par, problem.profile, schedule);
}

void des_rescore(const PlanProblem& problem, const SearchSpace& space, const Schedule& schedule,
                 Evaluated* e) {
  IterationOptions opt = problem.sim;
  opt.representative = true;
  opt.trace = false;
  const IterationResult r = simulate_iteration(des_input(problem, space, e->config, schedule), opt);
  e->eval_iteration = e->eval_iteration > 0 ? e->eval_iteration : e->iteration;
  e->tier = Tier::kDes;
  e->iteration = ps_to_seconds(r.iteration);
  e->bubble_rate = r.bubble_rate;
  e->objective = objective_value(problem, e->config, e->iteration);
  e->mfu = r.mfu;
  e->hfu = r.hfu;
  e->pipeline_bubble = r.pipeline_bubble_rate;
  // The DES's memory is the plan's memory: one figure and one fit per row.
  e->peak_memory = 0;
  for (const DeviceMemory& m : r.memory) e->peak_memory = std::max(e->peak_memory, m.peak);
  const double limit = problem.limit();
  e->feasible = r.fits && e->peak_memory <= limit;
  e->why_not = e->feasible
                   ? ""
                   : fmt::format("needs {:.1f} GB per GPU by the simulator, limit {:.1f} GB",
                                 e->peak_memory / 1e9, limit / 1e9);
}

Evaluated evaluate_config_des(const CostModel& model, const GeneratorRegistry& registry,
                              const SearchConfig& c) {
  Schedule s;
  Evaluated e = evaluate_config(model, registry, c, &s);
  // Whatever the evaluator's memory says: the DES decides what fits.
  if (!s.actions.empty()) des_rescore(model.problem(), model.space(), s, &e);
  return e;
}

}  // namespace pw
