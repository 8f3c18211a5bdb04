#pragma once
/// The planner's cost model and first tier. For one configuration it derives per-stage pass
/// times, activation bytes and per-device static memory (weights, gradients, optimizer state)
/// from the model shape and the GPU/node figures; the screen turns them into a lower bound on the
/// iteration time (a bound on every schedule's makespan from the pipeline's head and tail) and a
/// lower bound on peak memory, both valid for what the second tier measures, so that pruning on
/// them never discards the configuration the second tier would rank first.
#include <optional>
#include <vector>

#include "core/cost_table.h"
#include "core/plan.h"
#include "planner/scaling_laws.h"
#include "planner/search_space.h"

namespace pw {

/// What the user optimises.
enum class Objective { kTime, kCost, kTimeToLoss };
const char* objective_name(Objective o);

/// The fixed inputs of one planning run.
struct PlanProblem {
  ModelShape model;
  GpuNodeSpec gpu;
  int num_gpus = 8;
  double memory_limit = 0;  ///< bytes per GPU; 0 = the GPU's capacity
  Objective objective = Objective::kTime;
  TrainingTarget target;  ///< loss or token budget (time-to-loss, and the days/GPU-hours)
  /// The hardware profile the discrete-event tier simulates on; empty: the shipped profile
  /// named like `gpu` (see des_profile in planner/search.h), or no DES tier when there is none.
  std::optional<hw::HardwareProfile> profile;
  double limit() const { return memory_limit > 0 ? memory_limit : gpu.memory_bytes; }
};

/// Costs of one configuration, shared by both tiers. Times in seconds per microbatch, memory in
/// bytes per GPU. Stages are those of one pipeline in model order (index 0 holds the embedding).
struct StageCosts {
  int num_stages = 0;
  int num_devices = 0;
  std::vector<int> layers;         ///< layers of each stage
  std::vector<int> device;         ///< device of each stage (-1: unknown placement)
  std::vector<double> f, b, w;     ///< forward, backward-for-inputs, weight-gradient pass times
  std::vector<double> r;           ///< recomputation time included in b (full recomputation)
  std::vector<double> act_r;       ///< bytes a recompute pass re-materialises (full recomputation)
  std::vector<double> act;         ///< activation bytes a forward allocates (held until B)
  std::vector<double> act_w;       ///< bytes still held after B until W
  std::vector<double> static_mem;  ///< per device: weights, grads, optimizer, workspaces
  /// Per stage: ZeRO-3 all-gather of the stage's weights, seconds (0 without ZeRO-3 or with a
  /// breadth-first schedule, whose gathers are in `dp`). Paid once per sweep of consecutive
  /// passes of the stage; the first sweep's is exposed, later ones overlap compute.
  std::vector<double> gather;
  double hop = 0;        ///< one point-to-point hop between stages, seconds
  double dp = 0;         ///< exposed data-parallel gradient reduction per iteration, seconds
  double optimizer = 0;  ///< optimizer step (and offload traffic) per iteration, seconds
  double tp_share = 0;   ///< share of pass time spent in tensor-parallel collectives
};

/// Lower bounds of one configuration (valid = false when the configuration is not in the space,
/// e.g. a stage would get no layers).
struct ScreenResult {
  bool valid = false;
  double time_lb = 0;  ///< iteration seconds
  double mem_lb = 0;   ///< peak bytes per GPU
};

/// The analytic cost model (closed forms of shared/reference/models-and-hardware.md) for one
/// problem and space. Immutable; every method is safe to call from many threads.
class CostModel {
 public:
  CostModel(const PlanProblem& problem, const SearchSpace& space);

  /// Fills `out` for configuration `c`, laying layers out with `c.end_trim`; returns false when
  /// the configuration is invalid. `out` keeps its capacity across calls (no allocation in the
  /// screen's loop once warmed up).
  bool stage_costs(const SearchConfig& c, StageCosts* out) const;

  /// As stage_costs, with the layer split given per stage (a generated placement's layers).
  void costs_for_layers(const SearchConfig& c, const std::vector<int>& layers,
                        StageCosts* out) const;

  /// First tier: lower bounds on iteration time and peak memory of `c`. `scratch` is reused.
  ScreenResult screen(const SearchConfig& c, StageCosts* scratch) const;

  /// Activation bytes of one layer for one microbatch (Korthikanti et al. table).
  double layer_activation(const SearchConfig& c) const;
  /// Bytes of one microbatch's activations of a 1F1B stage (L/p layers): the generators'
  /// memory unit.
  double activation_unit(const SearchConfig& c) const;
  /// Model FLOPs of one iteration (no recomputation), for MFU.
  double model_flops(int global_batch) const;

  const PlanProblem& problem() const { return problem_; }
  const SearchSpace& space() const { return space_; }

 private:
  bool layer_split(const SearchConfig& c, std::vector<int>* layers) const;
  void fill(const SearchConfig& c, StageCosts* out) const;

  PlanProblem problem_;
  SearchSpace space_;
};

/// Lower bound on the exposed ZeRO-3 gather time of any schedule with these stage costs: on
/// each device the smallest gather of its stages (its first sweep's gather is exposed).
double gather_lower_bound(const StageCosts& sc);

/// Exposed ZeRO-3 gather time of `schedule` (stage costs by placement index): per device the
/// first sweep's gather plus what its later sweeps' gathers exceed its compute by; the maximum
/// over devices. 0 without ZeRO-3. `busy` = per-device compute time (seconds).
double exposed_gather(const StageCosts& sc, const Schedule& schedule,
                      const std::vector<double>& busy);

/// Evenly spread `layers` over `stages`, with `trim` fewer on the first and last stage (the
/// embedding and logits stages); false when a stage would get no layer.
bool split_layers(int layers, int stages, int trim, std::vector<int>* out);

/// Converts stage costs into the evaluator's cost table (picoseconds, memory deltas in bytes).
/// `explicit_recompute`: the schedule has R actions, which then carry the recomputation time and
/// memory that are otherwise folded into B.
CostTable to_cost_table(const StageCosts& sc, int num_stages_total,
                        const std::vector<int>& stage_of, bool explicit_recompute = false);

}  // namespace pw
