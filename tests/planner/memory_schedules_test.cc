// Memory-controllable and zero-bubble schedules. Expected values come from
// shared/reference/schedules.md (published figures) or from hand derivations written next to the
// test. Units: with UniformCosts{1,1,1} one chunk pass is one slot; the evaluator counts a V
// chunk's activation as 0.5 of a 1F1B stage, so "chunk activations" = 2 * peak_memory.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <random>
#include <string>

#include "core/error.h"
#include "core/pytorch_csv.h"
#include "core/validator.h"
#include "planner/schedules/adaptive.h"
#include "planner/schedules/bitpipe.h"
#include "planner/schedules/building_block.h"
#include "planner/schedules/generator.h"
#include "planner/schedules/v_grid.h"
#include "planner/schedules/v_schedules.h"
#include "planner/schedules/zb_auto.h"
#include "sim/evaluator.h"
#include "unit_costs.h"

namespace pw {
namespace {

using testing::max_peak;
using testing::params;
using testing::unit;

EvalResult run(const std::string& name, const GeneratorParams& gp, bool recompute = false) {
  Schedule s = generate_schedule(default_registry(), name, gp);
  return evaluate(s, make_uniform_cost_table(s.placement, gp.costs, recompute));
}

TEST(VMin, PeakIsTwiceFloorPPlus4Over3ChunkActivationsForEveryP) {
  for (int p = 2; p <= 16; ++p) {
    const EvalResult r = run("v-min", params(p, 3 * p, 1.0));
    EXPECT_DOUBLE_EQ(2 * max_peak(r), 2 * ((p + 4) / 3)) << "p=" << p;
  }
}

TEST(VHalf, PeakIsTwiceFloorPPlus2Over2ChunkActivationsForEveryP) {
  for (int p = 2; p <= 16; ++p) {
    const EvalResult r = run("v-half", params(p, 3 * p, 1.0));
    EXPECT_DOUBLE_EQ(2 * max_peak(r), 2 * ((p + 2) / 2)) << "p=" << p;
  }
}

TEST(VMin, LifespanBoundHoldsAndMatchesTheHandDerivedBlock) {
  // p=4, x=0: device 0 has F0@0, f7@7, B7@8, b0@15; W7 goes to the first free slot after 9
  // (slot 9 = 3 mod 6 is b's) -> 10; w0 after 16 (4 mod 6 now W's) -> 17. Lifespans to the end of
  // B: stage 0 = 16 slots -> ceil(16/6) = 3 copies * 0.5; stage 7 = 2 slots -> 1 copy * 0.5.
  const BuildingBlock blk = v_block(4, v_min_offsets(4), "v-min");
  const std::vector<StageLifespan> ls = block_lifespans(blk);
  EXPECT_EQ(ls[0].lifespan, 16);
  EXPECT_EQ(ls[0].microbatches, 3);
  EXPECT_EQ(ls[7].lifespan, 2);
  EXPECT_EQ(ls[7].microbatches, 1);
  EXPECT_DOUBLE_EQ(block_memory_bound(blk)[0], 2.0);
  // The simulated peak never exceeds the bound (W-inclusive bound when W holds memory).
  for (int p = 2; p <= 12; ++p) {
    for (const VOffsets& o : {v_min_offsets(p), v_half_offsets(p)}) {
      const BuildingBlock b = v_block(p, o, "v");
      Schedule s = block_to_schedule(b, 4 * p);
      const EvalResult r = evaluate(s, make_uniform_cost_table(s.placement, unit(1.0)));
      const std::vector<double> bound = block_memory_bound(b, /*include_w=*/true);
      for (int d = 0; d < p; ++d) EXPECT_LE(r.device[d].peak_memory, bound[d] + 1e-9);
    }
  }
}

TEST(VMin, BubblesReachOrBeatThePublishedFigures) {
  // Published V-Min bubbles (makespan - 6m, F = B = W = 1, no communication, W holding nothing;
  // schedules.md): p = 2, 4, 6, 8 -> 3, 11, 17, 27, at peaks 2*((p+4)//3) = 4, 4, 6, 8 chunk
  // activations. Lower bound for any V schedule: device p-1 cannot start before slot p-1 (the
  // first forward's chain) and runs 6m passes, so makespan - 6m >= p - 1. Measured (not
  // asserted): 3, 7, 14, 27, i.e. SHORTER than published at p = 4 and 6, because the reordering
  // lets the devices whose plain repetition peaks below the block's peak (p=4: device 2 at 3
  // chunks; p=6: devices 1 and 4 at 5) run warm-up forwards early up to the block's peak.
  const int ps[] = {2, 4, 6, 8};
  const int published[] = {3, 11, 17, 27};
  for (int i = 0; i < 4; ++i) {
    for (int m : {16, 24}) {
      const EvalResult r = run("v-min", params(ps[i], m, 0.0));
      EXPECT_LE(r.makespan - 6 * m, published[i]) << "p=" << ps[i] << " m=" << m;
      EXPECT_GE(r.makespan - 6 * m, ps[i] - 1);
      EXPECT_LE(2 * max_peak(r), 2 * ((ps[i] + 4) / 3) + 1e-9);
    }
  }
}

TEST(VMin, P4MakespansAre59_83_107) {
  // Published (schedules.md): p=4 makespans 59, 83, 107 for m = 8, 12, 16 (bubble 11), with a
  // chunk's activation held until its W (mw = 1), where every device of the plain repetition
  // already peaks at the block's 4 chunk activations. (With mw = 0, device 2 of the plain
  // repetition peaks at 3 and the reordering may use its 4th: 55, 79, 103; see the test above.)
  const int ms[] = {8, 12, 16};
  const int published[] = {59, 83, 107};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run("v-min", params(4, ms[i], 1.0)).makespan, published[i]);
}

TEST(VHalf, BubblesReachOrBeatThePublishedFigures) {
  // Published V-Half bubbles (makespan - 6m, as above): p = 2, 4, 6, 8 -> 1, 5, 11, 17, at peaks
  // 2*((p+2)//2) chunk activations. p = 2 is exact: the lower bound p - 1 = 1 (see the V-Min
  // test) equals the published figure. Measured (not asserted beyond <= published): 1, 5, 9, 13,
  // i.e. SHORTER than published at p = 6 and 8 (memory-capped list schedules that keep room
  // for chunk-1 forwards; zero-bubble costs 0, 2, 5, 9).
  const int ps[] = {2, 4, 6, 8};
  const int published[] = {1, 5, 11, 17};
  for (int i = 0; i < 4; ++i) {
    for (int m : {16, 24}) {
      const EvalResult r = run("v-half", params(ps[i], m, 0.0));
      EXPECT_LE(r.makespan - 6 * m, published[i]) << "p=" << ps[i] << " m=" << m;
      EXPECT_GE(r.makespan - 6 * m, ps[i] - 1);
      EXPECT_LE(2 * max_peak(r), 2 * ((ps[i] + 2) / 2) + 1e-9);
    }
  }
  EXPECT_EQ(run("v-half", params(2, 16, 0.0)).makespan, 6 * 16 + 1);
}

TEST(VMinVHalf, UnderTheAuthorsMemoryRuleThePublishedBubblesAtThePublishedPeaks) {
  // The published bubbles (reference/schedules.md) come from the authors' scheduler, whose
  // memory rule holds a chunk's activation until its W (mw = 1): V-Min p = 2, 4, 6, 8 -> 3, 11,
  // 17, 27 at peaks 2*((p+4)//3) = 4, 4, 6, 8 chunk activations; V-Half -> 1, 5, 11, 17 at
  // 2*((p+2)//2) = 4, 6, 8, 10. Under that rule every device of the plain repetition already
  // peaks at the block's peak, so no device may go above it. Equal or shorter at every p, and
  // for every m (with equal costs the bubble does not depend on m). The reordering alone
  // (block_reorder.h) gave 19 at V-Min p = 6 and V-Half p = 8; the generators now also run the
  // authors' method on the same block (v_grid.h) and keep it where it is shorter.
  struct Row {
    const char* name;
    int published_bubble[4];
    int peak[4];  // chunk activations
  };
  const Row rows[] = {{"v-min", {3, 11, 17, 27}, {4, 4, 6, 8}},
                      {"v-half", {1, 5, 11, 17}, {4, 6, 8, 10}}};
  const int ps[] = {2, 4, 6, 8};
  for (const Row& row : rows)
    for (int i = 0; i < 4; ++i)
      for (int m : {16, 24}) {
        const EvalResult r = run(row.name, params(ps[i], m, 1.0));
        EXPECT_LE(r.makespan - 6 * m, row.published_bubble[i])
            << row.name << " p=" << ps[i] << " m=" << m;
        EXPECT_GE(r.makespan - 6 * m, ps[i] - 1);  // device p-1 starts at slot p-1 at best
        for (const DeviceStats& d : r.device)
          EXPECT_LE(2 * d.peak_memory, row.peak[i] + 1e-9) << row.name << " p=" << ps[i];
      }
}

TEST(VGrid, PatternOfAVBlockIsItsSlotsModSix) {
  // V-Min at p = 4 (x = 0): F at i, f at 2p-1-i, B at 2p+i, b at 4p-1-i; mod 6 on device 1:
  // F 1, f 6 -> 0, B 9 -> 3, b 14 -> 2, and W, w where the block put them.
  const BuildingBlock blk = v_block(4, v_min_offsets(4), "v-min");
  const VGridPattern pat = v_grid_pattern(blk);
  ASSERT_EQ(pat.size(), 4u);
  EXPECT_EQ(pat[1][0], 1);
  EXPECT_EQ(pat[1][1], 0);
  EXPECT_EQ(pat[1][2], 3);
  EXPECT_EQ(pat[1][3], 2);
  for (const BlockPass& x : blk.passes[1])
    if (x.kind == ActionKind::kW) {
      EXPECT_EQ(pat[1][x.stage == 1 ? 5 : 4], x.offset % 6);
    }
  // Not a one-slot, period-6 V block: no pattern.
  BuildingBlock other = blk;
  other.period = 7;
  EXPECT_TRUE(v_grid_pattern(other).empty());
}

TEST(VZb, ZeroBubbleAtOneF1BMemory) {
  // Zero bubble in the zero-bubble convention (every device busy from its first pass to its
  // last: cost = 6m) with peak 2p chunk activations; W holds nothing (mw = 0).
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 4 * p}) {
      const EvalResult r = run("v-zb", params(p, m, 0.0));
      EXPECT_EQ(r.cost, 6 * m) << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(r.bubble_rate, 0.0);
      EXPECT_LE(2 * max_peak(r), 2 * p + 1e-9);
    }
  }
}

