#pragma once
/// The configuration search: a parallel screen (planner/search/screen.h) over the whole space keeps
/// the candidates whose lower bounds can still win, then the second tier generates each survivor's
/// schedule with the registry and scores it with the fixed-cost evaluator (sim/evaluator.h),
/// best lower bound first, until no remaining lower bound can beat the N-th best score (branch
/// and bound: the ranking it returns is the one an exhaustive second tier would return). The
/// evaluator's best N (SearchOptions::des_top) are then simulated with the discrete-event
/// simulator (sim/iteration.h: communication on the topology, collectives, overlap) and the
/// final ranking is by that simulation.
/// Deterministic: the same input gives the same result whatever the thread count.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "planner/schedules/generator.h"
#include "planner/search/screen.h"
#include "sim/iteration.h"

namespace pw {

/// Knobs of one search.
struct SearchOptions {
  int top = 10;     ///< rows of the ranking
  int threads = 0;  ///< 0 = all cores
  /// Second-tier budget (the result says if it was hit; `plan --max-evaluations`). Qwen3-235B
  /// on 256 H100 with expert TP 1 in the space certifies after 24,000 (3.6 s).
  int max_evaluations = 50000;
  /// false: no pruning at all; the second tier scores every well-formed configuration (tests
  /// compare this exhaustive ranking with the pruned one)
  bool prune = true;
  bool keep_all = false;  ///< return every second-tier evaluation in SearchResult::all
  /// Third tier: the evaluator's best `des_top` feasible configurations are simulated with the
  /// discrete-event simulator (one representative GPU per pipeline rank) first, then every
  /// configuration whose lower bound could still beat the top-th DES result, so that the ranking
  /// is the DES's own over the space (SearchStats::certified). 0 = off (the evaluator's ranking).
  int des_top = 32;
  /// Most DES simulations of one search; when it stops certification early the result says so
  /// (SearchStats::des_note, certified = false).
  int des_budget = 4000;
  /// Called with the fraction done (0..1) at most about 200 times; may be empty.
  std::function<void(double)> progress;
};

/// Where an evaluated configuration's iteration time goes (seconds).
struct TimeBreakdown {
  double compute = 0;    ///< busiest device's pass time without TP collectives
  double tp_comm = 0;    ///< tensor-parallel collectives inside the passes
  double bubble = 0;     ///< pipeline idle time, communication hops included
  double dp_comm = 0;    ///< exposed data-parallel gradient reduction
  double optimizer = 0;  ///< optimizer step (and offload traffic)
};

/// Which engine produced an Evaluated's iteration time.
enum class Tier : std::uint8_t { kEvaluator, kDes };
const char* tier_name(Tier t);  ///< "eval", "DES"

/// One configuration scored by the second tier (and possibly the DES).
struct Evaluated {
  SearchConfig config;
  bool feasible = false;
  std::string why_not;  ///< when infeasible: memory, or the generator's reason
  Tier tier = Tier::kEvaluator;
  double iteration = 0;        ///< seconds, from `tier`'s engine
  double eval_iteration = 0;   ///< seconds, the fixed-cost evaluator's figure
  double peak_memory = 0;      ///< bytes, busiest GPU, from `tier`'s engine
  double bubble_rate = 0;      ///< idle share of the busiest compute stream, `tier`'s engine
  double pipeline_bubble = 0;  ///< the pipeline part of it (exposed communication excluded; DES)
  double mfu = 0, hfu = 0;     ///< model / hardware FLOPs over time x GPUs x BF16 peak
  double objective = 0;        ///< what is minimised (seconds, GPU-seconds, or to the target)
  double time_lb = 0;          ///< the screen's bound on the DES's time (seconds)
  /// The best proven lower bound on the DES's time: the larger of time_lb and the evaluator's
  /// figure without its ZeRO-3 gather estimate (for schedules without OVERLAP_F_B). The DES tier
  /// certifies with it.
  double time_bound = 0;
  double mem_lb = 0;  ///< the screen's memory bound (bytes), for the record
  /// The best proven lower bound on the DES's peak memory: the larger of mem_lb and the
  /// evaluator's model state plus the schedule's own activation peak (the DES runs the same
  /// per-device order with the same activation sizes; buffers left out; not for multi-pipeline
  /// placements, whose state is averaged). The DES tier skips rows above the limit by it.
  double mem_bound = 0;
  TimeBreakdown breakdown;  ///< the evaluator's (its shares name what limits a configuration)
};

/// Counters of one search.
struct SearchStats {
  std::uint64_t space = 0;          ///< configurations enumerated (product of the lists)
  std::uint64_t screened = 0;       ///< configurations the screen scored
  std::uint64_t valid = 0;          ///< ... that are well formed
  std::uint64_t fit = 0;            ///< ... whose memory lower bound fits
  std::uint64_t evaluated = 0;      ///< second-tier evaluations (schedules generated and simulated)
  std::uint64_t generated = 0;      ///< distinct schedules generated (memoised pipelines)
  std::uint64_t des_simulated = 0;  ///< configurations re-simulated with the DES
  double screen_seconds = 0;
  double evaluate_seconds = 0;
  double des_seconds = 0;
  /// Of the second-tier time (both tiers' evaluations): generating schedules, and scoring
  /// configurations on generated (memoised) schedules; wall seconds on `threads` threads.
  double generate_seconds = 0, score_seconds = 0;
  std::string des_note;     ///< why the DES tier stopped before certifying ("" when it did)
  bool certified = false;   ///< the DES tier proved no unsimulated configuration can beat the top
  bool budget_hit = false;  ///< max_evaluations stopped the search before it proved the top
  int threads = 1;
};

/// What a search found.
struct SearchResult {
  std::vector<Evaluated> top;     ///< best first; empty when nothing fits
  std::vector<Evaluated> pareto;  ///< evaluated feasible points not beaten in both time and memory
  SearchStats stats;
  /// When nothing fits: the smallest per-GPU memory any configuration needs (lower bound, bytes).
  double min_memory_needed = 0;
  /// ... and true when that bound is the limit itself, exceeded by an amount the search does not
  /// know: the least demanding configuration is one whose schedule could not be generated under
  /// the limit (a memory-aware generator refused it), so it needs more than the limit.
  bool min_memory_strict = false;
  std::vector<std::string> skipped_generators;  ///< failed the probe
  std::vector<Evaluated> all;  ///< every second-tier evaluation (SearchOptions::keep_all)
};

/// Builds the default space for `problem`: every registered schedule (interleaved-style ones
/// with each v in {2, 3, 4, 6, 8}), microbatch sizes 1..8, the given global batches (or, for
/// time-to-loss, a grid around the critical batch), and GPU counts n, n/2, ... down to one node.
SearchSpace default_space(const PlanProblem& problem, const GeneratorRegistry& registry,
                          const std::vector<int>& global_batches,
                          std::vector<std::string>* skipped = nullptr);

/// Runs the two-tier search.
SearchResult run_search(const PlanProblem& problem, const SearchSpace& space,
                        const GeneratorRegistry& registry, const SearchOptions& options);

/// Second tier alone: generates and evaluates one configuration (also used to score a
/// published configuration). `schedule_out`, when given, receives the generated schedule with
/// its layer split applied; `timings` the evaluator's per-action start/end (device-major ids).
Evaluated evaluate_config(const CostModel& model, const GeneratorRegistry& registry,
                          const SearchConfig& c, Schedule* schedule_out = nullptr,
                          std::vector<std::pair<TimePs, TimePs>>* timings = nullptr);

/// The DES input of configuration `c` run with `schedule` (generated for `c`, its layer split
/// applied: evaluate_config's schedule_out): model, parallel configuration, profile, topology
/// of ceil(GPUs / GPUs per node) nodes.
IterationInput des_input(const PlanProblem& problem, const SearchSpace& space,
                         const SearchConfig& c, const Schedule& schedule);

/// Third tier on one evaluated configuration: simulates it with the DES and makes the DES the
/// source of `e`'s iteration, bubble rate and objective (tier = kDes; eval_iteration keeps the
/// evaluator's figure) on the problem's profile with its simulator options (PlanProblem::sim,
/// one representative GPU per pipeline rank). `schedule` is the one generated for `e->config`.
void des_rescore(const PlanProblem& problem, const SearchSpace& space, const Schedule& schedule,
                 Evaluated* e);

/// evaluate_config followed by des_rescore whenever the schedule generates (how a published
/// configuration is scored against a DES-ranked search; the DES decides what fits).
Evaluated evaluate_config_des(const CostModel& model, const GeneratorRegistry& registry,
                              const SearchConfig& c);

/// The evaluator's cost table of configuration `c` for a generated schedule `s` (layer ranges
/// from its placement; picoseconds and activation bytes).
CostTable config_cost_table(const CostModel& model, const SearchConfig& c, const Schedule& s);

/// Objective value of an iteration time for `c` (seconds, GPU-seconds, or to the target).
double objective_value(const PlanProblem& problem, const SearchConfig& c, double iteration);
/// Tokens one iteration of `c` trains: global batch (sequences) x sequence length.
double batch_tokens(const PlanProblem& problem, const SearchConfig& c);

/// Short description, e.g. "t8 p8 d16 mb1 B1536 interleaved v3 sel sp z1".
std::string describe_config(const SearchSpace& space, const SearchConfig& c);

}  // namespace pw
