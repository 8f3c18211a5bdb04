// The zero-bubble greedy scheduler (planner/schedules/zb_auto.h): the timing it reports beside
// each order, and its account of which other variants would have taken the same path. Expected
// values come from the evaluator (sim/evaluator.h) and from running the other variants.
#include <gtest/gtest.h>

#include <random>

#include "planner/schedules/bitpipe.h"
#include "planner/schedules/v_schedules.h"
#include "planner/schedules/zb_auto.h"
#include "sim/evaluator.h"
#include "unit_costs.h"

namespace pw {
namespace {

using testing::max_peak;
using testing::unit;

// A cost table for `pl` with random pass times (1..9), hops (0..3) and memory: a forward holds
// 0.5..1.5, its B frees a random share of it and its W the rest.
CostTable random_costs(const Placement& pl, std::mt19937& rng) {
  std::uniform_int_distribution<int> dur(1, 9);
  std::uniform_real_distribution<double> share(0.0, 1.0);
  CostTable costs = make_uniform_cost_table(pl, unit(0.5));
  for (int st = 0; st < costs.num_stages; ++st) {
    const TimePs f = dur(rng), b = dur(rng), w = dur(rng);
    costs.time(st, ActionKind::kF) = f;
    costs.time(st, ActionKind::kB) = b;
    costs.time(st, ActionKind::kW) = w;
    costs.time(st, ActionKind::kBW) = b + w;
    const double a = 0.5 + share(rng), kept = share(rng) * a;
    costs.mem(st, ActionKind::kF) = a;
    costs.mem(st, ActionKind::kB) = kept - a;
    costs.mem(st, ActionKind::kW) = -kept;
    costs.mem(st, ActionKind::kBW) = -a;
    costs.comm[st] = dur(rng) / 3;
  }
  return costs;
}

// zb_greedy reports its order's timing so that zb_auto and the V trade-off curve need not evaluate
// every variant again: it must be the evaluator's, exactly, on every placement the generators use,
// with uneven stage costs, hops, memory limits and every variant (strict forwards, whose greedy
// clock can run a pass before its device is free, included).
TEST(ZbGreedy, ReportedTimingIsTheEvaluatorsExactly) {
  std::mt19937 rng(7);
  int compared = 0;
  for (int p : {2, 3, 4, 6}) {
    const Placement placements[] = {linear_placement(p), v_placement(p), loop_placement(p, 3),
                                    bitpipe_placement(p, 0)};
    for (const Placement& pl : placements) {
      const CostTable costs = random_costs(pl, rng);
      const int m = 2 * p + 1;
      for (double limit : {0.0, 1.5 * p, 3.0 * p}) {
        for (WPolicy w :
             {WPolicy::kFillAny, WPolicy::kFillKnownGaps, WPolicy::kLookahead, WPolicy::kLazy})
          for (bool strict : {false, true})
            for (int extra : {-1, 1})
              for (bool fused : {false, true}) {
                GreedyVariant v;
                v.w_policy = w;
                v.strict_f = strict;
                v.staggered_extra = extra;
                v.fused_backward = fused;
                GreedyTiming t;
                const Schedule s = zb_greedy(pl, m, costs, limit, v, "zb", &t);
                if (s.actions.empty()) continue;
                const EvalResult r = evaluate(s, costs);
                ASSERT_EQ(t.cost, r.cost) << "p=" << p << " limit=" << limit;
                ASSERT_EQ(t.makespan, r.makespan);
                ASSERT_EQ(t.peak_memory, max_peak(r));
                ++compared;
              }
      }
    }
  }
  EXPECT_GT(compared, 500);
}

// zb_auto and the V curve skip a variant's other W policies where its kFillAny run says they
// would have decided every W alike (GreedyTiming::w_disagree). By the greedy's definition such a
// policy follows the same path: checked by running it, on random costs (hops, W holding part of
// the activation), limits and every variant knob; and the report is not trivially "all agree"
// or "all differ": both occur, and where a policy differs its order does at least once.
TEST(ZbGreedy, APolicyThatAgreesAtEveryWGivesTheSameOrder) {
  std::mt19937 rng(11);
  int agreed = 0, differed = 0, order_differed = 0;
  for (int p : {2, 3, 4, 6}) {
    for (const Placement& pl : {linear_placement(p), v_placement(p)}) {
      for (bool uniform : {true, false}) {
        const CostTable costs =
            uniform ? make_uniform_cost_table(pl, unit(0.5)) : random_costs(pl, rng);
        for (int m : {p, 2 * p + 1})
          for (double limit : {0.0, 1.0 * p, 2.0 * p})
            for (bool strict : {false, true})
              for (int extra : {-1, 1}) {
                GreedyVariant v;
                v.strict_f = strict;
                v.staggered_extra = extra;
                GreedyTiming t;
                const Schedule base = zb_greedy(pl, m, costs, limit, v, "zb", &t);
                EXPECT_FALSE(t.differs_for(WPolicy::kFillAny));  // the run's own policy
                for (WPolicy w : {WPolicy::kFillKnownGaps, WPolicy::kLookahead, WPolicy::kLazy}) {
                  GreedyVariant other = v;
                  other.w_policy = w;
                  const Schedule s = zb_greedy(pl, m, costs, limit, other, "zb");
                  if (t.differs_for(w)) {
                    ++differed;
                    order_differed += s.actions != base.actions;
                    continue;
                  }
                  ++agreed;
                  ASSERT_EQ(s.actions, base.actions) << "p=" << p << " m=" << m << " w=" << int(w);
                }
              }
      }
    }
  }
  EXPECT_GT(agreed, 20);
  EXPECT_GT(differed, 20);
  EXPECT_GT(order_differed, 0);
}

// run_greedy_twins: every twin runs; another run only where its twin's timing names its W
// policy, and only after the twin has run. By hand: runs 0-2 are one variant under the three
// policies, 3-4 another under kFillAny and kLookahead. Twin 0 met a W that kLookahead would have
// decided otherwise (bit 2), twin 3 none: runs 0, 2 and 3 run; 1 and 4 repeat their twin.
TEST(ZbGreedy, TwinRunsRepeatOnlyWhereTheirPolicyDiffers) {
  const std::vector<std::size_t> twin = {0, 0, 0, 3, 3};
  const std::vector<WPolicy> policy = {WPolicy::kFillAny, WPolicy::kFillKnownGaps,
                                       WPolicy::kLookahead, WPolicy::kFillAny, WPolicy::kLookahead};
  std::vector<GreedyTiming> timing(twin.size());
  std::vector<int> ran(twin.size(), 0);
  std::vector<int> twin_done_before(twin.size(), 0);
  run_greedy_twins(twin, policy, timing, [&](std::size_t i) {
    ran[i] = 1;
    if (twin[i] != i) twin_done_before[i] = ran[twin[i]];
    if (i == 0) timing[i].w_disagree = 1u << static_cast<int>(WPolicy::kLookahead);
  });
  EXPECT_EQ(ran, (std::vector<int>{1, 0, 1, 1, 0}));
  EXPECT_EQ(twin_done_before[2], 1);
}

}  // namespace
}  // namespace pw