TEST(VZb, ZeroBubbleAtOneF1BMemoryUnderTheAuthorsMemoryRule) {
  // reference/schedules.md: "V-ZB: zero bubble, peak 2p on every device", under the authors'
  // rule (a chunk's activation held until its W, mw = 1). Zero bubble in the zero-bubble
  // convention: every device busy from its first pass to its last, cost = 6m slots (m
  // microbatches x 6 one-slot passes per device). The tight V-ZB block reordered under 2p
  // chunk activations was one slot over at p = 5 and 5 over at p = 16, m = 32; the authors'
  // method on their V-ZB block (v_zb_grid_offsets) is not.
  for (int p = 2; p <= 16; ++p) {
    for (int m : {2 * p, 3 * p, 4 * p + 1}) {
      const EvalResult r = run("v-zb", params(p, m, 1.0));
      EXPECT_EQ(r.cost, 6 * m) << "p=" << p << " m=" << m;
      for (const DeviceStats& d : r.device)
        EXPECT_LE(2 * d.peak_memory, 2 * p + 1e-9) << "p=" << p << " m=" << m;
    }
  }
}

TEST(VZb, TheAuthorsBlockIsCollisionFree) {
  // F_0 = 0, F_i = 3i-2; f_i = 6p-7-3i; B_0 = 6p-4, B_i = 6p-6+3i; b_i = 12p-11-3i. At p = 4,
  // device 1: F 1, f 14, B 21, b 34 -> slots 1, 2, 3, 4 mod 6, leaving 5 and 0 to W and w.
  // p enters only as 6p and 12p, so mod 6 a device's slots depend on i alone: p <= 32 covers
  // every case.
  const VOffsets o = v_zb_grid_offsets(4);
  EXPECT_EQ(o.F, (std::vector<int>{0, 1, 4, 7}));
  EXPECT_EQ(o.f, (std::vector<int>{17, 14, 11, 8}));
  EXPECT_EQ(o.B, (std::vector<int>{20, 21, 24, 27}));
  EXPECT_EQ(o.b, (std::vector<int>{37, 34, 31, 28}));
  for (int p = 2; p <= 32; ++p)
    EXPECT_FALSE(v_grid_pattern(v_block(p, v_zb_grid_offsets(p), "x")).empty()) << p;
}

