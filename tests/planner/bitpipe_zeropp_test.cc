// BitPipe's time-expanded order (hand-derived makespan, margin over 1F1B) and ZeroPP's
// per-microbatch-block weight gathering (gather counts, placement, makespan/memory direction).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/validator.h"
#include "planner/schedules/bitpipe.h"
#include "planner/schedules/generator.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

GeneratorParams params(int p, int m, UniformCosts c = {1, 1, 1, 0, 0}) {
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  gp.costs = c;
  return gp;
}

double max_peak(const EvalResult& r) {
  double pk = 0;
  for (const DeviceStats& d : r.device) pk = std::max(pk, d.peak_memory);
  return pk;
}

Action f(int s, int j) { return Action{ActionKind::kF, static_cast<std::int16_t>(s), j}; }
Action bw(int s, int j) { return Action{ActionKind::kBW, static_cast<std::int16_t>(s), j}; }

// Hand derivation, p=4, m=4, F=B=W=1 per chunk pass (full backward BW = 2 slots). Down stages
// 0..7 run on devices 0 1 2 3 3 2 1 0, up stages 8..15 on 3 2 1 0 0 1 2 3; microbatches 0, 1 go
// down (D0, D1), 2, 3 go up (U0, U1); they are laid in the order D0 U0 D1 U1, each pass at the
// earliest free slot after its prerequisite.
// D0: F at t=0..7 on devices 0 1 2 3 3 2 1 0; BW at 8, 10, 12, 14, 16, 18, 20, 22 (ends 24).
// U0 is D0 mirrored (device d <-> 3-d): forwards at 0 (dev3) 1 (dev2) 2 (dev1) 3, 4 (dev0)
//   5 (dev1) 6 (dev2) 7 (dev3): no slot collides with D0. BW mirrored: dev0 runs U0's at 14, 16.
// D1: F dev0 t1, dev1 t3 (t2 holds U0), dev2 t4, dev3 t5, t6, dev2 t7, dev1 t8, dev0 t10 (8-9 is
//   D0's BW); BW dev0 11-13, dev1 14-16 (12-13 is U0's), dev2 16-18, dev3 18-20, 20-22,
//   dev2 22-24, dev1 24-26, dev0 26-28.
// U1 = D1 mirrored; it collides with nothing already laid (dev0: F 5, 6; BW 18-20, 20-22).
// Device 0: F D0 t0, D1 t1, idle t2, U0 t3 t4, U1 t5 t6, D0 t7, BW D0 8-10, F D1 10, BW D1 11-13,
// idle 13, BW U0 14-16 16-18, U1 18-20 20-22, D0 22-24, idle 24-26, BW D1 26-28: makespan 28
// (busy 8 + 16 = 24 per device, bubble 4). Lower bound: device 1 idles at least 1 slot before its
// first forward and 2 after its last backward (chunk 1's BW still runs on device 0, or the up
// pipeline's chunks 1, 0 on devices 2, 3), so no order beats 24 + 3 = 27.
TEST(BitPipe, TimeExpandedOrderMatchesTheHandDerivationForFourDevicesAndFourMicrobatches) {
  const Placement pl = bitpipe_placement(4, 0);
  const CostTable c = make_uniform_cost_table(pl, UniformCosts{1, 1, 1, 0, 0});
  const Schedule s = bitpipe_time_expanded(pl, 4, c, 0);
  ASSERT_EQ(check_schedule(s), "");
  const std::vector<Action> dev0 = {f(0, 0),   f(0, 1),   f(11, 2), f(12, 2), f(11, 3),  f(12, 3),
                                    f(7, 0),   bw(7, 0),  f(7, 1),  bw(7, 1), bw(12, 2), bw(11, 2),
                                    bw(12, 3), bw(11, 3), bw(0, 0), bw(0, 1)};
  EXPECT_EQ(s.actions[0], dev0);
  const EvalResult r = evaluate(s, c);
  EXPECT_EQ(r.makespan, 28);
  for (const DeviceStats& d : r.device) EXPECT_EQ(d.busy, 24);

  // The generator keeps the best of its candidates: never worse than the derivation, never
  // below the lower bound.
  const Schedule g = generate_schedule(default_registry(), "bitpipe", params(4, 4));
  const TimePs gm = evaluate(g, c).makespan;
  EXPECT_LE(gm, 28);
  EXPECT_GE(gm, 27);
}

// 1F1B on the same model: a 1F1B stage is two chunks, so F = B = W = 2 per stage and
// makespan (m + p - 1)(F + B + W) = (4 + 3) * 6 = 42 for p=4, m=4: bubble (p-1)*6 = 18 slots.
// BitPipe's derived bubble is 28 - 24 = 4: it must beat 1F1B by at least 18 - 4 = 14 slots.
TEST(BitPipe, BeatsOneFOneBBubbleByTheDerivedMargin) {
  const Schedule one = generate_schedule(default_registry(), "1f1b", params(4, 4, {2, 2, 2, 0, 0}));
  const TimePs t_1f1b =
      evaluate(one, make_uniform_cost_table(one.placement, UniformCosts{2, 2, 2, 0, 0})).makespan;
  EXPECT_EQ(t_1f1b, (4 + 4 - 1) * 6);
  const Schedule bp = generate_schedule(default_registry(), "bitpipe", params(4, 4));
  const TimePs t_bp =
      evaluate(bp, make_uniform_cost_table(bp.placement, UniformCosts{1, 1, 1, 0, 0})).makespan;
  EXPECT_LE(t_bp, t_1f1b - 14);
}

