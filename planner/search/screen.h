#pragma once
/// The planner's first two tiers price configurations with hwmodels, the one model of the
/// machine the discrete-event simulator (DES) uses: per-layer pass times, TP collectives and
/// activation bytes from hw::stage_costs (tabulated once per tensor-parallel size, microbatch
/// size, sequence parallelism and recomputation), parameters from hw::stage_parameter_count,
/// model state from hw::model_state_bytes, DP/ZeRO collectives and pipeline hops from hwmodels'
/// collective model on the cluster's topology (as lines in the size, hw::CollectiveLine), the
/// optimizer step from hwmodels/optimizer.h. No formula of its own: the screen turns these into
/// lower bounds on the DES's iteration time and peak memory, the evaluator tier into a cost table.
#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/cost_table.h"
#include "core/plan.h"
#include "hwmodels/collectives.h"
#include "hwmodels/profile.h"
#include "hwmodels/transformer.h"
#include "planner/search/scaling_laws.h"
#include "planner/search/search_space.h"
#include "sim/iteration.h"

namespace pw {

/// What the user optimises.
enum class Objective { kTime, kCost, kTimeToLoss };
const char* objective_name(Objective o);

/// The fixed inputs of one planning run.
struct PlanProblem {
  ModelShape model;
  hw::HardwareProfile profile;  ///< the machine every tier prices and simulates on
  int num_gpus = 8;
  double memory_limit = 0;  ///< bytes per GPU; 0 = the profile's usable memory
  Objective objective = Objective::kTime;
  TrainingTarget target;  ///< loss or token budget (time-to-loss, and the days/GPU-hours)
  /// How the DES simulates (Megatron defaults); the screen and the evaluator price the same
  /// choices (gradient bytes, buckets, overlap, flash attention, offload CPU rate).
  IterationOptions sim;
  /// The scenario's Megatron settings every configuration shares (ParallelConfig's
  /// grad_reduce_in_fp32, overlap_grad_reduce, overlap_param_gather, tp_comm_overlap);
  /// default_space copies them into the space, which the tiers read (overlap_param_gather as
  /// the one value of SearchSpace::param_gather).
  bool grad_reduce_in_fp32 = true;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool align_param_gather = true;  ///< Megatron's align_param_gather
  double ddp_bucket_size = 0;      ///< Megatron's --ddp-bucket-size (0: its default)
  bool overlap_p2p_comm = false;   ///< Megatron's overlap_p2p_comm (interleaved rows)
  bool tp_comm_overlap = false;
  std::string cp_comm_type = "p2p";    ///< Megatron's cp_comm_type
  std::string fp8_recipe = "delayed";  ///< Megatron's fp8_recipe (with FP8)
  /// Layers per stage of the split SearchConfig::end_trim kOwnSplit names (a scenario's own
  /// uneven split; empty: none).
  std::vector<int> own_split;
  double limit() const {
    return memory_limit > 0 ? memory_limit : profile.gpu.usable_memory().value;
  }
  int gpus_per_node() const { return profile.node.gpus_per_node; }
};

/// Costs of one configuration, shared by both tiers. Times in seconds per microbatch, memory in
/// bytes per GPU. Stages are those of one pipeline in model order (index 0 holds the embedding).
/// Pass times include the pass's TP collectives, as the DES runs them (compute, then collective).
struct StageCosts {
  int num_stages = 0;
  int num_devices = 0;
  std::vector<int> layers;  ///< layers of each stage
  /// Device of each stage; -1 in a multi-pipeline placement (BitPipe), where each pipeline has
  /// a copy of every stage on a device of its own (CostModel reads them from the placement).
  std::vector<int> device;
  std::vector<double> f, b, w;     ///< forward, backward-for-inputs (recompute included), weight
  std::vector<double> r;           ///< recomputation time included in b
  std::vector<double> act_r;       ///< bytes a recompute pass re-materialises
  std::vector<double> act;         ///< activation bytes a forward allocates (held until B)
  std::vector<double> act_w;       ///< bytes still held after B until W
  std::vector<double> params;      ///< parameters of each stage on one TP rank
  std::vector<double> state_mem;   ///< per device: weights, gradients, optimizer state on the GPU
  std::vector<double> static_mem;  ///< per device: state_mem + working buffers (ZeRO-3 gathered
                                   ///< weights, recompute, offload prefetch)
  /// Per stage: ZeRO-3 all-gather of the stage's weights, seconds (0 without ZeRO-3). The DES
  /// gathers once per sweep of consecutive passes of the stage, one sweep ahead.
  std::vector<double> gather;
  /// Per device: what follows its last pass (gradient reduction in buckets, optimizer step,
  /// ZeRO-1/2 parameter all-gather), seconds.
  std::vector<double> tail;
  /// Per device: ZeRO-2/3's reduce-scatter of one microbatch's weight gradients of its stages,
  /// seconds (0 otherwise). The DES runs one after every backward but the last (that one is the
  /// tail's), in order on the device's reduction stream.
  std::vector<double> reduce_mb;
  /// Per device: a time its iteration cannot beat for the bytes its data-parallel collectives
  /// send (ZeRO-2/3: every microbatch's reduce-scatter and ZeRO-3's gathers share the rank's
  /// routes, hw::CollectiveLine::route; the busier one), then its optimizer step; seconds, 0
  /// without ZeRO-2/3.
  /// By stage it counts one gather per stage; the evaluator counts the schedule's sweeps.
  std::vector<double> net_volume;
  /// Per device and route (hw::CollectiveLine::route): net_volume without the gathers
  /// (reduce-scatters, then the optimizer step).
  std::vector<std::array<double, 2>> reduce_link;
  /// Per stage and route: the time one ZeRO-3 gather by stage keeps the route busy, seconds.
  std::vector<std::array<double, 2>> gather_link;
  /// overlap_param_gather (ZeRO-1/2): the re-gather runs before the next step's forwards
  /// instead of in the tail (hw::param_gather_aligned): stage 0's first bucket, seconds, and per
  /// device the gather of its first chunk, seconds (empty when the option is off).
  double param_first_bucket = 0;
  std::vector<double> param_chunk;
  bool param_aligned = false;
  double hop = 0;        ///< one point-to-point hop between stages, seconds
  double dp = 0;         ///< the largest device tail's gradient reduction (and gathers), seconds
  double optimizer = 0;  ///< the largest device tail's optimizer step, seconds
  double tp_share = 0;   ///< share of pass time spent in tensor-parallel collectives
  std::vector<double> device_scratch;  ///< working space of CostModel (per-device sums)
  std::vector<double> device_expert;   ///< per device: MoE expert parameters held
  std::vector<double> device_layers;   ///< per device: transformer-layer parameters (FP8 copies)
};

/// Lower bounds of one configuration (valid = false when the configuration is not in the space,
/// e.g. a stage would get no layers).
struct ScreenResult {
  bool valid = false;
  bool costed = false;  ///< stage_costs succeeded: the scratch holds this configuration's costs
  double time_lb = 0;   ///< iteration seconds
  double mem_lb = 0;    ///< peak bytes per GPU
};

/// The activation limit a memory-reading generator (`so`) is given, in 1F1B-stage units, from
/// the units free for activations on the fullest GPU: 0 (no limit: the generator runs as
/// defined) when they hold the memory it is defined with (ScheduleOption::own_budget; 2p when
/// it declares none), else rounded down to a grid that is fine where memory is scarce and
/// coarse where it barely binds (steps of 0.5 units below 4, 1 below 8, 2 below 16, then 4).
/// The generators get it (search_eval) and the screen bounds by it.
double generator_memory_limit(const ScheduleOption& so, double units, int p);
/// The activation units `so` is defined with on p devices (own_budget; 2p, the most any
/// memory-reading generator is defined with, when it declares none).
double defined_budget(const ScheduleOption& so, int p);

/// The cost model of one problem and space, tabulated from hwmodels. Immutable; every method is
/// safe to call from many threads.
class CostModel {
 public:
  CostModel(const PlanProblem& problem, const SearchSpace& space);