TEST(Adaptive, P4M8CurveMeetsOrBeatsThePublishedMakespans) {
  // Published: limits 4, 5, 6, 7, 8 chunk activations -> 59, 56, 53, 51, 48. Ours (cost, W
  // holding nothing) reaches 59 and 48 exactly and is SHORTER at 5, 6 and 7 (55, 52, 50): the
  // greedy V points of the curve beat the paper's block search there. Every returned schedule is
  // re-evaluated here and must fit its limit.
  const CostTable costs = make_uniform_cost_table(v_placement(4), unit(0.0));
  const TradeoffCurve curve = adaptive_tradeoff(4, 8, costs);
  const int published[] = {59, 56, 53, 51, 48};
  for (int limit = 4; limit <= 8; ++limit) {
    const TradeoffPoint& pt = pick_point(curve, limit / 2.0);
    const Schedule s = tradeoff_schedule(4, 8, pt, costs);
    validate_schedule(s);
    const EvalResult r = evaluate(s, costs);
    EXPECT_EQ(r.cost, pt.cost);
    EXPECT_LE(2 * max_peak(r), limit + 1e-9) << "limit " << limit;
    EXPECT_LE(r.cost, published[limit - 4]) << "limit " << limit;
  }
  EXPECT_EQ(pick_point(curve, 2.0).cost, 59);
  EXPECT_EQ(pick_point(curve, 4.0).cost, 48);
  // The curve is a Pareto front: memory up, cost strictly down.
  for (std::size_t i = 1; i < curve.points.size(); ++i) {
    EXPECT_GT(curve.points[i].peak_memory, curve.points[i - 1].peak_memory);
    EXPECT_LT(curve.points[i].cost, curve.points[i - 1].cost);
  }
}

