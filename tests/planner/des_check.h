#pragma once
// The search tests' certificate: every configuration the screen lets through, simulated by the
// discrete-event simulator, against the screen's and the evaluator's bounds.
#include <gtest/gtest.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <string>
#include <vector>

#include "planner/search/plan_emit.h"
#include "planner/search/search.h"

namespace pw::testing {

struct DesCheck {
  std::size_t checked = 0;  ///< configurations simulated by the DES
  int with_cp = 0, with_ep = 0, with_fp8 = 0, with_overlap = 0;
  int with_etp1 = 0;                     ///< MoE at t > 1 with the experts whole (expert-TP 1)
  int with_mtp_alone = 0;                ///< the depths on a stage of their own (mtp_standalone)
  int with_param_gather = 0;             ///< overlap_param_gather configurations (ZeRO-1/2, d > 1)
  int param_gather_aligned = 0;          ///< ... of them interleaved over pp > 1 (aligned gathers)
  int z3_by_layer = 0, z3_by_stage = 0;  ///< ZeRO-3 configurations of each gather granularity
  /// ZeRO-2/3 configurations whose screen bound is the time their data-parallel bytes keep one
  /// route busy (StageCosts::net_volume), above every other bound of the screen.
  int route_bound = 0;
  /// Configurations whose evaluator memory bound (model state + the schedule's activation peak)
  /// is above the screen's by more than 10% (so the check above can catch it overstating).
  int memory_bound = 0;
};

// Every configuration of `space` the evaluator ran and the screen let through, simulated by the
// DES: the screen's time and memory bounds and the evaluator's time bound are below the DES's
// figures, and the search (DES tier on) answers the exhaustive DES winner, certified, with every
// row it returns fitting by the DES. `what` labels failures.
inline DesCheck check_bounds_against_des(const PlanProblem& pr, const SearchSpace& space,
                                         const GeneratorRegistry& reg,
                                         const std::string& what = "") {
  DesCheck k;
  SearchOptions all;
  all.prune = false;
  all.keep_all = true;
  all.max_evaluations = 1 << 30;
  all.des_top = 0;
  const SearchResult r = run_search(pr, space, reg, all);
  const CostModel model(pr, space);
  std::vector<Evaluated> runs;
  for (const Evaluated& e : r.all)
    if (e.iteration > 0 && e.mem_lb <= pr.limit()) runs.push_back(e);
  EXPECT_GT(runs.size(), 200u) << what;
  std::vector<Evaluated> des(runs.size());
  tbb::parallel_for(std::size_t{0}, runs.size(), [&](std::size_t i) {
    des[i] = evaluate_config_des(model, reg, runs[i].config);
  });
  const Evaluated* best = nullptr;
  for (std::size_t i = 0; i < des.size(); ++i) {
    const Evaluated& e = des[i];
    const std::string at = what + " " + describe_config(space, e.config);
    EXPECT_EQ(e.tier, Tier::kDes) << at;
    EXPECT_LE(runs[i].time_lb, e.iteration * (1 + 1e-9)) << at;
    EXPECT_LE(runs[i].time_bound, e.iteration * (1 + 1e-9)) << at;
    EXPECT_LE(runs[i].mem_lb, e.peak_memory * (1 + 1e-9)) << at;
    EXPECT_LE(runs[i].mem_bound, e.peak_memory * (1 + 1e-9)) << at;
    ++k.checked;
    k.with_cp += e.config.cp > 1;
    k.with_ep += e.config.ep > 1;
    k.with_etp1 += e.config.etp1 != 0;
    k.with_mtp_alone += is_mtp_standalone_code(e.config.end_trim);
    k.with_fp8 += e.config.fp8;
    k.with_overlap += parallel_from_config(space, e.config).tp_comm_overlap;
    const bool pg =
        parallel_from_config(space, e.config).overlap_param_gather && e.config.d * e.config.cp > 1;
    k.with_param_gather += pg;
    k.param_gather_aligned += pg && e.config.p > 1 && space.schedules[e.config.schedule].v > 1;
    k.z3_by_layer += e.config.zero == 3 && !e.config.zero3_stage;
    k.z3_by_stage += e.config.zero == 3 && e.config.zero3_stage;
    StageCosts sc;
    const ScreenResult scr = model.screen(e.config, &sc);
    double volume = 0;
    for (double v : sc.net_volume) volume = std::max(volume, v);
    k.route_bound += volume > 0 && volume >= scr.time_lb;
    k.memory_bound += runs[i].mem_bound > 1.1 * runs[i].mem_lb;
    if (e.feasible && (!best || e.objective < best->objective)) best = &e;
  }
  EXPECT_NE(best, nullptr);
  if (best == nullptr) return k;
  SearchOptions o;
  o.top = 3;
  const SearchResult s = run_search(pr, space, reg, o);
  EXPECT_FALSE(s.top.empty());
  if (s.top.empty()) return k;
  EXPECT_TRUE(s.stats.certified) << s.stats.des_note;
  for (const Evaluated& e : s.top) {
    EXPECT_EQ(e.tier, Tier::kDes) << what;
    EXPECT_TRUE(e.feasible) << what;
    EXPECT_LE(e.peak_memory, pr.limit()) << what;
  }
  EXPECT_DOUBLE_EQ(s.top[0].objective, best->objective)
      << what << ": exhaustive DES winner " << describe_config(space, best->config)
      << ", search chose " << describe_config(space, s.top[0].config);
  return k;
}
}  // namespace pw::testing
