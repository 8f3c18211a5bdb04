#include "planner/search/scenario_input.h"

#include <fmt/format.h>

#include "core/error.h"
#include "hwmodels/estimate.h"
#include "planner/schedules/generator.h"
#include "planner/search/plan_emit.h"
#include "planner/search/search.h"
#include "planner/search/search_eval.h"

namespace pw {
namespace {

/// Lays the scenario's uneven split onto a placement whose stages run in layer order on devices
/// 0, 1, ..., p-1, 0, 1, ... (one stage per device, or Megatron's interleaved chunks: the split
/// names its stages so; V and multi-pipeline placements have no such mapping).
void apply_stage_layers(const hw::Scenario& s, const std::vector<int>& layers, Placement* pl) {
  const int n = static_cast<int>(layers.size());
  bool looped = pl->num_stages() == n && pl->num_pipelines() == 1;
  for (int st = 0; looped && st < n; ++st)
    looped = pl->stages[st].index == st && pl->stages[st].device == st % pl->num_devices;
  if (!looped)
    throw ConfigError(s.file, "parallel.schedule",
                      fmt::format("'{}' places {} stages on {} devices; an uneven split "
                                  "(decoder_first/last_pipeline_num_layers, or a "
                                  "pipeline_model_parallel_layout of {} stages) needs a schedule "
                                  "that runs stage i on device i mod p",
                                  s.parallel.schedule, pl->num_stages(), pl->num_devices, n));
  // The placement stays what the generator made it (linear): the split moves layers, not
  // stages, and the simulator runs Megatron's pipeline calls for a linear 1F1B as `plan` does.
  assign_stage_layers(layers, pl);
}

// A memory-reading generator's inputs for the scenario's configuration as the planner gives
// them (detail::generator_params: its cost ratios, the share of the activation W holds, the
// hop and the GPU's activation budget), so that `simulate SCENARIO` runs the schedule `plan`
// scores for it. False with `why` where the planner cannot express the configuration.
bool planner_generator_params(const hw::Scenario& s, const GeneratorRegistry& reg,
                              GeneratorParams* gp, std::string* why) {
  const PlanProblem pr = plan_problem(s);
  SearchSpace space = default_space(pr, reg, {static_cast<int>(s.parallel.global_batch_size)});
  std::erase_if(space.schedules,
                [&](const ScheduleOption& o) { return o.name != s.parallel.schedule; });
  SearchConfig c;
  if (!config_from_parallel(space, s.parallel, &c, why)) return false;
  const CostModel model(pr, space);
  StageCosts sc;
  if (!model.stage_costs(c, &sc)) {
    *why = "not a configuration the planner prices";
    return false;
  }
  return detail::generator_params(model, c, sc, gp, why);
}

}  // namespace

void add_scenario_chunks(const ParallelConfig& pc, SearchSpace* space) {
  if (pc.virtual_stages <= 1) return;
  bool have = false;
  const ScheduleOption* like = nullptr;
  for (const ScheduleOption& so : space->schedules)
    if (so.name == pc.schedule && so.takes_v) {
      like = &so;
      have = have || so.v == pc.virtual_stages;
    }
  if (like && !have) {
    ScheduleOption extra = *like;
    extra.v = pc.virtual_stages;
    space->schedules.push_back(extra);
  }
}

PlanProblem plan_problem(const hw::Scenario& s) {
  PlanProblem pr;
  pr.model = s.model;
  pr.profile = s.profile;
  pr.profile.node = s.topology.node;
  pr.profile.fabric = s.topology.fabric;
  pr.num_gpus = s.num_gpus();
  pr.sim.flash_attention = s.flash_attention;
  pr.grad_reduce_in_fp32 = s.parallel.grad_reduce_in_fp32;
  pr.overlap_grad_reduce = s.parallel.overlap_grad_reduce;
  pr.overlap_param_gather = s.parallel.overlap_param_gather;
  pr.align_param_gather = s.parallel.align_param_gather;
  pr.ddp_bucket_size = s.parallel.ddp_bucket_size;
  pr.overlap_p2p_comm = s.parallel.overlap_p2p_comm;
  pr.tp_comm_overlap = s.parallel.tp_comm_overlap;
  pr.cp_comm_type = s.parallel.cp_comm_type;
  pr.fp8_recipe = s.parallel.fp8_recipe;
  return pr;
}

IterationInput scenario_iteration_input(const hw::Scenario& s) {
  const GeneratorRegistry reg = default_registry();
  if (reg.find(s.parallel.schedule) == nullptr) {
    std::vector<std::string> names = reg.names();
    throw ConfigError(s.file, "parallel.schedule",
                      fmt::format("unknown schedule '{}' (did you mean '{}'?); expected one of: {}",
                                  s.parallel.schedule, nearest_name(s.parallel.schedule, names),
                                  fmt::join(names, ", ")));
  }
  GeneratorParams gp;
  gp.p = s.parallel.pipeline_parallel;
  gp.m = static_cast<int>(s.num_microbatches());
  gp.v = s.parallel.virtual_stages > 1 ? s.parallel.virtual_stages : 0;
  gp.group_size = s.microbatch_group_size;
  gp.num_layers = s.model.num_layers;
  const std::vector<int> layers = s.stage_layers();
  const GeneratorCaps& caps = reg.find(s.parallel.schedule)->caps;
  if (caps.reads_costs) {
    // Generators that read the pass costs get what the planner gives them for this
    // configuration, so that `simulate` runs the schedule `plan` scores: the middle stage's cost
    // ratios on the planner's grid (given the exact times instead, V-Half ordered GPT-3's t2 p16
    // d32 differently: 19.973 s here against 20.009 s in `plan`), and for the memory-reading
    // ones (ZB-1p, V-ZB, v-adaptive, ...) the share of each activation W holds and the GPU's
    // activation budget (with W assumed to hold nothing, ZB-1p deferred every W and held 75
    // microbatches of activations where its definition allows p). Generators that read no
    // costs order their passes alike whatever they cost.
    std::string why;
    if (!planner_generator_params(s, reg, &gp, &why))
      throw ConfigError(
          s.file, "parallel.schedule",
          fmt::format("'{}' reads the pass costs{}, and the planner cannot price "
                      "this configuration for it: {}",
                      s.parallel.schedule, caps.memory_aware ? " and the GPU's memory" : "", why));
  }
  IterationInput in;
  in.model = s.model;
  in.parallel = s.parallel;
  in.profile = s.profile;
  in.topology = s.topology;
  try {
    in.schedule = generate_schedule(reg, s.parallel.schedule, gp);
  } catch (const ConfigError& e) {
    throw ConfigError(s.file, "parallel.schedule", e.message());
  }
  if (s.uneven_split()) {
    apply_stage_layers(s, layers, &in.schedule.placement);
  } else {
    // Stages that do not divide the layers evenly (a V's 2p chunks of an odd L/p) take the
    // planner's split (split_layers: the first stages one more), as `plan` runs them.
    Placement& pl = in.schedule.placement;
    const int per = pl.stages_per_pipeline();
    std::vector<int> split;
    if (pl.num_pipelines() == 1 && per > 0 && s.model.num_layers % per != 0 &&
        split_layers(s.model.num_layers, per, 0, &split))
      assign_stage_layers(split, &pl);
  }
  return in;
}

hw::GpuMemoryFigures memory_figures(const DeviceMemory& m) {
  hw::GpuMemoryFigures f;
  f.weights = m.weights;
  f.gradients = m.grads;
  f.optimizer = m.optimizer;
  f.activations = m.activations;
  f.buffers = m.buffers;
  f.total = m.peak;
  f.capacity = m.capacity;
  f.fits = m.fits;
  return f;
}

}  // namespace pw
