#include "planner/search/search.h"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kBuckets = 16;
constexpr int kMaxMicrobatches = 65535;  // SearchConfig::microbatches is 16 bits

double now_seconds() {
  using C = std::chrono::steady_clock;
  return std::chrono::duration<double>(C::now().time_since_epoch()).count();
}

// One (t, p, d, microbatch size, global batch) combination; the screen's unit of parallel work.
struct Cell {
  int t, p, d, b, m;
  int cp = 1, ep = 1, fp8 = 0;
};

// The inner option lists, as a mixed-radix counter.
struct Inner {
  std::size_t sched, rc, sp, zero, off, trim;
  std::size_t size() const { return sched * rc * sp * zero * off * trim; }
};

struct Cand {
  double lb;
  double mem_lb;
  std::uint32_t cell;
  std::uint32_t inner;
  friend bool operator<(const Cand& a, const Cand& b) {
    if (a.lb != b.lb) return a.lb < b.lb;
    if (a.cell != b.cell) return a.cell < b.cell;
    return a.inner < b.inner;
  }
};

struct CellOut {
  std::vector<Cand> keep;               // best `k` fitting candidates, sorted
  double cut = kInf;                    // best lower bound dropped for lack of room
  double min_mem = kInf;                // smallest memory lower bound of a valid configuration
  double min_mem_over = kInf;           // ... of one whose bound is over the limit
  std::array<Cand, kBuckets> bucket{};  // best candidate per memory bucket (lb = inf: none)
  std::uint64_t valid = 0, fit = 0;
};

SearchConfig make_config(const SearchSpace& s, const Inner& in, const Cell& c, std::uint32_t i) {
  SearchConfig x;
  x.t = c.t;
  x.p = c.p;
  x.d = c.d;
  x.cp = c.cp;
  x.ep = c.ep;
  x.fp8 = c.fp8;
  x.micro_batch = c.b;
  x.microbatches = c.m;
  x.end_trim = s.end_trim[i % in.trim];
  i /= in.trim;
  x.offload = s.offload[i % in.off];
  i /= in.off;
  x.zero = s.zero[i % in.zero];
  i /= in.zero;
  x.sequence_parallel = s.sequence_parallel[i % in.sp];
  i /= in.sp;
  x.recompute = static_cast<std::uint8_t>(s.recompute[i % in.rc]);
  i /= in.rc;
  x.schedule = static_cast<std::uint8_t>(i);
  return x;
}

void screen_cell(const CostModel& model, const Inner& in, const Cell& cell, std::uint32_t cell_id,
                 std::size_t k, bool prune, StageCosts* scratch, CellOut* out) {
  const PlanProblem& pr = model.problem();
  const double limit = pr.limit();
  const double cutoff = prune ? limit : kInf;
  for (Cand& b : out->bucket) b = Cand{kInf, kInf, cell_id, 0};
  std::vector<Cand>& heap = out->keep;
  heap.clear();
  const std::uint32_t n = static_cast<std::uint32_t>(in.size());
  for (std::uint32_t i = 0; i < n; ++i) {
    const SearchConfig c = make_config(model.space(), in, cell, i);
    const ScreenResult r = model.screen(c, scratch);
    if (!r.valid) continue;
    ++out->valid;
    out->min_mem = std::min(out->min_mem, r.mem_lb);
    if (r.mem_lb > limit) out->min_mem_over = std::min(out->min_mem_over, r.mem_lb);
    if (r.mem_lb > cutoff) continue;
    ++out->fit;
    const Cand cand{objective_value(pr, c, r.time_lb), r.mem_lb, cell_id, i};
    const int bk = std::min(kBuckets - 1, static_cast<int>(r.mem_lb / limit * kBuckets));
    if (cand < out->bucket[bk]) out->bucket[bk] = cand;
    if (heap.size() < k) {
      heap.push_back(cand);
      std::push_heap(heap.begin(), heap.end());
    } else if (cand < heap.front()) {
      out->cut = std::min(out->cut, heap.front().lb);
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = cand;
      std::push_heap(heap.begin(), heap.end());
    } else {
      out->cut = std::min(out->cut, cand.lb);
    }
  }
  std::sort(heap.begin(), heap.end());
}