TEST(Adaptive, GeneratorUnderThePapersMemoryRuleMeetsThePublishedCurve) {
  // The published adaptive V curve (p=4, m=8, limits 4..8 chunk activations -> 59, 56, 53, 51,
  // 48) counts a chunk's activation until its W: mw_over_mb = 1 here. generate_v_adaptive
  // takes the curve's pick (blocks through our squeeze and through the authors' own reordering,
  // planner/schedules/v_grid.h), the cheapest block points that fit the limit reordered with
  // the limit as every device's cap, and the V-ZB block. Asserted like with like: never above
  // the published figure, never above the curve's own point, always within the limit. (Limit 5
  // was 58 until the authors' reordering joined the search on 2026-11-27.)
  const CostTable costs = make_uniform_cost_table(v_placement(4), unit(1.0));
  const TradeoffCurve curve = adaptive_tradeoff(4, 8, costs);
  const int published[] = {59, 56, 53, 51, 48};
  for (int limit = 4; limit <= 8; ++limit) {
    GeneratorParams gp = params(4, 8, 1.0);
    gp.memory_limit = limit / 2.0;
    const EvalResult r = run("v-adaptive", gp);
    EXPECT_LE(r.cost, published[limit - 4]) << "limit " << limit;
    EXPECT_LE(r.cost, pick_point(curve, limit / 2.0).cost) << "limit " << limit;
    EXPECT_LE(2 * max_peak(r), limit + 1e-9) << "limit " << limit;
  }
  // With W holding nothing (the activation freed at B, a looser rule than the paper's) every
  // limit is at or below the published figure, and limit 4 (V-Min's peak) strictly below 59.
  for (int limit = 4; limit <= 8; ++limit) {
    GeneratorParams gp = params(4, 8, 0.0);
    gp.memory_limit = limit / 2.0;
    const EvalResult r = run("v-adaptive", gp);
    EXPECT_LE(r.cost, published[limit - 4]) << "limit " << limit;
    EXPECT_LE(2 * max_peak(r), limit + 1e-9) << "limit " << limit;
    if (limit == 4) {
      EXPECT_LT(r.cost, 59);
    }
  }
}

TEST(Adaptive, NeverCostlierThanVzbUnderTheSameLimit) {
  // v-adaptive searches V blocks and reorders the V-ZB block too, so no V generator that fits
  // the same limit may beat it: both memory rules, limits from p to 2p chunk activations.
  for (const int p : {2, 3, 4, 6, 8})
    for (const double mw : {0.0, 1.0})
      for (const int limit : {p, (3 * p + 1) / 2, 2 * p}) {
        GeneratorParams gp = params(p, 2 * p, mw);
        gp.memory_limit = limit / 2.0;
        const EvalResult vzb = run("v-zb", gp);
        if (2 * max_peak(vzb) > limit + 1e-9) continue;  // v-zb does not fit: nothing to beat
        const EvalResult ada = run("v-adaptive", gp);
        EXPECT_LE(ada.cost, vzb.cost) << "p=" << p << " mw=" << mw << " limit " << limit;
        EXPECT_LE(2 * max_peak(ada), limit + 1e-9) << "p=" << p << " limit " << limit;
      }
}

TEST(GeneratorMemo, SharedWorkGivesTheSameSchedulesAsFreshGeneration) {
  // The search passes one memo to every generator call; a generator must answer exactly as
  // without it. Asked in an order that makes the memo matter: v-adaptive at several limits (one
  // trade-off curve), zb-v then v-zb at the same limit (v-zb's greedy candidate is zb-v's answer).
  GeneratorMemo memo;
  const GeneratorRegistry reg = default_registry();
  for (double limit : {2.5, 3.0, 4.0, 2.5}) {
    for (const char* name : {"v-adaptive", "zb-v", "v-zb"}) {
      GeneratorParams gp = params(4, 12, 0.5);
      gp.memory_limit = limit;
      const Schedule fresh = generate_schedule(reg, name, gp);
      gp.memo = &memo;
      const Schedule shared = generate_schedule(reg, name, gp);
      EXPECT_EQ(shared.actions, fresh.actions) << name << " at limit " << limit;
      EXPECT_EQ(shared.name, fresh.name);
    }
  }
  // One curve for the three distinct limits; one zb-v and one v-zb answer per limit (v-adaptive
  // asks v-zb's, whose greedy candidate is zb-v's): 1 + 3 + 3.
  EXPECT_EQ(memo.size(), 7u);
}