  /// Fills `out` for configuration `c`, laying layers out with `c.end_trim`; returns false when
  /// the configuration is invalid. `out` keeps its capacity across calls (no allocation in the
  /// screen's loop once warmed up).
  /// With `filled`, `out` already holds the costs of a configuration that differs from `c` only
  /// in a schedule of the same cost class (cost_class): the checks and the layout are redone,
  /// the per-stage costs are kept.
  bool stage_costs(const SearchConfig& c, StageCosts* out, bool filled = false) const;
  /// Schedules whose options give every configuration the same stage costs (the same stages per
  /// device, pipelines, V shape, split backward, explicit recomputation and overlap) share a
  /// class: the index of the first such schedule in the space.
  int cost_class(int schedule) const { return cost_class_[schedule]; }

  /// As stage_costs, with the layer split given per stage (a generated placement's layers).
  void costs_for_layers(const SearchConfig& c, const std::vector<int>& layers,
                        StageCosts* out) const;

  /// First tier: lower bounds on the DES's iteration time and peak memory of `c`.
  /// `filled`: as for stage_costs (the scratch holds an equivalent configuration's costs).
  ScreenResult screen(const SearchConfig& c, StageCosts* scratch, bool filled = false) const;

  /// Activation bytes of one layer for one microbatch (hw::layer_activation_bytes).
  double layer_activation(const SearchConfig& c) const;
  /// Bytes of one microbatch's activations of a 1F1B stage (L/p layers): the generators'
  /// memory unit.
  double activation_unit(const SearchConfig& c) const;
  /// Activation memory left for a memory-reading generator, in its units (activation_unit):
  /// the usable memory less the fullest device's static memory (sc.static_mem). The generator's
  /// limit (generator_memory_limit) and the screen's bound by it both read this.
  double generator_units(const SearchConfig& c, const StageCosts& sc) const;
  /// For generators that take a limit per device (ScheduleOption::per_device_limits) on one
  /// pipeline: each device's own room in their units. A generator counts a microbatch of stage
  /// s as its share of the layers in its even split (Placement::activation_weight); the DES
  /// holds the stage's real activation (sc.act: this split, the embedding output and logits
  /// where it has them), so device d fits U_d = (usable - static_d) / its stages' largest
  /// bytes per unit. Each U_d is rounded down to whole microbatches of the device's smallest
  /// stage (what the generator can hold; a coarser grid lost one of p) and kept at most the
  /// device's defined budget (defined_budget x its stages' shares, as own_stage_budgets). Empty
  /// when every device has its defined budget (the generator then runs as defined) or the option
  /// does not take per-device limits; a device without room gets 0.
  void generator_caps(const SearchConfig& c, const StageCosts& sc, std::vector<double>* out) const;
  /// Model FLOPs of one iteration (no recomputation; hw::iteration_flops), for MFU.
  double model_flops(int global_batch) const;
  /// Hardware FLOPs of one iteration of `c` (recomputation counted), for HFU.
  double hardware_flops(const SearchConfig& c) const;
  /// The dense peak MFU and HFU are taken against (the profile's BF16 peak), FLOP/s.
  double peak_flops() const;