// The pipeline part of a second-tier evaluation (shared by configurations that differ only in
// ZeRO stage 0-2 and offload).
struct PipeResult {
  bool ok = false;
  std::string why;
  std::vector<int> layers, device;
  std::vector<double> peak_act;
  std::vector<TimePs> dev_end;  // each device's last pass end
  TimePs makespan = 0, ideal = 0;
  double bubble_rate = 0;
  double gather = 0;  // exposed ZeRO-3 weight gathers, seconds
};

double memory_units_for_generator(const CostModel& model, const SearchConfig& c,
                                  const StageCosts& sc) {
  double max_static = 0;
  for (double x : sc.static_mem) max_static = std::max(max_static, x);
  return (model.problem().limit() - max_static) / model.activation_unit(c);
}

// A generated schedule shared by every configuration that asks its generator the same
// question: same schedule, p, m, cost ratios (quantised) and memory limit. Generation and the
// evaluator's dependency graph are built once; runs on the same entry are serialised.
struct GenEntry {
  std::string error;
  std::unique_ptr<Evaluator> ev;
  std::mutex mu;
};

using GenKey = std::array<std::int64_t, 4>;

// Generator inputs of `c`; false (with why) when no generator should be asked.
bool generator_params(const CostModel& model, const SearchConfig& c, const StageCosts& sc,
                      GeneratorParams* gp, std::string* why) {
  const ScheduleOption& so = model.space().schedules[c.schedule];
  gp->p = c.p;
  gp->m = c.microbatches;
  gp->v = so.takes_v ? so.v : 0;
  gp->num_layers = model.problem().model.num_layers;
  // Cost ratios in quarter steps (hop in 1/64): generators decide on ratios, and quantising lets
  // configurations with nearly the same ratios share one generated schedule.
  const int mid = sc.num_stages / 2;
  const double f = std::max(sc.f[mid], 1e-12);
  constexpr TimePs kUnit = 1'000'000'000;  // 1 ms
  auto q = [&](double x, double steps) {
    return static_cast<TimePs>(std::llround(x / f * steps) * kUnit / steps);
  };
  gp->costs = UniformCosts{kUnit, std::max<TimePs>(q(sc.b[mid], 4), kUnit / 4),
                           std::max<TimePs>(q(sc.w[mid], 4), kUnit / 4), 0, q(sc.hop, 64)};
  gp->costs.mw_over_mb = sc.act[mid] > 0 ? std::round(sc.act_w[mid] / sc.act[mid] * 8) / 8 : 0;
  if (so.memory_aware) {
    // The GPU's activation budget in 1F1B-stage units. Memory-reading generators get it only
    // when it binds; with room for 2p units (the most any of them is defined with: ZB-2p) each
    // runs at its own definition (ZB-1p at p, ZB-2p at 2p, V-ZB at 1F1B memory). Capping at p,
    // as before, made ZB-2p a copy of ZB-1p.
    const double u = memory_units_for_generator(model, c, sc);
    if (u >= 2.0 * c.p) {
      gp->memory_limit = 0;
    } else {
      // Rounded down to a grid that is fine where memory is scarce and coarse where it barely
      // binds (steps of 0.5 units below 4, 1 below 8, 2 below 16, then 4): each distinct limit
      // is a schedule to generate (a V-shape search takes ~0.1 s at p = 16), and a schedule
      // made for slightly less memory than is free still fits.
      const double step = u < 4 ? 0.5 : u < 8 ? 1 : u < 16 ? 2 : 4;
      gp->memory_limit = std::floor(u / step) * step;
      if (gp->memory_limit <= 0) {
        *why = "no memory left for activations";
        return false;
      }
    }
  }
  return true;
}

