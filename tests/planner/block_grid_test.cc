// Building blocks (planner/schedules/building_block.h: the text form, the fast squeeze of a
// block's repetition, W gap filling) and the authors' reordering of V blocks
// (planner/schedules/v_grid.h), with the adaptive curve's points built on it. Expected values
// come from shared/reference/schedules.md or from the evaluator, which these fast paths must
// reproduce exactly. Units: with UniformCosts{1,1,1} one chunk pass is one slot; a V chunk's
// activation is 0.5 of a 1F1B stage, so "chunk activations" = 2 * peak_memory.
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/validator.h"
#include "planner/schedules/adaptive.h"
#include "planner/schedules/building_block.h"
#include "planner/schedules/v_grid.h"
#include "planner/schedules/v_schedules.h"
#include "sim/evaluator.h"
#include "unit_costs.h"

namespace pw {
namespace {

using testing::max_peak;
using testing::unit;

// The authors' reordering (planner/schedules/v_grid.h) of the block their scheduler picks at
// p=4, m=8 and 5 chunk activations (device rows, period 6: FWwfBb, WFfwbB, BfFbWw, fBbFWw; F/f
// chunk 0/1 forward, B/b chunk 1/0 backward, W/w their weight passes) gives the published 56
// under their memory rule (activation held until W), within the limit.
TEST(VGrid, TheAuthorsBlockAtFiveActivationsGivesThePublished56) {
  const VGridPattern pattern = {
      {0, 3, 4, 5, 1, 2}, {1, 2, 5, 4, 0, 3}, {2, 1, 0, 3, 4, 5}, {3, 0, 1, 2, 4, 5}};
  const std::optional<Schedule> s = v_grid_schedule(4, 8, pattern, 5);
  ASSERT_TRUE(s.has_value());
  validate_schedule(*s);
  const EvalResult r = evaluate(*s, make_uniform_cost_table(s->placement, unit(1.0)));
  EXPECT_EQ(r.cost, 56);
  EXPECT_LE(2 * max_peak(r), 5 + 1e-9);
  // Their limit refuses it when the block's repetition needs more (m >= 2p: checked up front).
  EXPECT_FALSE(v_grid_schedule(4, 8, pattern, 4).has_value());
}

// The curve's points from the authors' reordering are timed on one dependency graph shared by
// every grid order (adaptive.cc); each must carry the evaluator's own figures for its schedule,
// under real costs with hops and W holding part of the activation.
TEST(VGrid, CurvePointsCarryTheEvaluatorsFigures) {
  int grid_points = 0;
  for (int p : {4, 6, 8})
    for (int m : {2 * p, 3 * p})
      for (double mw : {0.25, 1.0}) {
        UniformCosts c{4, 5, 3, 0, 1};
        c.mw_over_mb = mw;
        const CostTable costs = make_uniform_cost_table(v_placement(p), c);
        AdaptiveOptions opt;
        opt.greedy_points = false;
        opt.grid_per_level = 0;  // every block through the authors' method
        const TradeoffCurve curve = adaptive_tradeoff(p, m, costs, opt);
        for (const TradeoffPoint& pt : curve.points) {
          if (!pt.grid) continue;
          ++grid_points;
          const EvalResult r = evaluate(tradeoff_schedule(p, m, pt, costs), costs);
          EXPECT_EQ(r.cost, pt.cost) << "p=" << p << " m=" << m << " mw=" << mw;
          EXPECT_EQ(r.makespan, pt.makespan);
          EXPECT_DOUBLE_EQ(max_peak(r), pt.peak_memory);
        }
      }
  EXPECT_GT(grid_points, 0);
}

// Blocks of the authors' space with uniform offsets: each device-0 pattern (F at 0, f at ff, B
// at bf, b at bb), +k per device for F and B, -1 for f and b, W and w in the `skip`-th free slot
// after B and b (skip 0: the first). Patterns whose four passes collide on a device are left out.
std::vector<VGridPattern> uniform_patterns(int p, int max_skip) {
  std::vector<VGridPattern> all;
  for (int ff = 1; ff < 6; ++ff)
    for (int bf = 1; bf < 6; ++bf)
      for (int bb = 1; bb < 6; ++bb)
        for (int k = 1; k < 6; ++k)
          for (int skip = 0; skip <= max_skip; ++skip) {
            if (ff == bf || ff == bb || bf == bb) continue;
            VGridPattern pat(p);
            bool ok = true;
            for (int i = 0; i < p && ok; ++i) {
              std::array<int, 6>& x = pat[i];
              x = {(0 + k * i) % 6,
                   ((ff - i) % 6 + 6) % 6,
                   (bf + k * i) % 6,
                   ((bb - i) % 6 + 6) % 6,
                   -1,
                   -1};
              unsigned used = 0;
              for (int v = 0; v < 4; ++v) {
                ok = ok && !(used & (1u << x[v]));
                used |= 1u << x[v];
              }
              for (int v : {4, 5}) {
                const int after = v == 4 ? x[2] : x[3];
                int left = v == 4 ? skip : 0;  // w: the first free slot after W is placed
                for (int d = 1; d <= 6 && x[v] < 0; ++d)
                  if (!(used & (1u << ((after + d) % 6))) && left-- == 0) {
                    x[v] = (after + d) % 6;
                    used |= 1u << x[v];
                  }
                ok = ok && x[v] >= 0;
              }
            }
            if (ok) all.push_back(pat);
          }
  return all;
}

TEST(VGrid, EveryOrderItGivesIsLegalWithinTwoPAndDeterministic) {
  // Every device-0 pattern of the authors' space with uniform offsets (uniform_patterns, W and w
  // in the first free slot after B and b), p = 2..6, m in {p, 2p, 3p+1}: what it returns is a
  // legal V schedule of m microbatches whose peak under the hold-until-W rule is at most 2p
  // chunk activations, and the same on a second call. The batch form (v_grid_schedules) gives
  // every block the same answer as v_grid_schedule, and blocks whose first squeezed repetitions
  // coincide share one.
  int returned = 0;
  std::size_t shared = 0;
  for (int p = 2; p <= 6; ++p)
    for (int m : {p, 2 * p, 3 * p + 1}) {
      const std::vector<VGridPattern> all = uniform_patterns(p, 0);
      std::vector<std::optional<Schedule>> one_by_one;
      for (const VGridPattern& pat : all) {
        const std::optional<Schedule> s = v_grid_schedule(p, m, pat, 2 * p);
        one_by_one.push_back(s);
        if (!s) continue;
        ++returned;
        ASSERT_EQ(check_schedule(*s), "") << "p=" << p << " m=" << m;
        const EvalResult r = evaluate(*s, make_uniform_cost_table(s->placement, unit(1.0)));
        EXPECT_LE(2 * max_peak(r), 2 * p + 1e-9) << "p=" << p << " m=" << m;
        EXPECT_EQ(v_grid_schedule(p, m, pat, 2 * p), s);
      }
      const VGridSchedules batch = v_grid_schedules(p, m, all, 2 * p);
      ASSERT_EQ(batch.of.size(), all.size());
      for (std::size_t k = 0; k < all.size(); ++k) {
        ASSERT_LT(batch.of[k], batch.schedules.size());
        EXPECT_EQ(batch.schedules[batch.of[k]], one_by_one[k]) << "p=" << p << " m=" << m;
      }
      shared += all.size() - batch.schedules.size();
    }
  EXPECT_GT(returned, 100);
  EXPECT_GT(shared, 0u);
}

TEST(VGrid, SteadyStateJumpsGiveTheSteppedSchedule) {
  // The method's squeezes and its bubble fill jump over their steady state (v_grid.cc: once a
  // window of six columns has repeated the one before, one microbatch on, the rest of the
  // periodic run is copied). Reference: the same method stepping through every column. Every
  // uniform pattern with two W placements, p = 2..12, m from below p (no steady state) to
  // 6p (long ones), at the authors' 2p limit and at p + 1 (which refuses some blocks midway):
  // the same schedule or the same refusal.
  int returned = 0;
  for (int p = 2; p <= 12; ++p)
    for (int m : {p - 1, p, 2 * p, 3 * p + 1, 4 * p, 6 * p + 5})
      for (int limit : {2 * p, p + 1})
        for (const VGridPattern& pat : uniform_patterns(p, 1)) {
          const std::optional<Schedule> s = v_grid_schedule(p, m, pat, limit);
          ASSERT_EQ(s, detail::v_grid_schedule_stepped(p, m, pat, limit))
              << "p=" << p << " m=" << m << " limit=" << limit;
          returned += s.has_value();
        }
  EXPECT_GT(returned, 1000);
}

TEST(BuildingBlock, CollidingOffsetsNameDeviceAndSlot) {
  // Device 0: F0@0 and B0@6 land on slot 0 of consecutive periods (T = 6).
  const Placement pl = linear_placement(1);
  try {
    parse_block("T=6; 0: F0@0 B0@6 W0@7", pl, "my.block");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "my.block");
    EXPECT_EQ(e.key(), "block.device[0]");
    EXPECT_NE(e.message().find("device 0 at slot 0"), std::string::npos) << e.what();
  }
}

TEST(BuildingBlock, TextBlockRoundTripsAndBecomesAValidSchedule) {
  const BuildingBlock blk = v_block(4, v_min_offsets(4), "v-min");
  const BuildingBlock back = parse_block(format_block(blk), blk.placement);
  EXPECT_EQ(format_block(back), format_block(blk));
  const Schedule s = block_to_schedule(back, 8);
  validate_schedule(s);
  EXPECT_EQ(evaluate(s, make_uniform_cost_table(s.placement, unit(1.0))).makespan -
                evaluate(block_to_schedule(blk, 8), make_uniform_cost_table(s.placement, unit(1.0)))
                    .makespan,
            0);
}

TEST(BuildingBlock, BadTokensAreReportedWithTheToken) {
  const Placement pl = linear_placement(2);
  EXPECT_THROW(parse_block("T=3; 0: X0@0", pl), ConfigError);
  EXPECT_THROW(parse_block("T=3; 0: F0", pl), ConfigError);
  EXPECT_THROW(parse_block("0: F0@0 B0@1 W0@2", pl), ConfigError);  // no period
  EXPECT_THROW(parse_block("T=3; 0: F1@0", pl), ConfigError);       // stage 1 is on device 1
}

// A V placement's cost table with F, B, W of 1..4 and hops of 0..2, W holding `mw` of an
// activation.
CostTable random_v_costs(std::mt19937& rng, int p, double mw) {
  auto draw = [&](int n) { return static_cast<TimePs>(rng() % static_cast<unsigned>(n)); };
  UniformCosts c{1 + draw(4), 1 + draw(4), 1 + draw(4), 0, draw(3)};
  c.mw_over_mb = mw;
  return make_uniform_cost_table(v_placement(p), c);
}

// The squeeze jumps over its steady state (once each pass's inputs repeat or can no longer
// bind); long repetitions (m = 100) at every p up to 16 and unequal costs with hops exercise it.
// One workspace for all, as the adaptive search keeps one per thread: the squeeze does not clear
// its table of end times, so a cell read before it is written would show a previous call's time.
TEST(BuildingBlock, FastSqueezeEqualsTheEvaluatorOnThePlainRepetition) {
  std::mt19937 rng(7);
  BlockWorkspace ws;
  for (int p : {2, 3, 5, 8, 12, 16}) {
    for (int m : {1, 3, 8, 40, 100}) {
      const CostTable costs = random_v_costs(rng, p, 0.25);
      for (const VOffsets& o : {v_min_offsets(p), v_half_offsets(p), v_zb_offsets(p)}) {
        const BuildingBlock blk = v_block(p, o, "v");
        const BlockSqueeze q = squeeze_block(blk, m, costs, ws);
        const EvalResult r = evaluate(block_to_schedule(blk, m, {false}), costs);
        EXPECT_EQ(q.makespan, r.makespan) << "p=" << p << " m=" << m;
        EXPECT_EQ(q.cost, r.cost);
        EXPECT_DOUBLE_EQ(q.peak_memory, max_peak(r));
      }
    }
  }
}

// Blocks of a linear placement whose chains take random gaps (so a pass may read a neighbour's
// pass several periods back) under random costs with hops of up to 40 passes: the jump over the
// steady state must give the evaluator's figures where a dependency read from far back has not
// yet settled. One workspace for all trials (see above).
TEST(BuildingBlock, FastSqueezeEqualsTheEvaluatorOnRandomLinearBlocks) {
  std::mt19937 rng(5);
  auto draw = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int timed = 0;
  BlockWorkspace ws;
  for (int trial = 0; trial < 3000; ++trial) {
    const int p = 2 + draw(5), T = 3 + draw(6), m = 20 + draw(60);
    BuildingBlock blk;
    blk.name = "random";
    blk.placement = linear_placement(p);
    blk.period = T;
    blk.passes.assign(p, {});
    std::vector<int> f(p), b(p);
    f[0] = 0;
    for (int i = 1; i < p; ++i) f[i] = f[i - 1] + 1 + draw(2 * T);
    b[p - 1] = f[p - 1] + 1 + draw(2 * T);
    for (int i = p - 2; i >= 0; --i) b[i] = b[i + 1] + 1 + draw(2 * T);
    bool ok = true;
    for (int i = 0; i < p && ok; ++i) {
      const int w = b[i] + 1 + draw(T);
      ok = f[i] % T != b[i] % T && f[i] % T != w % T && b[i] % T != w % T;
      blk.passes[i] = {
          {ActionKind::kF, i, f[i], 1}, {ActionKind::kB, i, b[i], 1}, {ActionKind::kW, i, w, 1}};
    }
    if (!ok) continue;
    UniformCosts c{1 + draw(4), 1 + draw(4), 1 + draw(4), 0, draw(41)};
    c.mw_over_mb = 0.5;
    const CostTable costs = make_uniform_cost_table(blk.placement, c);
    const BlockSqueeze q = squeeze_block(blk, m, costs, ws);
    if (q.makespan < 0) continue;
    ++timed;
    const EvalResult r = evaluate(block_to_schedule(blk, m, {false}), costs);
    EXPECT_EQ(q.makespan, r.makespan) << format_block(blk) << " m=" << m;
    EXPECT_EQ(q.cost, r.cost) << format_block(blk) << " m=" << m;
    EXPECT_DOUBLE_EQ(q.peak_memory, max_peak(r));
  }
  EXPECT_GT(timed, 100);
}

// The squeeze is the as-soon-as-possible timeline of each device's order, and shifting all of a
// device's passes alike keeps its order: every shifted block the squeeze times (its passes still
// after the ones they depend on) gives the evaluator's figures of the unshifted block, and a
// shift that puts a pass before its dependency is refused (squeeze_block_applies false, makespan
// -1). v-adaptive squeezes one block of each such class.
TEST(BuildingBlock, ShiftingAllOfADevicesPassesAlikeSqueezesAlike) {
  std::mt19937 rng(11);
  int timed = 0, refused = 0;
  for (int p : {3, 5, 8}) {
    for (int m : {3, 40}) {
      const CostTable costs = random_v_costs(rng, p, 0.5);
      for (const VOffsets& o : {v_min_offsets(p), v_half_offsets(p)}) {
        const BuildingBlock blk = v_block(p, o, "v");
        const EvalResult r = evaluate(block_to_schedule(blk, m, {false}), costs);
        for (int d = 0; d < p; ++d)
          for (int shift = 1; shift <= 13; shift += 3) {
            BuildingBlock moved = blk;
            for (BlockPass& x : moved.passes[d]) x.offset += shift;
            BlockWorkspace ws;
            const BlockSqueeze q = squeeze_block(moved, m, costs, ws);
            if (!squeeze_block_applies(moved, ws)) {
              ++refused;
              EXPECT_EQ(q.makespan, -1);
              continue;
            }
            ++timed;
            EXPECT_EQ(q.makespan, r.makespan) << "p=" << p << " m=" << m << " device " << d;
            EXPECT_EQ(q.cost, r.cost);
            EXPECT_DOUBLE_EQ(q.peak_memory, max_peak(r));
          }
      }
    }
  }
  EXPECT_GT(timed, 0);
  EXPECT_GT(refused, 0);
}

TEST(BuildingBlock, GapFillingNeverRaisesAPeak) {
  for (int p : {2, 4, 6}) {
    const CostTable costs = make_uniform_cost_table(v_placement(p), unit(1.0));
    const Schedule plain = block_to_schedule(v_block(p, v_half_offsets(p), "v"), 3 * p);
    Schedule filled = plain;
    squeeze_fill_w(filled, costs);
    validate_schedule(filled);
    const EvalResult a = evaluate(plain, costs);
    const EvalResult b = evaluate(filled, costs);
    for (int d = 0; d < p; ++d) EXPECT_LE(b.device[d].peak_memory, a.device[d].peak_memory);
  }
}

}  // namespace
}  // namespace pw
