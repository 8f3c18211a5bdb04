#pragma once
/// Internal to planner/search: the evaluator tier's pieces the searcher shares with
/// evaluate_config (search_eval.cc): a pipeline run on a generated schedule, the cache key of a
/// generated schedule, and turning a run into an Evaluated row.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "planner/schedules/generator.h"
#include "planner/search/search.h"
#include "sim/evaluator.h"

namespace pw::detail {

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
  double link = 0;    // ZeRO-3 by stage: the busiest route off a node, sweeps counted, seconds
};

// A generated schedule shared by every configuration that asks its generator the same
// question: same schedule, p, m, cost ratios (quantised) and memory limit. Generation and the
// evaluator's dependency graph are built once; runs on the same entry are serialised.
struct GenEntry {
  std::string error;
  std::unique_ptr<Evaluator> ev;
  std::mutex mu;
};

using GenKey = std::array<std::int64_t, 4>;

/// Generator inputs of `c`; false (with why) when no generator should be asked.
bool generator_params(const CostModel& model, const SearchConfig& c, const StageCosts& sc,
                      GeneratorParams* gp, std::string* why);
GenKey gen_key(const SearchConfig& c, const GeneratorParams& gp);
/// Runs configuration `c` on an evaluator of its generated schedule.
PipeResult run_on(const CostModel& model, const SearchConfig& c, const StageCosts& sc,
                  Evaluator& ev, std::vector<std::pair<TimePs, TimePs>>* timings);
/// Writes the configuration's layer split (uneven ends) into a single-pipeline placement.
void apply_layer_split(const StageCosts& sc, Placement* pl);
/// The evaluated row of a pipeline run: iteration with the tails, MFU, peak memory, fit.
Evaluated finish(const CostModel& model, const SearchConfig& c, const PipeResult& pipe);
/// The configurations no other is both faster and smaller than, by memory.
std::vector<Evaluated> pareto_front(std::vector<Evaluated> pts);

}  // namespace pw::detail