GenKey gen_key(const SearchConfig& c, const GeneratorParams& gp) {
  return {(std::int64_t{c.schedule} << 40) | (std::int64_t{c.p} << 20) | c.microbatches,
          (gp.costs.b << 1) ^ gp.costs.w, gp.costs.comm,
          static_cast<std::int64_t>(gp.memory_limit * 2) * 16 +
              static_cast<std::int64_t>(gp.costs.mw_over_mb * 8)};
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
  if (c.zero == 3) {
    std::vector<double> busy;
    for (const DeviceStats& ds : r.device) busy.push_back(ps_to_seconds(ds.busy));
    pr.gather = exposed_gather(used, ev.schedule(), busy);
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
  std::vector<int> begin(sc.num_stages + 1, 0);
  for (int i = 0; i < sc.num_stages; ++i) begin[i + 1] = begin[i] + sc.layers[i];
  for (StageInfo& st : pl->stages) {
    st.layer_begin = begin[st.index];
    st.layer_end = begin[st.index + 1];
  }
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
  e.iteration = end + pipe.gather;
  e.eval_iteration = e.iteration;
  // Without the ZeRO-3 gather estimate the evaluator's figure bounds the DES's from below: same
  // pass and hop costs, same per-device order and dependencies, uncontended collectives, and the
  // DES only adds (contention, blocking sends, gathers, NCCL slowing compute).
  e.time_bound = end * (1 - 1e-7);  // as the screen's: picosecond rounding of DES steps
  const double peak_time = model.peak_flops() * c.gpus() * e.iteration;
  if (peak_time > 0) {
    e.mfu = model.model_flops(c.global_batch()) / peak_time;
    e.hfu = model.hardware_flops(c) / peak_time;
  }
  double peak = 0;
  for (int d = 0; d < static_cast<int>(pipe.peak_act.size()); ++d) {
    const double st = d < static_cast<int>(sc.static_mem.size()) ? sc.static_mem[d] : 0;
    peak = std::max(peak, st + pipe.peak_act[d]);
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

}  // namespace

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

double objective_value(const PlanProblem& pr, const SearchConfig& c, double iteration) {
  double v = iteration;
  if (!pr.target.empty() && pr.objective != Objective::kTime) {
    const double params = hw::non_embedding_parameter_count(pr.model);
    const double batch_tokens = static_cast<double>(c.global_batch()) * pr.model.seq_length;
    const TrainingNeed need = training_need(params, pr.target, batch_tokens);
    v *= need.feasible ? need.steps : kInf;
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
  if (c.recompute) s += fmt::format(" rc={}", recompute_name(static_cast<Recompute>(c.recompute)));
  if (c.sequence_parallel) s += " sp";
  if (c.zero) s += fmt::format(" z{}", c.zero);
  if (c.offload) s += " offload";
  if (c.end_trim) s += fmt::format(" ends-{}", c.end_trim);
  if (c.fp8) s += " fp8";
  return s;
}

SearchSpace default_space(const PlanProblem& pr, const GeneratorRegistry& registry,
                          const std::vector<int>& global_batches,
                          std::vector<std::string>* skipped) {
  SearchSpace s;
  s.grad_reduce_in_fp32 = pr.grad_reduce_in_fp32;
  s.overlap_grad_reduce = pr.overlap_grad_reduce;
  s.tp_comm_overlap = pr.tp_comm_overlap;
  const int gpn = pr.gpus_per_node();
  for (int n = pr.num_gpus; n >= 1; n /= 2) {
    s.gpu_counts.push_back(n);
    if (n % 2 || n <= gpn) break;
  }
  s.micro_batches = {1, 2, 4, 8};
  s.global_batches = global_batches;
  // Context parallelism (fused attention only; 2cp chunks of the sequence, each rank keeping at
  // least 2,048 tokens, below which its GEMMs and exchanges only lose: a default, --cp overrides
  // it) and, for MoE models, expert parallelism over power-of-two sizes dividing the experts.
  s.context_parallel = {1};
  s.fused_attention = pr.sim.flash_attention;
  if (pr.sim.flash_attention)
    for (int cp = 2; cp <= 8; cp *= 2)
      if (pr.model.seq_length % (2 * cp) == 0 && pr.model.seq_length / cp >= 2048)
        s.context_parallel.push_back(cp);
  s.expert_parallel = {1};
  for (int ep = 2; ep <= 64 && pr.model.num_experts > 0; ep *= 2)
    if (pr.model.num_experts % ep == 0) s.expert_parallel.push_back(ep);
  s.schedules = probe_schedules(registry, {2, 3, 4, 6, 8}, skipped);
  // The p = 1 configurations use the first schedule: put a plain linear one first.
  std::stable_partition(s.schedules.begin(), s.schedules.end(), [](const ScheduleOption& o) {
    return o.v == 1 && !o.v_shape && o.pipelines == 1 && !o.memory_aware &&
           !o.holds_all_microbatches;
  });
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
  return e;
}

namespace {

class Searcher {
 public:
  Searcher(const PlanProblem& pr, const SearchSpace& sp, const GeneratorRegistry& reg,
           const SearchOptions& opt)
      : model_(pr, sp), registry_(reg), opt_(opt) {
    const Inner in{sp.schedules.size(), sp.recompute.size(), sp.sequence_parallel.size(),
                   sp.zero.size(),      sp.offload.size(),   sp.end_trim.size()};
    inner_ = in;
    for (int n : sp.gpu_counts)
      for (const Tpd& f : space_factorisations(sp, n, pr.model))
        for (int ep : cell_expert_parallel(sp, pr.model, f.t, f.cp, f.d))
          for (int fp8 : sp.fp8)
            for (int b : sp.micro_batches)
              for (int B : sp.global_batches)
                if (B % (b * f.d) == 0 && B / (b * f.d) <= kMaxMicrobatches) {
                  Cell cell{f.t, f.p, f.d, b, B / (b * f.d)};
                  cell.cp = f.cp;
                  cell.ep = ep;
                  cell.fp8 = fp8;
                  cells_.push_back(cell);
                }
    result_.stats.space = space_size(sp, pr.model);
  }

  SearchResult run(tbb::task_arena& arena) {
    std::size_t& k = keep_;
    k = static_cast<std::size_t>(std::max(64, 4 * opt_.top));
    if (!opt_.prune) k = inner_.size();
    double t0 = now_seconds();
    arena.execute([&] { screen_all(k); });
    result_.stats.screen_seconds = now_seconds() - t0;
    t0 = now_seconds();
    for (;;) {
      const bool exhausted = evaluate_in_order(arena);
      if (!exhausted || result_.stats.budget_hit) break;
      double cut = kInf;
      for (const CellOut& o : outs_) cut = std::min(cut, o.cut);
      if (cut >= threshold()) break;  // every dropped candidate is bounded out
      k *= 4;
      const double t1 = now_seconds();
      arena.execute([&] { screen_all(k); });
      result_.stats.screen_seconds += now_seconds() - t1;
    }
    evaluate_pareto(arena);
    result_.stats.evaluate_seconds = now_seconds() - t0;
    des_tier(arena);
    assemble();
    return std::move(result_);
  }

 private:
  // Screens every cell keeping its best `k` candidates; with `below` < inf only the cells that
  // dropped a candidate with a bound under it (the others' kept lists are already complete).
  void screen_all(std::size_t k, double below = kInf) {
    if (below == kInf || outs_.size() != cells_.size()) outs_.assign(cells_.size(), CellOut{});
    std::vector<char> redo(cells_.size(), 1);
    if (below < kInf)
      for (std::size_t i = 0; i < cells_.size(); ++i) redo[i] = outs_[i].cut < below;
    std::atomic<std::size_t> done{0};
    std::mutex mu;
    std::size_t reported = 0;
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, cells_.size(), 1), [&](const auto& r) {
      StageCosts scratch;
      for (std::size_t i = r.begin(); i != r.end(); ++i) {
        if (!redo[i]) continue;
        outs_[i] = CellOut{};
        screen_cell(model_, inner_, cells_[i], static_cast<std::uint32_t>(i), k, opt_.prune,
                    &scratch, &outs_[i]);
        const std::size_t n = ++done;
        if (!opt_.progress) continue;
        std::lock_guard<std::mutex> lock(mu);
        if (n * 200 / cells_.size() > reported * 200 / cells_.size() || n == cells_.size()) {
          reported = n;
          opt_.progress(0.9 * static_cast<double>(n) / cells_.size());
        }
      }
    });
    cands_.clear();
    result_.stats.screened = result_.stats.valid = result_.stats.fit = 0;
    result_.min_memory_needed = kInf;
    for (const CellOut& o : outs_) {
      cands_.insert(cands_.end(), o.keep.begin(), o.keep.end());
      result_.stats.valid += o.valid;
      result_.stats.fit += o.fit;
      result_.min_memory_needed = std::min(result_.min_memory_needed, o.min_mem);
    }
    result_.stats.screened = cells_.size() * inner_.size();
    std::sort(cands_.begin(), cands_.end());
  }

  SearchConfig config_of(const Cand& c) const {
    return make_config(model_.space(), inner_, cells_[c.cell], c.inner);
  }

  bool des_tier() const { return opt_.des_top > 0; }

  // Rows the evaluator must rank exactly: the table's, or the DES tier's input.
  int ranked() const { return std::max(opt_.top, des_tier() ? opt_.des_top : 0); }

  double threshold() const {
    if (!opt_.prune) return kInf;
    const std::size_t k = static_cast<std::size_t>(std::max(1, ranked()));
    if (best_.size() >= k) return best_[k - 1];
    // With the DES tier this phase only seeds it (the tier itself evaluates whatever can still
    // win): once something fits, stop at twice its objective rather than scoring deep into
    // configurations that fit rarely.
    if (des_tier() && !best_.empty()) return 2 * best_.front();
    return kInf;
  }

  // Evaluates candidates best bound first; returns true when the list ran out before the bound
  // stopped it.
  bool evaluate_in_order(tbb::task_arena& arena) {
    std::size_t pos = 0;
    while (pos < cands_.size()) {
      if (cands_[pos].lb >= threshold()) return false;
      std::vector<Cand> batch;
      const double th = threshold();
      while (pos < cands_.size() && batch.size() < 64 && cands_[pos].lb < th) {
        const Cand& c = cands_[pos++];
        if (seen_.emplace(std::make_pair(c.cell, c.inner), 1).second) batch.push_back(c);
      }
      if (result_.stats.evaluated + batch.size() > static_cast<std::size_t>(opt_.max_evaluations)) {
        result_.stats.budget_hit = true;
        return false;
      }
      evaluate_batch(arena, batch);
      if (opt_.progress)
        opt_.progress(0.9 + 0.1 * std::min(1.0, static_cast<double>(pos) / cands_.size()));
    }
    return true;
  }

  void evaluate_batch(tbb::task_arena& arena, const std::vector<Cand>& batch) {
    const std::size_t n = batch.size();
    std::vector<SearchConfig> cfg(n);
    std::vector<StageCosts> sc(n);
    std::vector<GeneratorParams> gp(n);
    std::vector<std::string> why(n);
    std::vector<GenEntry*> entry(n, nullptr);
    std::vector<std::pair<GenKey, std::size_t>> todo;  // new key, first config asking it
    for (std::size_t i = 0; i < n; ++i) {
      cfg[i] = config_of(batch[i]);
      if (!model_.stage_costs(cfg[i], &sc[i])) {
        why[i] = "not a valid configuration";
        continue;
      }
      if (!generator_params(model_, cfg[i], sc[i], &gp[i], &why[i])) continue;
      const GenKey key = gen_key(cfg[i], gp[i]);
      auto [it, fresh] = cache_.try_emplace(key, nullptr);
      if (fresh) {
        it->second = std::make_unique<GenEntry>();
        todo.emplace_back(key, i);
      }
      entry[i] = it->second.get();
    }
    // Longest first (actions ~ p * m * chunks): one long generation left for last would keep
    // the other threads idle. The entries do not depend on the order.
    auto work = [&](const std::pair<GenKey, std::size_t>& t) {
      const SearchConfig& c = cfg[t.second];
      const ScheduleOption& so = model_.space().schedules[c.schedule];
      return std::int64_t{c.p} * c.microbatches * std::max(1, so.v) * so.pipelines;
    };
    std::stable_sort(todo.begin(), todo.end(),
                     [&](const auto& a, const auto& b) { return work(a) > work(b); });
    const double t_gen = now_seconds();
    // Each worker takes the next entry in that order (a static split would not).
    std::atomic<std::size_t> next{0};
    const int workers = static_cast<int>(std::min<std::size_t>(
        todo.size(), static_cast<std::size_t>(std::max(1, arena.max_concurrency()))));
    arena.execute([&] {
      tbb::parallel_for(0, workers, [&](int) {
        for (std::size_t j; (j = next++) < todo.size();) {
          const std::size_t i = todo[j].second;
          GenEntry& e = *entry[i];
          try {
            gp[i].memo = &memo_;
            const Schedule s =
                generate_schedule(registry_, model_.space().schedules[cfg[i].schedule].name, gp[i]);
            e.ev = std::make_unique<Evaluator>(s);
          } catch (const ConfigError& ex) {  // refused (internal errors propagate)
            e.error = ex.what();
          }
        }
      });
    });
    result_.stats.generated += todo.size();
    const double t_score = now_seconds();
    result_.stats.generate_seconds += t_score - t_gen;
    std::vector<Evaluated> out(n);
    arena.execute([&] {
      tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) {
        PipeResult pr;
        if (!entry[i]) {
          pr.why = why[i];
        } else if (!entry[i]->ev) {
          pr.why = entry[i]->error;
        } else {
          std::lock_guard<std::mutex> lock(entry[i]->mu);
          pr = run_on(model_, cfg[i], sc[i], *entry[i]->ev, nullptr);
        }
        out[i] = finish(model_, cfg[i], pr);
        StageCosts tmp;
        out[i].time_lb = model_.screen(cfg[i], &tmp).time_lb;
        out[i].mem_lb = batch[i].mem_lb;
        out[i].time_bound = std::max(out[i].time_bound, out[i].time_lb);
      });
    });
    result_.stats.score_seconds += now_seconds() - t_score;
    for (Evaluated& e : out) record(std::move(e));
  }

  void record(Evaluated e) {
    ++result_.stats.evaluated;
    if (e.feasible) {
      best_.insert(std::upper_bound(best_.begin(), best_.end(), e.objective), e.objective);
      if (best_.size() > static_cast<std::size_t>(std::max(1, ranked()))) best_.pop_back();
    }
    evaluated_.push_back(std::move(e));
  }

  // Scores the best few candidates of each memory bucket so the Pareto front spans memory.
  void evaluate_pareto(tbb::task_arena& arena) {
    // Points more than twice as slow as the best found are no trade-off worth drawing (and on
    // the smallest GPU counts of the sweep they are the slowest schedules to generate).
    const double cap = best_.empty() ? kInf : 2 * best_.front();
    std::vector<Cand> batch;
    for (int bk = 0; bk < kBuckets; ++bk) {
      std::vector<Cand> in_bucket;
      for (const CellOut& o : outs_)
        if (o.bucket[bk].lb < cap) in_bucket.push_back(o.bucket[bk]);
      std::sort(in_bucket.begin(), in_bucket.end());
      for (std::size_t i = 0; i < in_bucket.size() && i < 2; ++i)
        if (seen_.emplace(std::make_pair(in_bucket[i].cell, in_bucket[i].inner), 1).second)
          batch.push_back(in_bucket[i]);
    }
    evaluate_batch(arena, batch);
  }

  // The schedule the evaluator scored for `c` (from the generation cache), layer split applied.
  bool cached_schedule(const SearchConfig& c, Schedule* out) const {
    StageCosts sc;
    GeneratorParams gp;
    std::string why;
    if (!model_.stage_costs(c, &sc) || !generator_params(model_, c, sc, &gp, &why)) return false;
    const auto it = cache_.find(gen_key(c, gp));
    if (it == cache_.end() || !it->second->ev) return false;
    *out = it->second->ev->schedule();
    apply_layer_split(sc, &out->placement);
    return true;
  }

  double row_lb(const Evaluated& e) const {
    return objective_value(model_.problem(), e.config, e.time_bound);
  }

  // The top-th best objective among rows the DES found to fit: what a candidate must beat.
  double des_threshold() const { return des_best_.empty() ? kInf : des_best_.front(); }

  // Simulates rows `idx` of evaluated_ with the DES (in parallel; results recorded in order).
  void des_simulate(tbb::task_arena& arena, const std::vector<std::size_t>& idx) {
    const std::size_t n = idx.size();
    std::vector<Schedule> sched(n);
    std::vector<Evaluated> rows(n);
    std::vector<char> have(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      rows[i] = evaluated_[idx[i]];
      have[i] = cached_schedule(rows[i].config, &sched[i]);
    }
    arena.execute([&] {
      tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) {
        if (have[i]) des_rescore(model_.problem(), model_.space(), sched[i], &rows[i]);
      });
    });
    for (std::size_t i = 0; i < n; ++i) {
      des_done_[idx[i]] = 1;
      if (!have[i]) continue;  // no generated schedule: the row cannot run
      ++result_.stats.des_simulated;
      evaluated_[idx[i]] = rows[i];
      if (!rows[i].feasible) continue;
      des_best_.insert(std::upper_bound(des_best_.begin(), des_best_.end(), rows[i].objective),
                       rows[i].objective);
      if (des_best_.size() > static_cast<std::size_t>(std::max(1, opt_.top))) des_best_.pop_back();
    }
  }

  // Third tier, certified: the DES simulates the evaluator's best des_top rows, then keeps
  // simulating (and, where needed, evaluating and re-screening) every configuration whose lower
  // bound could still beat the top-th DES-best, cheapest bound first, until none can or the
  // budget (SearchOptions::des_budget) runs out. The bounds are lower bounds of the DES's time
  // and memory, so the ranking is the DES's own over the whole space.
  void des_tier(tbb::task_arena& arena) {
    if (!des_tier()) return;
    const double t0 = now_seconds();
    const double limit = model_.problem().limit();
    auto grow = [&] { des_done_.resize(evaluated_.size(), 0); };
    grow();
    // Seeds: the evaluator's best rows that ran (feasible first).
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < evaluated_.size(); ++i)
      if (evaluated_[i].iteration > 0 && evaluated_[i].feasible) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return evaluated_[a].objective < evaluated_[b].objective;
    });
    if (order.size() > static_cast<std::size_t>(opt_.des_top)) order.resize(opt_.des_top);
    des_simulate(arena, order);
    const std::size_t batch_size =
        8 * static_cast<std::size_t>(std::max(1, arena.max_concurrency()));
    for (;;) {
      const double th = des_threshold();
      // 1. Rows the evaluator scored whose bound is below the bar: simulate the likely winners
      // first (the evaluator's order), since a lower bar prunes the rest sooner.
      std::vector<std::size_t> pending;
      for (std::size_t i = 0; i < evaluated_.size(); ++i) {
        const Evaluated& e = evaluated_[i];
        if (des_done_[i] || e.iteration <= 0 || e.mem_lb > limit || row_lb(e) >= th) continue;
        pending.push_back(i);
      }
      if (!pending.empty()) {
        std::stable_sort(pending.begin(), pending.end(), [&](std::size_t a, std::size_t b) {
          return evaluated_[a].objective < evaluated_[b].objective;
        });
        if (pending.size() > batch_size) pending.resize(batch_size);
        if (result_.stats.des_simulated + pending.size() >
            static_cast<std::size_t>(opt_.des_budget)) {
          result_.stats.des_note = fmt::format(
              "the DES budget (--des-budget {}) stopped certification: configurations with lower "
              "bounds from {:.3f} s were not simulated",
              opt_.des_budget, row_lb(evaluated_[pending.front()]));
          break;
        }
        des_simulate(arena, pending);
        continue;
      }
      // 2. Screen candidates the evaluator has not scored yet whose bound is below the bar.
      std::vector<Cand> todo;
      for (const Cand& c : cands_) {
        if (c.lb >= th || todo.size() >= 256) break;
        if (seen_.emplace(std::make_pair(c.cell, c.inner), 1).second) todo.push_back(c);
      }
      if (!todo.empty()) {
        if (result_.stats.evaluated + todo.size() >
            static_cast<std::size_t>(opt_.max_evaluations)) {
          result_.stats.budget_hit = true;
          result_.stats.des_note =
              "the evaluation budget (--max-evaluations) stopped certification";
          break;
        }
        evaluate_batch(arena, todo);
        grow();
        continue;
      }
      // 3. Cells whose kept candidates were cut below the bar: screen them again with more room.
      double cut = kInf;
      for (const CellOut& o : outs_) cut = std::min(cut, o.cut);
      if (opt_.prune && cut < th && keep_ < inner_.size()) {
        keep_ *= 4;
        arena.execute([&] { screen_all(keep_, th); });
        continue;
      }
      result_.stats.certified = true;
      break;
    }
    // The evaluator's Pareto points, so the DES front spans memory too.
    std::vector<std::size_t> ev;
    for (std::size_t i = 0; i < evaluated_.size(); ++i)
      if (evaluated_[i].feasible && evaluated_[i].tier == Tier::kEvaluator) ev.push_back(i);
    std::stable_sort(ev.begin(), ev.end(), [&](std::size_t a, std::size_t b) {
      const Evaluated &x = evaluated_[a], &y = evaluated_[b];
      return x.peak_memory != y.peak_memory ? x.peak_memory < y.peak_memory
                                            : x.iteration < y.iteration;
    });
    std::vector<std::size_t> front;
    double best = kInf;
    for (std::size_t i : ev)
      if (evaluated_[i].iteration < best) {
        best = evaluated_[i].iteration;
        if (!des_done_[i]) front.push_back(i);
      }
    des_simulate(arena, front);
    result_.stats.des_seconds = now_seconds() - t0;
  }

  void assemble() {
    const bool des = des_tier();
    std::vector<Evaluated> ok;
    for (std::size_t i = 0; i < evaluated_.size(); ++i) {
      const Evaluated& e = evaluated_[i];
      if (e.feasible && (!des || des_done_[i])) ok.push_back(e);
    }
    // Ties (configurations that differ only in where memory goes) favour less memory.
    std::stable_sort(ok.begin(), ok.end(), [](const Evaluated& a, const Evaluated& b) {
      if (a.objective != b.objective) return a.objective < b.objective;
      return a.peak_memory < b.peak_memory;
    });
    result_.pareto = pareto_front(ok);
    if (ok.size() > static_cast<std::size_t>(opt_.top)) ok.resize(opt_.top);
    result_.top = std::move(ok);
    if (!result_.top.empty()) {
      result_.min_memory_needed = 0;
    } else if (!result_.stats.budget_hit) {
      // Nothing fits. Every configuration whose bound fits was scored (no budget stopped it), so
      // the least any configuration needs is the smaller of the scored peaks (by the engine that
      // ranked them; a row no schedule could be generated for needs more than the limit) and the
      // bounds of those never scored (over the limit). The screen's bound alone can sit below
      // the limit and made the message contradict itself.
      const double limit = model_.problem().limit();
      double need = kInf;
      for (const CellOut& o : outs_) need = std::min(need, o.min_mem_over);
      for (const Evaluated& e : evaluated_)
        need = std::min(need, e.iteration > 0 ? e.peak_memory : std::max(limit, e.mem_lb));
      if (need < kInf) result_.min_memory_needed = need;
    }
    if (opt_.keep_all) result_.all = evaluated_;
  }

  CostModel model_;
  const GeneratorRegistry& registry_;
  SearchOptions opt_;
  Inner inner_{};
  std::vector<Cell> cells_;
  std::vector<CellOut> outs_;
  std::vector<Cand> cands_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> seen_;
  std::map<GenKey, std::unique_ptr<GenEntry>> cache_;
  GeneratorMemo memo_;  // memory-independent generator work shared across limits
  std::vector<double> best_;
  std::vector<double> des_best_;  // best DES objectives of rows that fit, ascending (top of them)
  std::vector<char> des_done_;    // per evaluated_ row: simulated by the DES
  std::size_t keep_ = 64;
  // (keep_: candidates the screen keeps per cell)
  std::vector<Evaluated> evaluated_;
  SearchResult result_;
};

}  // namespace

SearchResult run_search(const PlanProblem& problem, const SearchSpace& space,
                        const GeneratorRegistry& registry, const SearchOptions& options) {
  if (space.schedules.empty()) throw ConfigError("", "schedules", "no schedule to search over");
  if (space.schedules.size() > 255) throw ConfigError("", "schedules", "more than 255 options");
  // More threads than cores only makes TBB warn; the result does not depend on the count.
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = options.threads > 0 ? std::min(options.threads, cores) : cores;
  tbb::task_arena arena(threads);
  Searcher s(problem, space, registry, options);
  SearchResult r = s.run(arena);
  r.stats.threads = threads;
  return r;
}

}  // namespace pw