  const PlanProblem& problem() const { return problem_; }
  const SearchSpace& space() const { return space_; }

 private:
  // hwmodels' figures of one layer, the embedding and the head for one (t, b, sp, recompute),
  // with the TP collective time, the EP all-to-all bound (and the CP all-gather or all-to-all)
  // and the CP ring's bound of each pass
  // (seconds; index = hw::Pass).
  // `last` is the loss with the multi-token prediction depths (hw::StageRole {false, true,
  // true}); `loss` and `mtp` the two halves a layout's stage of the depths alone splits it into
  // (models with depths only).
  struct LayerEntry {
    hw::StageCosts layer, moe, first, last;  // a dense layer, an MoE layer (MoE models)
    hw::StageCosts loss, mtp;
    double tp[4] = {}, tp_moe[4] = {}, tp_first[4] = {}, tp_last[4] = {};
    double ep[4] = {}, ep_moe[4] = {}, ep_first[4] = {}, ep_last[4] = {};
    double tp_loss[4] = {}, tp_mtp[4] = {}, ep_loss[4] = {}, ep_mtp[4] = {};
    /// A layer's context-parallel ring steps, bandwidth bound (dense and MoE layers alike).
    double cp[4] = {};
    /// Bytes of the FP8 amax all-reduce that ends a stage's F and B ([0], [1]) under delayed
    /// scaling, per dense layer, per MoE layer and for the multi-token prediction depths (the
    /// kAmax entries of hw::stage_costs; 0 otherwise): a stage reduces its sum once per pass.
    double amax[2] = {}, amax_moe[2] = {}, amax_mtp[2] = {};
  };
  // The networks of one (t, p, d) layout: DP group collectives, the pipeline hop, the TP group's
  // all-gather (Megatron's scatter/gather of pipeline messages), the all-reduce of the first and
  // last pipeline ranks (the embedding copy's gradient).
  struct CellNet {
    hw::CollectiveLine dp_all_reduce, dp_reduce_scatter, dp_all_gather, tp_all_gather;
    hw::CollectiveLine embedding_all_reduce;
    /// Over a pipeline rank's t x cp x d GPUs (RankLayout::stage_group): FP8 delayed scaling's
    /// amax all-reduce; empty when the space has no such configuration.
    hw::CollectiveLine amax_all_reduce;
    double hop_alpha = 0, hop_beta = 0;  // seconds, seconds per byte
    /// MoE models: the expert-data-parallel group's lines (RankLayout::expert_dp_group) per
    /// expert layout, [ep index][etp1], empty lines where that group is the DP group, has one
    /// rank or the layout cannot exist (ExpertNet).
    struct ExpertNet {
      hw::CollectiveLine all_reduce, reduce_scatter, all_gather;
    };
    std::vector<ExpertNet> expert;
  };
  bool layer_split(const SearchConfig& c, std::vector<int>* layers) const;
  /// The configuration's figures per stage and device (screen_fill.cc).
  void fill(const SearchConfig& c, StageCosts* out) const;
  // One stage's figures in fill(). They depend on its layer count, its MoE layers and its role
  // (embedding, loss, multi-token prediction depths), not on where it sits: stages alike are
  // computed once.
  struct StageEval {
    int layers = -1, nm = 0;
    bool first = false, last = false, mtp = false;
    double f = 0, b = 0, w = 0, r = 0, act = 0, act_w = 0, act_r = 0, params = 0, gather = 0;
    double expert = 0, layer_params = 0, gathered = 0, stage_red = 0, stage_gather = 0;
    double stage_rs = 0, buf = 0, first_bucket = 0;
    std::array<double, 2> one_gather{0, 0}, stage_rs_link{0, 0}, gather_link{0, 0};
  };
  struct FillContext;
  StageEval eval_stage(const FillContext& x, int layer_begin, int layers, int nm,
                       hw::StageRole role) const;
  // One layer's figures for (t, cp, ep, expert TP 1 or t, fp8, b, sp, recompute).
  struct LayerKey {
    int t = 1, cp = 1, ep = 1, etp1 = 0, fp8 = 0, b = 1;
    bool sp = false;
    hw::Recompute rc = hw::Recompute::kNone;
  };
  LayerEntry make_layer_entry(const LayerKey& k) const;
  CellNet make_cell_net(int t, int p, int d) const;
  const LayerEntry& layer_entry(const SearchConfig& c, LayerEntry* scratch) const;
  const CellNet& cell_net(const SearchConfig& c, CellNet* scratch) const;

