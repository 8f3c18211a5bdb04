#pragma once
/// Rendering of a search result: the top-k table, the Pareto front of time against memory, what
/// limits the best configuration, the comparison with a published configuration and, with a
/// training target, days and GPU-hours to train. Table (text) or JSON.
#include <optional>
#include <string>

#include "planner/search/search.h"

namespace pw {

/// Everything a report shows.
struct PlanReportInput {
  const PlanProblem* problem = nullptr;
  const SearchSpace* space = nullptr;
  const SearchResult* result = nullptr;
  std::string scenario;                ///< file name or "built-in default"
  std::string cluster;                 ///< profile name
  std::optional<Evaluated> published;  ///< the scenario's own configuration, scored the same way
  std::string published_source;
  double published_tflops = 0;  ///< as published (per GPU), 0 = none
  /// How the published configuration reads when it is not in the searched space (its
  /// `published->config` then holds nothing); empty otherwise.
  std::string published_outside;
};

/// Model TFLOP/s per GPU of an evaluated configuration (no recomputation counted).
double model_tflops_per_gpu(const PlanProblem& pr, const Evaluated& e);
/// Model FLOPs utilisation in [0, 1].
double mfu(const PlanProblem& pr, const Evaluated& e);
/// The pipeline bubble of a row: pipeline idle share of the busiest GPU, exposed communication
/// excluded (the DES's figure; the evaluator's idle share for evaluator rows, which have no
/// communication to expose).
double pipeline_bubble(const Evaluated& e);

/// One line naming what bounds `e`: the largest non-compute share of its iteration, and memory
/// when it is close to the limit or needed recomputation/sharding/offload to fit.
std::string limits_line(const PlanProblem& pr, const SearchSpace& space, const Evaluated& e);

/// Why row `i` of the ranking is where it is (the first row against the second, the others
/// against the first): a few words.
std::string why_line(const SearchSpace& space, const std::vector<Evaluated>& top, std::size_t i);

/// Days and GPU-hours to reach the problem's target at `e` (feasible == false when the target
/// cannot be reached). With no target: for a 300B-token budget (GPT-3's).
struct TrainTime {
  bool feasible = true;
  std::string note;
  double tokens = 0, steps = 0, days = 0, gpu_hours = 0, b_crit_tokens = 0;
};
TrainTime train_time(const PlanProblem& pr, const Evaluated& e);

/// The ranking, one row per ranked configuration, with the columns and formatting the CLI's
/// table prints (render_table draws it aligned; the HTML report draws it as a table).
struct RankingTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
RankingTable ranking_table(const PlanReportInput& in);

std::string render_table(const PlanReportInput& in);
std::string render_json(const PlanReportInput& in);

}  // namespace pw