// At every m = p, 2p, 4p for p = 4, 8 BitPipe is shorter than 1F1B, whose makespan is
// (m + p - 1) * 6 chunk slots, and stays within interleaved 1F1B's activation peak p + (p-1)/2.
TEST(BitPipe, ShorterThanOneFOneBForPAndMSweep) {
  for (int p : {4, 8}) {
    for (int k : {1, 2, 4}) {
      const int m = k * p;
      const Schedule s = generate_schedule(default_registry(), "bitpipe", params(p, m));
      const EvalResult r =
          evaluate(s, make_uniform_cost_table(s.placement, UniformCosts{1, 1, 1, 0, 0}));
      EXPECT_LT(r.makespan, (m + p - 1) * 6) << "p=" << p << " m=" << m;
      EXPECT_LE(max_peak(r), bitpipe_default_memory(p) + 1e-9) << "p=" << p << " m=" << m;
    }
  }
}

TEST(BitPipe, TooSmallAMemoryLimitNamesTheSmallestCandidatePeak) {
  GeneratorParams gp = params(4, 8);
  gp.memory_limit = 0.5;
  try {
    generate_schedule(default_registry(), "bitpipe", gp);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("smallest peak"), std::string::npos) << e.what();
  }
}

int count(const Schedule& s, ActionKind k, int stage) {
  int n = 0;
  for (const auto& dev : s.actions)
    for (const Action& a : dev) n += a.kind == k && a.stage == stage;
  return n;
}

// group = microbatches per weight-gather block: ceil(m / group) UNSHARD and RESHARD per stage,
// one REDUCE_GRAD per stage, and every pass of a stage between an UNSHARD and its RESHARD
// belongs to that block (microbatches first .. first + group - 1).
TEST(ZeroPP, GathersEachLayerBlockOncePerMicrobatchBlock) {
  const int p = 4, m = 8;
  for (int group : {0, 8, 5, 3, 2, 1}) {
    GeneratorParams gp = params(p, m);
    gp.group_size = group;
    const Schedule s = generate_schedule(default_registry(), "zeropp", gp);  // validates
    EXPECT_EQ(check_schedule(s), "");
    const int g = group > 0 ? group : m;
    const int blocks = (m + g - 1) / g;
    for (int st = 0; st < s.placement.num_stages(); ++st) {
      EXPECT_EQ(count(s, ActionKind::kUnshard, st), blocks) << "group " << group;
      EXPECT_EQ(count(s, ActionKind::kReshard, st), blocks) << "group " << group;
      EXPECT_EQ(count(s, ActionKind::kReduceGrad, st), 1) << "group " << group;
    }
    for (const auto& dev : s.actions) {
      std::vector<int> open(s.placement.num_stages(), -1);
      for (const Action& a : dev) {
        if (a.kind == ActionKind::kUnshard) {
          EXPECT_EQ(open[a.stage], -1);
          open[a.stage] = a.microbatch;
        } else if (a.kind == ActionKind::kReshard) {
          EXPECT_EQ(open[a.stage], a.microbatch);
          open[a.stage] = -1;
        } else if (is_compute(a.kind)) {
          ASSERT_GE(open[a.stage], 0) << "pass outside a gathered window";
          EXPECT_GE(a.microbatch, open[a.stage]);
          EXPECT_LT(a.microbatch, open[a.stage] + g);
        }
      }
    }
  }
}

// With a gather that costs 1 slot and holds a weight copy of 0.5 until its RESHARD: a smaller
// microbatch block means more gathers and one pipeline fill/drain per block (makespan does not
// fall), and fewer activations in flight (at most `group` microbatches; 1F1B holds up to p = 4)
// while the copies held at a time stay v per device, so the peak of activations plus copies
// does not rise. group 8 -> 1 must change both strictly.
TEST(ZeroPP, SmallerBlocksTradeMakespanForMemory) {
  const int p = 4, m = 8;
  TimePs prev_time = 0;
  double prev_peak = 1e9;
  TimePs first_time = 0, last_time = 0;
  double first_peak = 0, last_peak = 0;
  for (int group : {8, 4, 2, 1}) {
    GeneratorParams gp = params(p, m);
    gp.group_size = group;
    const Schedule s = generate_schedule(default_registry(), "zeropp", gp);
    CostTable c = make_uniform_cost_table(s.placement, gp.costs);
    for (int st = 0; st < c.num_stages; ++st) {
      c.time(st, ActionKind::kUnshard) = 1;
      c.mem(st, ActionKind::kUnshard) = 0.5;
      c.mem(st, ActionKind::kReshard) = -0.5;
    }
    const EvalResult r = evaluate(s, c);
    const double pk = max_peak(r);
    // The gathered copies alone: a block's windows nest (F in stage order, B and W in reverse),
    // so every device holds its v = 2 layer blocks' copies at once at the turn, at any group.
    CostTable weights_only = c;
    for (int st = 0; st < c.num_stages; ++st)
      for (ActionKind k : {ActionKind::kF, ActionKind::kB, ActionKind::kW, ActionKind::kBW})
        weights_only.mem(st, k) = 0;
    EXPECT_DOUBLE_EQ(max_peak(evaluate(s, weights_only)), 2 * 0.5) << "group " << group;
    EXPECT_GE(r.makespan, prev_time) << "group " << group;
    EXPECT_LE(pk, prev_peak + 1e-9) << "group " << group;
    prev_time = r.makespan;
    prev_peak = pk;
    if (group == 8) first_time = r.makespan, first_peak = pk;
    last_time = r.makespan, last_peak = pk;
  }
  EXPECT_GT(last_time, first_time);
  EXPECT_LT(last_peak, first_peak);
}

}  // namespace
}  // namespace pw
