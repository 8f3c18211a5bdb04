#include "planner/search/stage_schedule.h"

#include <algorithm>
#include <array>

namespace pw {

CostTable to_cost_table(const StageCosts& sc, int num_stages_total,
                        const std::vector<int>& stage_of, bool explicit_recompute) {
  CostTable t;
  t.num_stages = num_stages_total;
  t.duration.assign(static_cast<std::size_t>(num_stages_total) * kNumActionKinds, 0);
  t.mem_delta.assign(static_cast<std::size_t>(num_stages_total) * kNumActionKinds, 0.0);
  t.comm.assign(num_stages_total, seconds_to_ps(sc.hop));
  // OVERLAP_F_B: its forward here, plus the paired stage's B + W (the evaluator adds it).
  t.overlap_pairs = true;
  for (int g = 0; g < num_stages_total; ++g) {
    const int i = stage_of[g];
    const TimePs f = seconds_to_ps(sc.f[i]), b = seconds_to_ps(sc.b[i]), w = seconds_to_ps(sc.w[i]);
    t.time(g, ActionKind::kF) = f;
    t.time(g, ActionKind::kB) = b;
    t.time(g, ActionKind::kW) = w;
    t.time(g, ActionKind::kBW) = b + w;
    t.time(g, ActionKind::kR) = 0;
    t.time(g, ActionKind::kOverlapFB) = f;
    t.mem(g, ActionKind::kF) = sc.act[i];
    t.mem(g, ActionKind::kB) = -(sc.act[i] - sc.act_w[i]);
    t.mem(g, ActionKind::kW) = -sc.act_w[i];
    t.mem(g, ActionKind::kBW) = -sc.act[i];
    if (explicit_recompute) {
      const TimePs r = seconds_to_ps(sc.r[i]);
      t.time(g, ActionKind::kR) = r;
      t.time(g, ActionKind::kB) = b - r;
      t.time(g, ActionKind::kBW) = b - r + w;
      t.mem(g, ActionKind::kR) = sc.act_r[i];
      t.mem(g, ActionKind::kB) = -(sc.act[i] + sc.act_r[i] - sc.act_w[i]);
      t.mem(g, ActionKind::kBW) = -(sc.act[i] + sc.act_r[i]);
    }
  }
  return t;
}

double exposed_gather(const StageCosts& sc, const Schedule& schedule,
                      const std::vector<double>& busy) {
  if (std::none_of(sc.gather.begin(), sc.gather.end(), [](double g) { return g > 0; })) return 0;
  const Placement& pl = schedule.placement;
  double worst = 0;
  for (int d = 0; d < static_cast<int>(schedule.actions.size()); ++d) {
    int stage = -1;
    double first = -1, rest = 0;
    for (const Action& a : schedule.actions[d]) {
      if (!is_compute(a.kind) || a.stage == stage) continue;
      stage = a.stage;
      const double g = sc.gather[pl.stages[stage].index];
      if (first < 0) {
        first = g;
      } else {
        rest += g;
      }
    }
    if (first < 0) continue;
    const double b = d < static_cast<int>(busy.size()) ? busy[d] : 0;
    worst = std::max(worst, first + std::max(0.0, rest - b));
  }
  return worst;
}

double gather_link_bound(const StageCosts& sc, const Schedule& schedule) {
  if (std::none_of(sc.gather_link.begin(), sc.gather_link.end(),
                   [](const std::array<double, 2>& g) { return g[0] > 0 || g[1] > 0; }))
    return 0;
  const Placement& pl = schedule.placement;
  double worst = 0;
  for (int d = 0; d < static_cast<int>(schedule.actions.size()); ++d) {
    for (int k = 0; k < 2; ++k) {
      int stage = -1;
      double sum = 0, largest = 0;
      for (const Action& a : schedule.actions[d]) {
        if (!is_compute(a.kind) || a.stage == stage) continue;
        stage = a.stage;
        const double g = sc.gather_link[pl.stages[stage].index][k];
        sum += g;
        largest = std::max(largest, g);
      }
      const double rest = d < static_cast<int>(sc.reduce_link.size()) ? sc.reduce_link[d][k] : 0;
      worst = std::max(worst, std::max(0.0, sum - 2 * largest) + rest);
    }
  }
  return worst;
}

}  // namespace pw