TEST(Adaptive, LimitBelowEveryScheduleNamesTheSmallestFeasibleLimit) {
  // On the V placement device 0 runs microbatch j's forward of stage 2p-1 before the backward
  // of its stage 0, so it holds two chunk activations at once whatever the order: 1.0 units
  // (one 1F1B stage's microbatch) is the least any V schedule fits. V-Min's block needs 2.0;
  // below that the greedy ZB-V (v-zb's fallback) still fits 1.0, and v-adaptive takes it.
  GeneratorParams gp = params(4, 8, 1.0);
  gp.memory_limit = 1.0;
  EXPECT_LE(max_peak(run("v-adaptive", gp)), 1.0 + 1e-9);
  gp.memory_limit = 0.5;  // one chunk activation: nothing fits
  try {
    generate_schedule(default_registry(), "v-adaptive", gp);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--memory-limit");
    EXPECT_NE(std::string(e.what()).find("smallest feasible limit is about 1.000"),
              std::string::npos)
        << e.what();
  }
}

struct ZbRow {
  int p, m;
  double f, b, w, comm, mw_over_mb, published;
};

// A profiled row as generator inputs (ms to ps; W keeps mw_over_mb of F's activation).
GeneratorParams row_params(const ZbRow& row) {
  GeneratorParams gp;
  gp.p = row.p;
  gp.m = row.m;
  gp.costs = UniformCosts{millis_to_ps(row.f), millis_to_ps(row.b), millis_to_ps(row.w), 0,
                          millis_to_ps(row.comm)};
  gp.costs.mw_over_mb = row.mw_over_mb;
  return gp;
}

TEST(Zb1p, BubbleRatesMatchTheZeroBubblePaper) {
  // Profiled times (ms) and published ZB-1p bubble rates from schedules.md. M_W/M_B =
  // 32h / (34h + 5as) with s = 1024: 1.5B (h=2304, a=24) -> 0.3664; 28.3B (h=6144, a=48) ->
  // 0.4324 (model shapes from the zero-bubble paper's Table; the result is insensitive to the
  // ratio in 0.3..0.5, see docs). Tolerance: 5e-5 (4 decimals).
  const ZbRow rows[] = {{8, 24, 18.522, 18.086, 9.337, 0.601, 0.3664, 0.1585},
                        {8, 32, 18.513, 18.086, 9.331, 0.626, 0.3664, 0.1242},
                        {8, 64, 18.546, 18.097, 9.321, 0.762, 0.3664, 0.0674},
                        {32, 96, 10.419, 10.207, 7.715, 0.408, 0.4324, 0.1421}};
  for (const ZbRow& row : rows) {
    const GeneratorParams gp = row_params(row);
    const EvalResult r = run("zb-1p", gp);
    EXPECT_NEAR(r.bubble_rate, row.published, 5e-5) << "p=" << row.p << " m=" << row.m;
    EXPECT_LE(max_peak(r), row.p + 1e-9);  // limit p * M_B
  }
}

TEST(Zb2p, NearlyBubbleFreeWithTheZeroBubblePapersProfiledTimes) {
  // The zero-bubble paper reports ZB-2p (automatic schedule under 2p * M_B) nearly bubble-free
  // with its profiled times: under 0.05 on every row and under 0.01 on most. Convention: the
  // paper's bubble rate (cost - ideal) / cost, cost = the largest device span; M_W/M_B as for
  // ZB-1p above (6.2B and 14.6B: 0.4, inside the range where the result does not move). Held
  // here: every row under 0.05, every row but 1.5B m=24 under 0.01, memory within 2p.
  const ZbRow rows[] = {{8, 24, 18.522, 18.086, 9.337, 0.601, 0.3664, 0.05},
                        {8, 32, 18.513, 18.086, 9.331, 0.626, 0.3664, 0.01},
                        {8, 64, 18.546, 18.097, 9.321, 0.762, 0.3664, 0.01},
                        {8, 24, 29.718, 29.444, 19.927, 0.527, 0.4, 0.01},
                        {16, 48, 11.347, 11.248, 8.132, 0.377, 0.4, 0.01},
                        {32, 96, 10.419, 10.207, 7.715, 0.408, 0.4324, 0.01}};
  for (const ZbRow& row : rows) {
    const GeneratorParams gp = row_params(row);
    const EvalResult r = run("zb-2p", gp);
    EXPECT_LT(r.bubble_rate, row.published) << "p=" << row.p << " m=" << row.m;
    EXPECT_LE(max_peak(r), 2 * row.p + 1e-9);  // limit 2p * M_B
  }
}

TEST(Zb2p, UsesAtMostTwicePMbAndNoMoreBubbleThanZb1p) {
  for (int p : {2, 4, 8}) {
    const EvalResult one = run("zb-1p", params(p, 3 * p, 0.5));
    const EvalResult two = run("zb-2p", params(p, 3 * p, 0.5));
    EXPECT_LE(max_peak(two), 2 * p + 1e-9);
    EXPECT_LE(two.cost, one.cost);
  }
}

