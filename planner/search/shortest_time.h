#pragma once
/// "Shortest possible training time" (the layered-gradient-accumulation / breadth-first
/// pipeline paper's analysis): with as many GPUs of one type as wanted, the time to reach a
/// target is S(B) * T(B, n); Kaplan's trade-off S = S_min (1 + B_crit / B) makes batches beyond
/// B_crit buy little, which caps the GPUs that can be used well, and T(B, n) is bounded by
/// bubbles, network and memory. This sweeps B (powers of two within a factor 8 of B_crit) and
/// n (one node, doubling until two doublings in a row stop helping by 2% or `max_gpus`), searches
/// each point with the screen and the evaluator (no DES tier: dozens of searches), and reports
/// the fastest point and what bounds it.
#include <string>
#include <vector>

#include "planner/schedules/generator.h"
#include "planner/search/search.h"

namespace pw {

struct ShortestTimeOptions {
  int threads = 0;
  int max_gpus = 1 << 16;  ///< sweep ceiling ("unlimited" in practice)
  /// Applied to the search at every sweep point (constrain_space). `gpus` and `global_batch`
  /// must be empty: they are what the sweep chooses. A point where the constraints leave no
  /// configuration (e.g. --tp 8 --pp 8 on 8 GPUs, or a --dp that does not divide the count) is
  /// infeasible; the rest of the sweep goes on.
  SearchConstraints constraints;
};

/// One (batch, GPU count) point of the sweep.
struct ShortestTimePoint {
  int global_batch = 0;  ///< sequences
  int gpus = 0;
  bool feasible = false;
  Evaluated best;  ///< the configuration the search chose at this point
  double steps = 0;
  double days = 0;
};

struct ShortestTimeResult {
  bool feasible = false;
  std::string note;        ///< target used (given, or Chinchilla-optimal tokens)
  double target_loss = 0;  ///< nats
  double b_crit_tokens = 0;
  double s_min = 0;
  std::vector<ShortestTimePoint> points;  ///< the sweep, batch-major
  ShortestTimePoint best;
  SearchSpace space;  ///< to describe configurations
  std::string bound;  ///< what bounds the fastest time
  int max_gpus = 0;   ///< the sweep's ceiling (ShortestTimeOptions::max_gpus)
};

/// Runs the sweep for `problem` (its num_gpus is ignored; its target, or 20 tokens per
/// parameter when it has none, defines the loss). Throws ConfigError naming the flags when
/// options.constraints set --gpus or --global-batch, or contradict the model or every point of
/// the sweep (constrain_space's checks over all swept GPU counts and batches), and when
/// options.max_gpus is below one node (the sweep counts whole nodes).
ShortestTimeResult shortest_time(const PlanProblem& problem, const GeneratorRegistry& registry,
                                 const ShortestTimeOptions& options);

std::string shortest_time_table(const PlanProblem& problem, const ShortestTimeResult& r);
std::string shortest_time_json(const PlanProblem& problem, const ShortestTimeResult& r);

}  // namespace pw
