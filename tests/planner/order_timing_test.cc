// Timing other orders of one schedule's passes on one dependency graph (planner/schedules/
// order_timing.h), as the V curve's grid points and BitPipe's candidates do: each order must get
// the evaluator's own figures (sim/evaluator.h), and an order of other passes must be refused
// rather than timed on the wrong graph.
#include "planner/schedules/order_timing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "planner/schedules/bitpipe.h"
#include "planner/schedules/block_reorder.h"
#include "planner/schedules/zb_auto.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

// BitPipe's candidates at p=4, m=8 with uneven pass times and hops: the time-expanded orders for
// every admission lag and the greedy's, each timed on the first one's graph. Makespan, cost and
// peak equal evaluate() of the candidate itself.
TEST(OrderTiming, OrdersOfTheSamePassesTimedOnOneGraphGetTheEvaluatorsFigures) {
  const int p = 4, m = 8;
  const Placement pl = bitpipe_placement(p, 0);
  CostTable costs = make_uniform_cost_table(pl, UniformCosts{3, 4, 2, 0, 1});
  for (int s = 0; s < costs.num_stages; ++s) {
    costs.time(s, ActionKind::kF) += s % 3;
    costs.time(s, ActionKind::kBW) += (s * 7) % 5;
  }
  std::vector<Schedule> orders;
  for (int k = 0; k <= p; ++k) orders.push_back(bitpipe_time_expanded(pl, m, costs, k, p - 1));
  GreedyVariant v;
  v.fused_backward = true;
  orders.push_back(zb_greedy(pl, m, costs, 0.0, v, "bitpipe"));
  const detail::Flat flat(orders.front(), costs);
  const detail::ActionIds ids(flat, pl.num_stages(), m);
  for (const Schedule& s : orders) {
    ASSERT_FALSE(s.actions.empty());
    const std::optional<detail::Orders> ord = ids.orders_of(s);
    ASSERT_TRUE(ord.has_value());
    detail::Timeline tl;
    ASSERT_TRUE(detail::time_orders(flat, *ord, tl));
    const EvalResult r = evaluate(s, costs);
    EXPECT_EQ(tl.makespan, r.makespan);
    EXPECT_EQ(tl.cost, r.cost);
    const std::vector<double> peaks = order_peaks(s, costs);
    for (std::size_t d = 0; d < peaks.size(); ++d)
      EXPECT_DOUBLE_EQ(peaks[d], r.device[d].peak_memory);
  }
}

// Another set of passes is refused: one missing, one twice, one on another device, one of a
// microbatch the graph does not have.
TEST(OrderTiming, AnOrderOfOtherPassesIsRefused) {
  const int p = 4, m = 4;
  const Placement pl = bitpipe_placement(p, 0);
  const CostTable costs = make_uniform_cost_table(pl, UniformCosts{1, 1, 1, 0, 0});
  const Schedule base = bitpipe_time_expanded(pl, m, costs, 0, 0);
  const detail::Flat flat(base, costs);
  const detail::ActionIds ids(flat, pl.num_stages(), m);
  ASSERT_TRUE(ids.orders_of(base).has_value());
  Schedule missing = base;
  missing.actions[1].pop_back();
  EXPECT_FALSE(ids.orders_of(missing).has_value());
  Schedule twice = base;
  twice.actions[1].back() = twice.actions[1].front();
  EXPECT_FALSE(ids.orders_of(twice).has_value());
  Schedule moved = base;
  moved.actions[2].push_back(moved.actions[1].back());
  moved.actions[1].pop_back();
  EXPECT_FALSE(ids.orders_of(moved).has_value());
  Schedule other = base;
  other.actions[0].front().microbatch = m;
  EXPECT_FALSE(ids.orders_of(other).has_value());
}

}  // namespace
}  // namespace pw