// ZB-H1 runs in 1F1B's memory and ZB-H2 in twice it, so the automatic schedules under those
// limits are never slower than them (the authors' exact pass starts from such a schedule). By
// hand at p = 8, m = 24, F 2.7, B 2.9, W 1.9, no transfer time: ZB-H1 takes
// m (F + B + W) + (p - 1)(F + B - W) = 180 + 25.9 = 205.9. With 0.022 per transfer the greedy
// alone costs 207.1 (largest device span) against ZB-H1's 206.5; over a grid of costs and
// transfer times ZB-1p costs at most ZB-H1 and ZB-2p at most ZB-H1 and ZB-H2, within limits.
TEST(ZbAuto, NeverSlowerThanTheHandcraftedScheduleItsMemoryAllows) {
  GeneratorParams hand = params(8, 24, 0.0);
  hand.costs = UniformCosts{millis_to_ps(2.7), millis_to_ps(2.9), millis_to_ps(1.9), 0, 0};
  EXPECT_EQ(run("zb-h1", hand).cost, millis_to_ps(205.9));
  EXPECT_LE(run("zb-1p", hand).cost, millis_to_ps(205.9));
  for (const int p : {4, 8})
    for (const double comm : {0.0, 0.022, 0.3})
      for (const double w : {0.6, 1.9, 3.0}) {
        GeneratorParams gp = params(p, 3 * p, 0.0);
        gp.costs = UniformCosts{millis_to_ps(2.7), millis_to_ps(2.9), millis_to_ps(w), 0,
                                millis_to_ps(comm)};
        const EvalResult h1 = run("zb-h1", gp), h2 = run("zb-h2", gp);
        const EvalResult one = run("zb-1p", gp), two = run("zb-2p", gp);
        const std::string at =
            "p=" + std::to_string(p) + " comm=" + std::to_string(comm) + " W=" + std::to_string(w);
        EXPECT_LE(one.cost, h1.cost) << at;
        EXPECT_LE(two.cost, std::min(h1.cost, h2.cost)) << at;
        EXPECT_LE(max_peak(one), p + 1e-9) << at;
        EXPECT_LE(max_peak(two), 2 * p + 1e-9) << at;
      }
}

TEST(ZbAuto, LimitBelowOneForwardNamesTheSmallestFeasibleLimit) {
  GeneratorParams gp = params(4, 8, 0.5);
  gp.memory_limit = 0.5;  // not even one microbatch's activation of a stage (1.0)
  try {
    generate_schedule(default_registry(), "zb-1p", gp);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--memory-limit");
    EXPECT_NE(std::string(e.what()).find("smallest feasible limit is about 1.0"), std::string::npos)
        << e.what();
  }
}

// The generators that try candidates in parallel (zero-bubble greedy variants, BitPipe's orders,
// the V offset search and its reorderings) keep them in a fixed order: one thread or many, the
// same schedule.
TEST(MemoryFamily, ParallelCandidatesGiveTheSameScheduleOnOneThread) {
  for (const char* name : {"v-adaptive", "bitpipe", "zeropp", "zb-2p", "v-zb", "v-half"}) {
    GeneratorParams gp = params(8, 16, 0.5);
    gp.costs = UniformCosts{4, 5, 3, 0, 1};
    gp.costs.mw_over_mb = 0.5;
    gp.v = std::string(name) == "zeropp" ? 2 : 0;
    gp.memory_limit = std::string(name) == "bitpipe" ? 0 : 6;
    const Schedule many = generate_schedule(default_registry(), name, gp);
    Schedule one;
    {
      tbb::global_control serial(tbb::global_control::max_allowed_parallelism, 1);
      one = generate_schedule(default_registry(), name, gp);
    }
    EXPECT_EQ(one.actions, many.actions) << name;
  }
}

TEST(DualPipeV, SteadyStateOverlapsAndNeedsTwoPMicrobatches) {
  Schedule s = generate_schedule(default_registry(), "dualpipev", params(4, 16, 0.0));
  int overlaps = 0;
  for (const auto& dev : s.actions)
    for (const Action& a : dev) overlaps += a.kind == ActionKind::kOverlapFB;
  // Per rank r: 2 overlaps in each of the m - 2p + r + 1 main-phase steps (rank p-1's first
  // step runs F and B apart: one fewer), plus p - r - 1 in the following phase. p=4, m=16:
  // r=0: 2*9 + 3 = 21; r=1: 2*10 + 2 = 22; r=2: 2*11 + 1 = 23; r=3: 2*12 - 1 + 0 = 23.
  EXPECT_EQ(overlaps, 21 + 22 + 23 + 23);
  EXPECT_THROW(generate_schedule(default_registry(), "dualpipev", params(4, 7, 0.0)), ConfigError);
}

