#include "report/scenario_compare.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "planner/search/plan_emit.h"
#include "planner/search/scenario_input.h"
#include "planner/search/search.h"
#include "planner/search/search_report.h"
#include "report/build.h"
#include "sim/evaluator.h"
#include "sim/iteration.h"

namespace pw {
namespace {

// Index of the option for `name` in `space`: the scenario's v for interleaved-style generators
// when registered, else the first option of that name; -1 when the probe left it out.
int option_index(const SearchSpace& space, const std::string& name, int v) {
  int first = -1;
  for (std::size_t i = 0; i < space.schedules.size(); ++i) {
    const ScheduleOption& o = space.schedules[i];
    if (o.name != name) continue;
    if (first < 0) first = static_cast<int>(i);
    if (!o.takes_v || o.v == v) return static_cast<int>(i);
  }
  return first;
}

// One schedule on the scenario as `plan` scores a row with its discrete-event simulator, the
// engine `simulate SCENARIO` runs: generated with the planner's inputs for the configuration
// (cost ratios, memory budget), simulated with one representative GPU per pipeline rank, its
// per-action intervals drawn as the timeline and its memory over time as the strips. `fits`
// is against the problem's limit (--memory-limit, or the GPU's usable memory).
ScheduleReport score(const CostModel& model, const GeneratorRegistry& registry,
                     const SearchConfig& c, const std::string& name) {
  const PlanProblem& pr = model.problem();
  ScheduleReport out;
  out.name = name;
  out.description = registry.get(name, "--schedules").description;
  Schedule s;
  const Evaluated e = evaluate_config(model, registry, c, &s);
  if (s.actions.empty()) {
    out.error = e.why_not.empty() ? "could not be generated" : e.why_not;
    return out;
  }
  IterationOptions opt = pr.sim;
  opt.representative = true;
  opt.trace = true;  // the memory strips
  std::vector<ActionTiming> timings;
  const IterationResult r = simulate_iteration(des_input(pr, model.space(), c, s), opt, &timings);
  out = simulated_iteration_report(name, out.description, s, timings, r);
  double peak = 0;
  for (const DeviceMemory& m : r.memory) peak = std::max(peak, m.peak);
  out.fits = peak <= pr.limit();
  return out;
}

}  // namespace

ReportInput compare_on_scenario(const hw::Scenario& sc, const std::vector<std::string>& names,
                                double memory_limit_bytes) {
  if (!sc.has_parallel)
    throw ConfigError(sc.file, "parallel",
                      "compare needs the scenario's parallel configuration (tensor/pipeline "
                      "sizes, micro and global batch)");
  const GeneratorRegistry registry = default_registry();
  for (const std::string& n : names) registry.get(n, "--schedules");
  PlanProblem pr = plan_problem(sc);
  pr.memory_limit = memory_limit_bytes;
  // The scenario's own split (a layout, first/last stage sizes) for the schedules with its
  // stage count; the others take the planner's even split.
  if (sc.uneven_split()) pr.own_split = sc.stage_layers();
  SearchSpace space;
  space.own_split_mtp_standalone = !pr.own_split.empty() && sc.parallel.mtp_standalone;
  // The scenario's own gradient precision and overlaps, as `plan` prices them.
  space.grad_reduce_in_fp32 = pr.grad_reduce_in_fp32;
  space.overlap_grad_reduce = pr.overlap_grad_reduce;
  space.param_gather = {pr.overlap_param_gather ? 1 : 0};
  space.align_param_gather = pr.align_param_gather;
  space.ddp_bucket_size = pr.ddp_bucket_size;
  space.overlap_p2p_comm = pr.overlap_p2p_comm;
  space.tp_comm_overlap = pr.tp_comm_overlap;
  space.cp_comm_type = pr.cp_comm_type;
  space.schedules = probe_schedules(registry, {2, 3, 4, 6, 8});
  add_scenario_chunks(sc.parallel, &space);  // its own v (e.g. Megatron's 5) among the options
  const CostModel model(pr, space);

  ReportInput in;
  in.title = "pipewright compare: " + (sc.file.empty() ? std::string("scenario") : sc.file);
  const ParallelConfig& par = sc.parallel;
  in.context = {
      {"model", sc.model.name},
      {"cluster", fmt::format("{} x {} GPUs", sc.cluster_profile, sc.num_gpus())},
      {"parallel",
       fmt::format("t{} p{} d{}", par.tensor_parallel, par.pipeline_parallel, par.data_parallel)},
      {"batch", fmt::format("micro {} global {}", par.micro_batch_size, par.global_batch_size)},
      {"recompute", par.recompute},
      {"ZeRO", std::to_string(par.zero_stage)},
      {"memory limit", fmt::format("{:.1f} GB per GPU", pr.limit() / 1e9)}};
  in.memory_unit = "GB";
  in.memory_total = true;
  in.memory_limit = pr.limit() * 1e-9;
  for (const std::string& n : names) {
    // Without a pipeline every schedule runs the one stage's passes in order: the first
    // (plain linear) option stands for them all.
    if (par.pipeline_parallel == 1 && !space.schedules.empty() && n != space.schedules[0].name) {
      ScheduleReport r;
      r.name = n;
      r.description = registry.get(n, "--schedules").description;
      r.error = fmt::format(
          "pipeline_model_parallel_size is 1: no pipeline to schedule, every schedule runs as {}",
          space.schedules[0].name);
      in.schedules.push_back(r);
      continue;
    }
    const int idx = option_index(space, n, std::max(2, par.virtual_stages));
    if (idx < 0) {
      ScheduleReport r;
      r.name = n;
      r.description = registry.get(n, "--schedules").description;
      r.error = "its generator failed the planner's probe (p=4, m=8)";
      in.schedules.push_back(r);
      continue;
    }
    ParallelConfig pc = par;
    pc.schedule = n;
    pc.virtual_stages = space.schedules[idx].v;
    SearchConfig c;
    std::string why;
    if (!config_from_parallel(space, pc, &c, &why)) {
      ScheduleReport r;
      r.name = n;
      r.error = why;
      in.schedules.push_back(r);
      continue;
    }
    const ScheduleOption& so = space.schedules[idx];
    if (!pr.own_split.empty() && so.pipelines == 1 &&
        static_cast<int>(pr.own_split.size()) == c.p * so.v)
      c.end_trim = kOwnSplit;
    try {
      in.schedules.push_back(score(model, registry, c, n));
    } catch (const ConfigError& e) {
      ScheduleReport r;
      r.name = n;
      r.error = e.what();
      in.schedules.push_back(r);
    }
  }
  return in;
}

}  // namespace pw