  PlanProblem problem_;
  SearchSpace space_;
  hw::GpuModel gpu_;
  // value -> index along its axis of layers_, -1 if not tabulated
  std::vector<int> t_index_, b_index_, cp_index_, ep_index_;
  std::vector<int> eps_;  // the expert-parallel sizes tabulated, in ep_index_ order
  int num_b_ = 0, num_cp_ = 0, num_ep_ = 0, num_etp_ = 0, num_fp8_ = 0;
  bool amax_ = false;  // FP8 searched under delayed scaling: cells carry the amax all-reduce
  std::vector<LayerEntry> layers_;  // [t][cp][ep][etp1][fp8][b][sp][rc]
  std::unordered_map<std::uint64_t, CellNet> nets_;
  std::vector<int> cost_class_;  // per schedule option
  // Multi-pipeline options: [schedule][p] the devices of each (pipeline, stage), read from the
  // option's placement (StageCosts::pipe_device); empty where not applicable.
  std::vector<std::vector<std::vector<int>>> pipe_devices_;
  std::vector<std::vector<std::vector<int>>> pipe_layers_;  // [schedule][p]: layers per stage
  // [stage count][end_trim code]: 1 where an earlier code of the space lays the layers out the
  // same way (the depths alone or not alike), so the search scores each split once.
  std::vector<std::array<std::uint8_t, 256>> trim_duplicate_;
};

}  // namespace pw