TEST(BitPipe, PlacementMatchesThePublishedLayerTable) {
  GeneratorParams gp = params(4, 8, 0.0);
  gp.num_layers = 16;
  const Schedule s = generate_schedule(default_registry(), "bitpipe", gp);
  // dev0 [0,1][6,7][14,15][8,9]; dev1 [2,3][4,5][12,13][10,11]; dev2 [4,5][2,3][10,11][12,13];
  // dev3 [6,7][0,1][8,9][14,15] (the order of chunks within a device does not matter).
  const std::vector<std::vector<int>> expected = {
      {0, 6, 14, 8}, {2, 4, 12, 10}, {4, 2, 10, 12}, {6, 0, 8, 14}};
  for (int d = 0; d < 4; ++d) {
    std::vector<int> got;
    for (const StageInfo& st : s.placement.stages)
      if (st.device == d) got.push_back(st.layer_begin);
    std::vector<int> want = expected[d];
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "device " << d;
  }
  int pair_reduce = 0;
  for (const auto& dev : s.actions)
    for (const Action& a : dev) pair_reduce += a.kind == ActionKind::kPairReduce;
  EXPECT_EQ(pair_reduce, 16);  // 4 chunks on each of 4 devices
  EXPECT_THROW(generate_schedule(default_registry(), "bitpipe", params(4, 6, 0.0)), ConfigError);
}

TEST(OneFOneBR, RecomputesBeforeEveryBackwardAndHoldsOnlyInputs) {
  GeneratorParams gp = params(4, 8, 0.0);
  gp.costs.r = 1;
  gp.costs.recompute_keep = 0.1;
  const Schedule s = generate_schedule(default_registry(), "1f1b-r", gp);
  for (const auto& dev : s.actions)
    for (std::size_t i = 0; i < dev.size(); ++i)
      if (dev[i].kind == ActionKind::kBW) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(dev[i - 1].kind, ActionKind::kR);
        EXPECT_EQ(dev[i - 1].microbatch, dev[i].microbatch);
      }
  // Device 0 holds p = 4 inputs (0.1 each) plus one recomputed stage (0.9) at the peak.
  const EvalResult r =
      evaluate(s, make_uniform_cost_table(s.placement, gp.costs, /*with_recompute=*/true));
  EXPECT_NEAR(r.device[0].peak_memory, 4 * 0.1 + 0.9, 1e-9);
}

TEST(ZeroPP, GathersEachBlockOnceAndReducesItsGradients) {
  GeneratorParams gp = params(4, 8, 0.5);
  gp.v = 2;
  const Schedule s = generate_schedule(default_registry(), "zeropp", gp);
  int unshard = 0, reshard = 0, reduce = 0;
  for (const auto& dev : s.actions)
    for (const Action& a : dev) {
      unshard += a.kind == ActionKind::kUnshard;
      reshard += a.kind == ActionKind::kReshard;
      reduce += a.kind == ActionKind::kReduceGrad;
    }
  EXPECT_EQ(unshard, 8);  // p * v blocks
  EXPECT_EQ(reshard, 8);
  EXPECT_EQ(reduce, 8);
}

// Property: every generator that reads a memory limit keeps every device within it, for p = 2..16,
// m in {p, 2p, 3p, 4p}, random F/B/W/comm costs and W's share of the activation, and limits
// from 0.6p to 1.6p (1F1B-stage units). A generator may refuse a limit (ConfigError naming the
// smallest feasible one); most runs must produce a schedule, so the property is not vacuous
// (7 generators x 15 sizes x 4 batch counts = 420 runs; 389 ran when written).
TEST(MemoryFamily, EveryMemoryReadingGeneratorStaysWithinItsLimit) {
  const GeneratorRegistry reg = default_registry();
  std::mt19937 rng(20261124);
  int ran = 0, refused = 0;
  for (const GeneratorInfo& g : reg.all()) {
    if (!g.caps.memory_aware) continue;
    for (int p = 2; p <= 16; ++p) {
      if (g.caps.max_devices > 0 && p > g.caps.max_devices) continue;
      for (int k = 1; k <= 4; ++k) {
        const int m = k * p;
        auto draw = [&](int lo, int hi) {
          return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1));
        };
        GeneratorParams gp;
        gp.p = p;
        gp.m = m;
        constexpr TimePs kUnit = 1000;
        gp.costs = UniformCosts{kUnit * draw(5, 15) / 10, kUnit * draw(5, 20) / 10,
                                kUnit * draw(3, 12) / 10, 0, kUnit * draw(0, 3) / 10};
        gp.costs.mw_over_mb = draw(0, 4) / 8.0;
        gp.memory_limit = p * draw(6, 16) / 10.0;
        Schedule s;
        try {
          s = generate_schedule(reg, g.name, gp);
        } catch (const ConfigError& e) {
          ++refused;
          continue;
        }
        ++ran;
        const EvalResult r = evaluate(s, make_uniform_cost_table(s.placement, gp.costs));
        EXPECT_LE(max_peak(r), gp.memory_limit + 1e-9)
            << g.name << " p=" << p << " m=" << m << " limit " << gp.memory_limit;
      }
    }
  }
  EXPECT_GT(ran, 3 * refused) << ran << " ran, " << refused << " refused";
  EXPECT_GT(ran, 300) << ran << " ran, " << refused << " refused";
}

