// Third tier of the search: the discrete-event simulator (sim/iteration.h) on the evaluator's
// best configurations.
#include <fmt/format.h>

#include <algorithm>

#include "hwmodels/topology.h"
#include "planner/plan_emit.h"
#include "planner/search.h"
#include "sim/plan_prediction.h"

namespace pw {

const char* tier_name(Tier t) { return t == Tier::kDes ? "DES" : "eval"; }

std::optional<hw::HardwareProfile> des_profile(const PlanProblem& problem) {
  if (problem.profile) return problem.profile;
  std::string name = problem.gpu.name;
  if (name == "a100") name = "dgx-a100-80gb";
  if (name == "h100") name = "dgx-h100";
  if (name == "dgx-h200") name = "h200";
  const std::vector<std::string> shipped = hw::shipped_profile_names();
  if (std::find(shipped.begin(), shipped.end(), name) == shipped.end()) return std::nullopt;
  try {
    return hw::resolve_profile(name, "", "", "cluster.profile");
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

IterationInput des_input(const PlanProblem& problem, const hw::HardwareProfile& profile,
                         const SearchSpace& space, const SearchConfig& c,
                         const Schedule& schedule) {
  // The same input `plan --emit` predicts a plan with and `simulate --plan` re-simulates.
  ParallelConfig par = parallel_from_config(space, c);
  par.virtual_stages = std::max(1, par.virtual_stages);
  return plan_iteration_input(problem.model, par, profile, schedule);
}

void des_rescore(const PlanProblem& problem, const hw::HardwareProfile& profile,
                 const SearchSpace& space, const Schedule& schedule, Evaluated* e,
                 const IterationOptions& options) {
  IterationOptions opt = options;
  opt.representative = true;
  opt.trace = false;
  const IterationResult r =
      simulate_iteration(des_input(problem, profile, space, e->config, schedule), opt);
  e->eval_iteration = e->eval_iteration > 0 ? e->eval_iteration : e->iteration;
  e->tier = Tier::kDes;
  e->iteration = ps_to_seconds(r.iteration);
  e->bubble_rate = r.bubble_rate;
  e->objective = objective_value(problem, e->config, e->iteration);
  e->des_fits = r.fits;
  e->des_peak_memory = 0;
  for (const DeviceMemory& m : r.memory) e->des_peak_memory = std::max(e->des_peak_memory, m.peak);
}

Evaluated evaluate_config_des(const CostModel& model, const GeneratorRegistry& registry,
                              const hw::HardwareProfile& profile, const SearchConfig& c,
                              const IterationOptions& options) {
  Schedule s;
  Evaluated e = evaluate_config(model, registry, c, &s);
  if (e.feasible) des_rescore(model.problem(), profile, model.space(), s, &e, options);
  return e;
}

}  // namespace pw
