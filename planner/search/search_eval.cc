// The evaluator tier: generated schedules run on the fixed-cost evaluator with the
// configuration's stage costs (planner/search/search.h evaluate_config), and the pieces of it the
// searcher shares (search_eval.h).
#include "planner/search/search_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "hwmodels/memory.h"
#include "hwmodels/optimizer.h"
#include "planner/search/stage_schedule.h"

namespace pw {
namespace detail {
// Generator inputs of `c`; false (with why) when no generator should be asked.
bool generator_params(const CostModel& model, const SearchConfig& c, const StageCosts& sc,
                      GeneratorParams* gp, std::string* why) {
  const ScheduleOption& so = model.space().schedules[c.schedule];
  gp->p = c.p;
  gp->m = c.microbatches;
  gp->v = so.takes_v ? so.v : 0;
  gp->num_layers = model.problem().model.num_layers;
  // Cost ratios in sixteenths (hop in 1/64): generators decide on ratios, and quantising lets
  // configurations with nearly the same ratios share one generated schedule. Quarter steps
  // shared a few more, but a greedy order decides its waits on the last percent of a ratio: a
  // B 6% slower than F, rounded to F, made ZB-1p's backwards arrive late at every slot its order
  // gave them (98.5B model, t4 p10, sequence 3072: 37.49 s, behind 1F1B's 37.27 s; 36.09 s in
  // sixteenths). A generator that does not read costs keeps the unit costs: one schedule per
  // p, m and v.
  if (so.reads_costs) {
    // The middle stage, or the nearest one after it that computes anything (a layout's empty
    // middle stage has no pass costs to take ratios of).
    int mid = sc.num_stages / 2;
    for (int k = 0; k < sc.num_stages && sc.f[mid] <= 0; ++k)
      mid = (sc.num_stages / 2 + k + 1) % sc.num_stages;
    const double f = std::max(sc.f[mid], 1e-12);
    constexpr TimePs kUnit = 1'000'000'000;  // 1 ms
    constexpr double kSteps = 16;
    auto q = [&](double x, double steps) {
      return static_cast<TimePs>(std::llround(x / f * steps) * kUnit / steps);
    };
    gp->costs = UniformCosts{kUnit, std::max<TimePs>(q(sc.b[mid], kSteps), kUnit / 4),
                             std::max<TimePs>(q(sc.w[mid], kSteps), kUnit / 4), 0, q(sc.hop, 64)};
    gp->costs.mw_over_mb = sc.act[mid] > 0 ? std::round(sc.act_w[mid] / sc.act[mid] * 8) / 8 : 0;
  }
  if (so.memory_aware) {
    // The GPU's activation budget in 1F1B-stage units. Memory-reading generators get it only
    // when it binds their own definition (ZB-1p at p, ZB-2p at 2p, V-ZB at 1F1B memory:
    // GeneratorCaps::own_budget); with that much free each runs as defined. Capping at p, as
    // before, made ZB-2p a copy of ZB-1p.
    // Each distinct limit is a schedule to generate (a V-shape search takes ~0.1 s at p = 16),
    // and a schedule made for slightly less memory than is free still fits: the limit is
    // rounded down to a grid (generator_memory_limit).
    gp->memory_caps.clear();
    if (so.per_device_limits && so.pipelines == 1) {
      // Each device's own room (CostModel::generator_caps): none when every device has its
      // defined budget.
      model.generator_caps(c, sc, &gp->memory_caps);
      gp->memory_limit = 0;
      if (!gp->memory_caps.empty()) {
        gp->memory_limit = *std::min_element(gp->memory_caps.begin(), gp->memory_caps.end());
        if (gp->memory_limit <= 0) {
          *why = "no memory left for activations";
          return false;
        }
      }
    } else {
      const double u = model.generator_units(c, sc);
      gp->memory_limit = generator_memory_limit(so, u, c.p);
      if (u < defined_budget(so, c.p) && gp->memory_limit <= 0) {
        *why = "no memory left for activations";
        return false;
      }
    }
  }
  return true;
}

GenKey gen_key(const SearchConfig& c, const GeneratorParams& gp) {
  std::uint64_t caps = 0;  // the per-device limits (whole microbatches of a stage), hashed
  for (double x : gp.memory_caps)
    caps = (caps ^ static_cast<std::uint64_t>(std::llround(x * 1e6) + 1)) * 1099511628211ull;
  return {(std::int64_t{c.schedule} << 40) | (std::int64_t{c.p} << 20) | c.microbatches,
          (gp.costs.b << 1) ^ gp.costs.w, gp.costs.comm,
          (static_cast<std::int64_t>(gp.memory_limit * 2) * 16 +
           static_cast<std::int64_t>(gp.costs.mw_over_mb * 8)) ^
              static_cast<std::int64_t>(caps << 16)};
}

// Layers per pipeline-stage index and device per index (-1 for multi-pipeline placements).
void layout(const Placement& pl, const StageCosts& sc, std::vector<int>* layers,
            std::vector<int>* device) {
  const int per_pipe = pl.stages_per_pipeline();
  const bool single = pl.num_pipelines() == 1 && per_pipe == sc.num_stages;
  layers->assign(per_pipe, 1);
  device->assign(per_pipe, -1);
  for (const StageInfo& st : pl.stages) {
    if (st.pipeline != 0) continue;
    (*layers)[st.index] = single ? sc.layers[st.index] : std::max(1, st.layer_end - st.layer_begin);
    if (single) (*device)[st.index] = st.device;
  }
}

CostTable table_for(const CostModel& model, const SearchConfig& c, const Placement& pl,
                    const std::vector<int>& layers, const std::vector<int>& device,
                    StageCosts* costs) {
  StageCosts& sc = *costs;
  sc.device = device;
  model.costs_for_layers(c, layers, &sc);
  std::vector<int> stage_of(pl.num_stages());
  for (int g = 0; g < pl.num_stages(); ++g) stage_of[g] = pl.stages[g].index;
  return to_cost_table(sc, pl.num_stages(), stage_of,
                       model.space().schedules[c.schedule].explicit_recompute);
}

PipeResult run_on(const CostModel& model, const SearchConfig& c, const StageCosts& sc,
                  Evaluator& ev, std::vector<std::pair<TimePs, TimePs>>* timings) {
  PipeResult pr;
  layout(ev.schedule().placement, sc, &pr.layers, &pr.device);
  StageCosts used;
  const CostTable table = table_for(model, c, ev.schedule().placement, pr.layers, pr.device, &used);
  const EvalResult& r = ev.run(table);
  if (c.zero == 3 && c.zero3_stage) {
    std::vector<double> busy;
    for (const DeviceStats& ds : r.device) busy.push_back(ps_to_seconds(ds.busy));
    pr.gather = exposed_gather(used, ev.schedule(), busy);
    pr.link = gather_link_bound(used, ev.schedule());
  }
  pr.ok = true;
  pr.makespan = r.makespan;
  pr.ideal = r.ideal;
  pr.bubble_rate = r.bubble_rate;
  for (const DeviceStats& ds : r.device) {
    pr.peak_act.push_back(ds.peak_memory);
    pr.dev_end.push_back(ds.last_end);
  }
  if (timings) {
    timings->resize(r.start.size());
    for (std::size_t i = 0; i < r.start.size(); ++i) (*timings)[i] = {r.start[i], r.end[i]};
  }

  return pr;
}

// Generates the schedule of `c` (its layer split applied to the placement) or says why not.
bool generate_for(const CostModel& model, const GeneratorRegistry& registry, const SearchConfig& c,
                  const StageCosts& sc, Schedule* out, std::string* why) {
  GeneratorParams gp;
  if (!generator_params(model, c, sc, &gp, why)) return false;
  try {
    *out = generate_schedule(registry, model.space().schedules[c.schedule].name, gp);
  } catch (const ConfigError& e) {  // the generator refuses: a reason, not a failure
    *why = e.what();
    return false;
  }
  return true;
}

// Writes the configuration's layer split (uneven ends) into a single-pipeline placement.
void apply_layer_split(const StageCosts& sc, Placement* pl) {
  if (pl->num_pipelines() != 1 || pl->stages_per_pipeline() != sc.num_stages) return;
  assign_stage_layers(sc.layers, pl);
}

PipeResult run_pipeline(const CostModel& model, const GeneratorRegistry& registry,
                        const SearchConfig& c, Schedule* sched_out,
                        std::vector<std::pair<TimePs, TimePs>>* timings) {
  PipeResult pr;
  StageCosts sc;
  if (!model.stage_costs(c, &sc)) {
    pr.why = "not a valid configuration";
    return pr;
  }
  Schedule s;
  if (!generate_for(model, registry, c, sc, &s, &pr.why)) return pr;
  Evaluator ev(s);
  pr = run_on(model, c, sc, ev, timings);
  if (sched_out) {
    *sched_out = std::move(s);
    apply_layer_split(sc, &sched_out->placement);
  }
  return pr;
}

Evaluated finish(const CostModel& model, const SearchConfig& c, const PipeResult& pipe) {
  Evaluated e;
  e.config = c;
  if (!pipe.ok) {
    e.why_not = pipe.why;
    return e;
  }
  StageCosts sc;
  sc.device = pipe.device;
  model.costs_for_layers(c, pipe.layers, &sc);
  const double span = ps_to_seconds(pipe.makespan), ideal = ps_to_seconds(pipe.ideal);
  // Each device's gradient reduction, optimizer step and re-gathers follow its own last pass.
  double end = span;
  for (std::size_t d = 0; d < pipe.dev_end.size() && d < sc.tail.size(); ++d)
    end = std::max(end, ps_to_seconds(pipe.dev_end[d]) + sc.tail[d]);
  // ZeRO-2/3: the m - 1 per-microbatch reduce-scatters and the tail, in order on one stream.
  for (std::size_t d = 0; d < sc.reduce_mb.size(); ++d)
    end = std::max(end, (c.microbatches - 1) * sc.reduce_mb[d] + sc.tail[d]);
  // ZeRO-2/3: the time its data-parallel bytes keep a route off the node busy.
  for (double v : sc.net_volume) end = std::max(end, v);
  end = std::max(end, pipe.link);
  // overlap_param_gather: the re-gather before the forwards (hw::exposed_param_gather_seconds,
  // as `estimate`); every pass follows stage 0's first forward, which waits for its first
  // bucket, so that much is certain.
  double param_gather = 0, param_certain = 0;
  if (!sc.param_chunk.empty()) {
    const double chunk = *std::max_element(sc.param_chunk.begin(), sc.param_chunk.end());
    param_gather =
        hw::exposed_param_gather_seconds(sc.param_first_bucket, std::max(0.0, chunk),
                                         sc.f.empty() ? 0 : sc.f[0], c.p, sc.param_aligned);
    param_certain = sc.param_first_bucket;
  }
  e.iteration = end + pipe.gather + param_gather;
  e.eval_iteration = e.iteration;
  // Without the ZeRO-3 gather estimate the evaluator's figure bounds the DES's from below: same
  // pass and hop costs, same per-device order and dependencies, uncontended collectives, and the
  // DES only adds (contention, blocking sends, gathers, NCCL slowing compute).
  e.time_bound = (end + param_certain) * (1 - 1e-7);  // picosecond rounding of DES steps
  const double peak_time = model.peak_flops() * c.gpus() * e.iteration;
  if (peak_time > 0) {
    e.mfu = model.model_flops(c.global_batch()) / peak_time;
    e.hfu = model.hardware_flops(c) / peak_time;
  }
  double peak = 0;
  for (int d = 0; d < static_cast<int>(pipe.peak_act.size()); ++d) {
    const double st = d < static_cast<int>(sc.static_mem.size()) ? sc.static_mem[d] : 0;
    peak = std::max(peak, st + pipe.peak_act[d]);
    const double state = d < static_cast<int>(sc.state_mem.size()) ? sc.state_mem[d] : 0;
    e.mem_bound = std::max(e.mem_bound, state + pipe.peak_act[d]);
  }
  e.peak_memory = peak;
  e.bubble_rate = pipe.bubble_rate;
  e.breakdown = {ideal * (1 - sc.tp_share), ideal * sc.tp_share, span - ideal,
                 std::max(0.0, end - span - sc.optimizer) + pipe.gather, sc.optimizer};
  e.objective = objective_value(model.problem(), c, e.iteration);
  e.feasible = peak <= model.problem().limit();
  if (!e.feasible)
    e.why_not = fmt::format("needs {:.1f} GB per GPU, limit {:.1f} GB", peak / 1e9,
                            model.problem().limit() / 1e9);
  return e;
}

std::vector<Evaluated> pareto_front(std::vector<Evaluated> pts) {
  std::stable_sort(pts.begin(), pts.end(), [](const Evaluated& a, const Evaluated& b) {
    if (a.peak_memory != b.peak_memory) return a.peak_memory < b.peak_memory;
    return a.iteration < b.iteration;
  });
  std::vector<Evaluated> front;
  for (const Evaluated& e : pts)
    if (front.empty() || e.iteration < front.back().iteration) front.push_back(e);
  return front;
}

}  // namespace detail

using detail::finish;
using detail::run_pipeline;

CostTable config_cost_table(const CostModel& model, const SearchConfig& c, const Schedule& s) {
  const Placement& pl = s.placement;
  const int per_pipe = pl.stages_per_pipeline();
  std::vector<int> stage_of(pl.num_stages());
  StageCosts sc;
  std::vector<int> layers(per_pipe, 1);
  sc.device.assign(per_pipe, -1);
  for (int g = 0; g < pl.num_stages(); ++g) {
    const StageInfo& st = pl.stages[g];
    stage_of[g] = st.index;
    if (st.pipeline != 0) continue;
    layers[st.index] = std::max(1, st.layer_end - st.layer_begin);
    if (pl.num_pipelines() == 1) sc.device[st.index] = st.device;
  }
  model.costs_for_layers(c, layers, &sc);
  return to_cost_table(sc, pl.num_stages(), stage_of,
                       model.space().schedules[c.schedule].explicit_recompute);
}

double batch_tokens(const PlanProblem& pr, const SearchConfig& c) {
  return static_cast<double>(c.global_batch()) * pr.model.seq_length;
}

double objective_value(const PlanProblem& pr, const SearchConfig& c, double iteration) {
  double v = iteration;
  if (!pr.target.empty() && pr.objective != Objective::kTime) {
    const double params = hw::non_embedding_parameter_count(pr.model);
    const TrainingNeed need = training_need(params, pr.target, batch_tokens(pr, c));
    v *= need.feasible ? need.steps : std::numeric_limits<double>::infinity();
  }
  if (pr.objective == Objective::kCost) v *= c.gpus();
  return v;
}

std::string describe_config(const SearchSpace& space, const SearchConfig& c) {
  const ScheduleOption& so = space.schedules[c.schedule];
  std::string s = fmt::format(
      "t{}{} p{} d{}{} mb{} B{} {}", c.t, c.cp > 1 ? fmt::format(" cp{}", c.cp) : "", c.p, c.d,
      c.ep > 1 ? fmt::format(" ep{}", c.ep) : "", c.micro_batch, c.global_batch(), so.name);
  if (so.takes_v) s += fmt::format(" v{}", so.v);
  if (c.etp1) s += " etp1";
  if (c.recompute) s += fmt::format(" rc={}", recompute_name(static_cast<Recompute>(c.recompute)));
  if (c.sequence_parallel) s += " sp";
  if (c.zero) s += fmt::format(" z{}", c.zero);
  if (c.zero == 3 && c.zero3_stage) s += "-stage";
  if (c.offload) s += " offload";
  if (c.end_trim == kOwnSplit)
    s += " own-split";
  else if (c.end_trim)
    s += " ends-" + end_trim_label(c.end_trim);
  if (c.param_gather) s += " opg";
  if (c.fp8) s += " fp8";
  return s;
}

SearchSpace default_space(const PlanProblem& pr, const GeneratorRegistry& registry,
                          const std::vector<int>& global_batches,
                          std::vector<std::string>* skipped) {
  SearchSpace s;
  s.grad_reduce_in_fp32 = pr.grad_reduce_in_fp32;
  s.overlap_grad_reduce = pr.overlap_grad_reduce;
  s.param_gather = {pr.overlap_param_gather ? 1 : 0};
  s.align_param_gather = pr.align_param_gather;
  s.ddp_bucket_size = pr.ddp_bucket_size;
  s.overlap_p2p_comm = pr.overlap_p2p_comm;
  s.tp_comm_overlap = pr.tp_comm_overlap;
  s.cp_comm_type = pr.cp_comm_type;
  s.fp8_recipe = pr.fp8_recipe;
  const int gpn = pr.gpus_per_node();
  for (int n = pr.num_gpus; n >= 1; n /= 2) {
    s.gpu_counts.push_back(n);
    if (n % 2 || n <= gpn) break;
  }
  s.micro_batches = {1, 2, 4, 8};
  s.global_batches = global_batches;
  // Optimizer offload runs Adam on the host: searched where the profile gives the host's memory
  // bandwidth (hw::cpu_adam_rate); `--offload on` on such a profile is refused (cmd_plan).
  if (hw::cpu_adam_rate(pr.profile) <= 0) s.offload = {0};
  // Context parallelism (fused attention only; 2cp chunks of the sequence, each rank keeping at
  // least 2,048 tokens, below which its GEMMs and exchanges only lose: a default, --cp overrides
  // it; not with a sliding attention window, whose ring is not modelled) and, for MoE models,
  // expert parallelism over power-of-two sizes dividing the experts.
  s.context_parallel = {1};
  s.fused_attention = pr.sim.flash_attention;
  if (pr.sim.flash_attention && hw::attention_window(pr.model) == 0)
    for (int cp = 2; cp <= 8; cp *= 2)
      if (pr.model.seq_length % (2 * cp) == 0 && pr.model.seq_length / cp >= 2048)
        s.context_parallel.push_back(cp);
  s.expert_parallel = {1};
  for (int ep = 2; ep <= 64 && pr.model.num_experts > 0; ep *= 2)
    if (pr.model.num_experts % ep == 0) s.expert_parallel.push_back(ep);
  // The last stage runs the multi-token prediction depths besides its layers and head: each
  // end trim is searched again with the last stage trimmed further by the depths' work in
  // layers (their model FLOPs over a mean layer's, at least one), rounded down and up.
  if (pr.model.mtp_num_layers > 0) {
    ModelShape main = pr.model;
    main.mtp_num_layers = 0;
    hw::WorkloadOptions wo;
    wo.flash_attention = pr.sim.flash_attention;
    const double with = hw::iteration_flops(pr.model, wo, 1).model;
    const double without = hw::iteration_flops(main, wo, 1).model;
    ModelShape no_head = main;
    no_head.vocab_size = 0;
    const double layer = hw::iteration_flops(no_head, wo, 1).model / main.num_layers;
    const double work = (with - without) / layer;
    const int low = std::clamp(static_cast<int>(std::floor(work)), 1, 13);
    const int high = std::clamp(static_cast<int>(std::ceil(work)), 1, 13);
    for (const int extra : {low, high}) {
      for (const int trim : {0, 1}) {  // the first stage (embedding) trimmed little if at all
        const int code = end_trim_code(trim, extra);
        if (std::find(s.end_trim.begin(), s.end_trim.end(), code) == s.end_trim.end())
          s.end_trim.push_back(code);
      }
    }
    // The depths on a stage of their own (Megatron's mtp_standalone), the loss on the last:
    // the depths' stage trimmed by their work without the heads (those stay with the loss),
    // rounded down and up, and not at all.
    ModelShape mtp_no_head = pr.model;
    mtp_no_head.vocab_size = 0;
    const double depths = (hw::iteration_flops(mtp_no_head, wo, 1).model -
                           hw::iteration_flops(no_head, wo, 1).model) /
                          layer;
    const int dlow = std::clamp(static_cast<int>(std::floor(depths)), 0, 7);
    const int dhigh = std::clamp(static_cast<int>(std::ceil(depths)), 0, 7);
    for (const int depth_trim : {0, dlow, dhigh}) {
      for (const int trim : {0, 1}) {
        if (depth_trim == 0 && trim == 1) continue;
        const int code = mtp_standalone_code(trim, depth_trim);
        if (std::find(s.end_trim.begin(), s.end_trim.end(), code) == s.end_trim.end())
          s.end_trim.push_back(code);
      }
    }
  }
  s.schedules = probe_schedules(registry, {2, 3, 4, 6, 8}, skipped);
  return s;
}

Evaluated evaluate_config(const CostModel& model, const GeneratorRegistry& registry,
                          const SearchConfig& c, Schedule* schedule_out,
                          std::vector<std::pair<TimePs, TimePs>>* timings) {
  Evaluated e = finish(model, c, run_pipeline(model, registry, c, schedule_out, timings));
  StageCosts sc;
  const ScreenResult sr = model.screen(c, &sc);
  e.time_lb = sr.time_lb;
  e.time_bound = std::max(e.time_bound, e.time_lb);
  e.mem_lb = sr.mem_lb;
  e.mem_bound = std::max(e.mem_bound, e.mem_lb);
  return e;
}

}  // namespace pw