// Property: a generator that takes a limit per device (GeneratorCaps::per_device_limits, as the
// planner gives each device its own room) keeps every device within its own, for random caps
// between a third of 1F1B's and 1F1B's (1F1B-stage units), p = 2..8, m in {p, 2p, 4p}, random
// costs. A device given room for fewer microbatches than another may not borrow the other's.
TEST(MemoryFamily, PerDeviceLimitsHoldOnEveryDevice) {
  const GeneratorRegistry reg = default_registry();
  std::mt19937 rng(20261128);
  int ran = 0, refused = 0, used_own = 0;
  for (const GeneratorInfo& g : reg.all()) {
    if (!g.caps.per_device_limits) continue;
    EXPECT_TRUE(g.caps.memory_aware) << g.name;
    for (int p = 2; p <= 8; ++p) {
      for (int k : {1, 2, 4}) {
        auto draw = [&](int lo, int hi) {
          return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1));
        };
        GeneratorParams gp;
        gp.p = p;
        gp.m = k * p;
        constexpr TimePs kUnit = 1000;
        gp.costs = UniformCosts{kUnit * draw(5, 15) / 10, kUnit * draw(5, 20) / 10,
                                kUnit * draw(3, 12) / 10, 0, kUnit * draw(0, 3) / 10};
        gp.costs.mw_over_mb = draw(0, 4) / 8.0;
        for (int d = 0; d < p; ++d) gp.memory_caps.push_back(draw(2 * p, 6 * p) / 6.0);
        gp.memory_limit = *std::min_element(gp.memory_caps.begin(), gp.memory_caps.end());
        Schedule s;
        try {
          s = generate_schedule(reg, g.name, gp);
        } catch (const ConfigError&) {
          ++refused;
          continue;
        }
        ++ran;
        const EvalResult r = evaluate(s, make_uniform_cost_table(s.placement, gp.costs));
        bool above_smallest = false;  // some device used room only its own cap gives
        for (int d = 0; d < p; ++d) {
          EXPECT_LE(r.device[d].peak_memory, gp.memory_caps[d] + 1e-9)
              << g.name << " p=" << p << " m=" << gp.m << " device " << d;
          above_smallest |= r.device[d].peak_memory > gp.memory_limit + 1e-9;
        }
        used_own += above_smallest;
      }
    }
  }
  EXPECT_GT(ran, 40) << ran << " ran, " << refused << " refused";
  // The caps are used, not just their smallest (memory_limit): 62 of the 80 that ran when
  // written (4 refused: a cap below what one microbatch needs somewhere).
  EXPECT_GT(used_own, ran / 3) << used_own << " of " << ran;
}

TEST(MemoryFamily, EveryScheduleIsLegalOverASweepAndExportsWhereTheFormatAllows) {
  const char* names[] = {"v-min", "v-half",  "v-zb",      "v-adaptive", "zb-1p", "zb-2p",
                         "zb-v",  "bitpipe", "dualpipev", "zeropp",     "1f1b-r"};
  for (const char* name : names) {
    for (int p : {2, 3, 4, 6, 8}) {
      for (int m : {1, 2, 3, 4, 8, 12, 16, 24}) {
        const std::string n = name;
        if (n == "bitpipe" && (p % 2 != 0 || m % p != 0)) continue;
        if (n == "dualpipev" && m < 2 * p) continue;
        GeneratorParams gp = params(p, m, 0.5);
        Schedule s = generate_schedule(default_registry(), name, gp);  // validates
        EXPECT_EQ(check_schedule(s), "") << name << " p=" << p << " m=" << m;
        // PyTorch's CSV holds one pipeline and has no PAIR_REDUCE token.
        if (n == "bitpipe") {
          EXPECT_THROW(schedule_to_pytorch_csv(s, CsvForm::kComputeOnly), ConfigError);
          continue;
        }
        // compute_only holds the compute actions alone (R is PyTorch's activation
        // checkpointing; UNSHARD/RESHARD and REDUCE_GRAD are PyTorch's to insert): the CSV
        // reads back with every F, B, W, full backward and overlapped pair of the schedule.
        const auto compute = [](const Schedule& x) {
          std::size_t n = 0;
          for (const auto& dev : x.actions)
            for (const Action& a : dev)
              n += a.kind == ActionKind::kF || a.kind == ActionKind::kB ||
                   a.kind == ActionKind::kW || a.kind == ActionKind::kBW ||
                   a.kind == ActionKind::kOverlapFB;
          return n;
        };
        const std::string csv = schedule_to_pytorch_csv(s, CsvForm::kComputeOnly);
        const Schedule back = schedule_from_pytorch_csv(csv, name, {});
        EXPECT_EQ(back.total_actions(), compute(s)) << name << " p=" << p << " m=" << m;
        EXPECT_EQ(compute(back), compute(s)) << name << " p=" << p << " m=" << m;
      }
    }
  }
}

}  // namespace
}  // namespace pw
