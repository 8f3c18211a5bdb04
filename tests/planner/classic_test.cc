// Expected values come from the closed forms in shared/reference/schedules.md.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "core/error.h"
#include "planner/schedules/generator.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

Schedule make(const std::string& name, int p, int m, int v = 0, int g = 0) {
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  gp.v = v;
  gp.group_size = g;
  return generate_schedule(default_registry(), name, gp);
}

EvalResult run(const Schedule& s, UniformCosts c) {
  return evaluate(s, make_uniform_cost_table(s.placement, c));
}

// Warm-up forwards of a device: the forwards before its first backward, less the first
// steady-state forward (1F1B order: warm-up, then F before B in each steady step). When every
// forward is warm-up, all of them.
int warmup_of(const std::vector<Action>& dev) {
  int n = 0;
  for (const Action& a : dev) {
    if (a.kind != ActionKind::kF) break;
    ++n;
  }
  const int forwards = static_cast<int>(dev.size()) / 2;
  return n == forwards ? n : n - 1;
}

TEST(ClassicRegistry, HasTheSixClassicNames) {
  GeneratorRegistry r;
  register_classic_generators(r);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2",
                                                 "breadth-first"}));
}

TEST(Interleaved, WarmupFollowsMegatronRule) {
  // 2(p-r-1) + (v-1)g with p=4, v=2, g=p=4: [10, 8, 6, 4].
  Schedule s = make("interleaved", 4, 8, 2);
  std::vector<int> warm;
  for (const auto& dev : s.actions) warm.push_back(warmup_of(dev));
  EXPECT_EQ(warm, (std::vector<int>{10, 8, 6, 4}));
}

TEST(Interleaved, PeakInFlightChunksAre11975) {
  // Warm-up plus the first steady forward: [11, 9, 7, 5] chunk activations; one chunk counts
  // 1/v = 0.5 of a 1F1B stage, so the peaks in stage units are half of that.
  Schedule s = make("interleaved", 4, 8, 2);
  EvalResult r = run(s, UniformCosts{1, 1, 1, 0, 0});
  const double chunks[] = {11, 9, 7, 5};
  for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(r.device[d].peak_memory * 2, chunks[d]) << d;
  // Closed form for device 0: p(1 + (p-1)/(p v)) = 4 * (1 + 3/8) = 5.5 stage units.
  EXPECT_DOUBLE_EQ(r.device[0].peak_memory, 5.5);
}

TEST(Interleaved, BubbleFractionIsPMinus1OverVM) {
  // Chunk passes F=B=W=1: ideal m*v*3 per device, bubble (p-1)*3 -> (p-1)/(v m).
  for (auto [p, v, m] : std::vector<std::array<int, 3>>{{4, 2, 8}, {4, 3, 16}, {8, 2, 16}}) {
    Schedule s = make("interleaved", p, m, v);
    EvalResult r = run(s, UniformCosts{1, 1, 1, 0, 0});
    EXPECT_DOUBLE_EQ(r.bubble_fraction, static_cast<double>(p - 1) / (v * m))
        << "p=" << p << " v=" << v << " m=" << m;
  }
}

TEST(Interleaved, AllForwardsAreWarmupWhenMEqualsP) {
  Schedule s = make("interleaved", 4, 4, 2);
  for (const auto& dev : s.actions) EXPECT_EQ(warmup_of(dev), 8);
}

TEST(Interleaved, RejectsIncompatibleMicrobatchCount) {
  // m=6, p=4, g=4: 6 mod 4 = 2 < p.
  try {
    make("interleaved", 4, 6, 2);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("m mod g"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make("interleaved", 4, 2, 2), ConfigError);     // m < p
  EXPECT_THROW(make("interleaved", 4, 8, 1), ConfigError);     // v = 1
  EXPECT_THROW(make("interleaved", 4, 8, 2, 3), ConfigError);  // g < p
}

TEST(Interleaved, GroupSizeRelaxationAcceptsRemainderOfAtLeastP) {
  // m=10, p=4, g=6: 10 mod 6 = 4 >= p; warm-up of rank 0 is 2*3 + 6 = 12.
  Schedule s = make("interleaved", 4, 10, 2, 6);
  EXPECT_EQ(warmup_of(s.actions[0]), 12);
}

TEST(ZeroBubbleH1, BubbleIsPMinus1TimesFPlusBMinusW) {
  // Exact when T_W <= T_F and T_W <= T_B (checked F=B=W=1, F=B=2 W=1, F=3 B=2 W=1).
  for (auto [f, b, w] : std::vector<std::array<int, 3>>{{1, 1, 1}, {2, 2, 1}, {3, 2, 1}}) {
    for (int p : {2, 4, 8}) {
      const int m = 3 * p;
      EvalResult r = run(make("zb-h1", p, m), UniformCosts{f, b, w, 0, 0});
      EXPECT_EQ(r.cost - m * (f + b + w), (p - 1) * (f + b - w)) << f << b << w << " p=" << p;
    }
  }
}

TEST(ZeroBubbleH2, BubbleIsPMinus1TimesFPlusBMinus2W) {
  // Exact when T_W <= T_F, T_B and m >= 2p-1; zero when F=B=W.
  for (auto [f, b, w] : std::vector<std::array<int, 3>>{{1, 1, 1}, {2, 2, 1}, {3, 2, 1}}) {
    for (int p : {2, 4, 8}) {
      const int m = 2 * p;
      EvalResult r = run(make("zb-h2", p, m), UniformCosts{f, b, w, 0, 0});
      EXPECT_EQ(r.cost - m * (f + b + w), (p - 1) * (f + b - 2 * w)) << f << b << w << " p=" << p;
    }
  }
}

TEST(ZeroBubbleH1, WorkerIHoldsPMinusIPlus1MBAndIMinus1MW) {
  const int p = 4;
  UniformCosts c{1, 1, 1, 0, 0};
  c.mw_over_mb = 0.25;  // M_W = M_B / 4
  EvalResult r = run(make("zb-h1", p, 12), c);
  for (int i = 1; i <= p; ++i)
    EXPECT_DOUBLE_EQ(r.device[i - 1].peak_memory, (p - i + 1) + (i - 1) * 0.25) << "worker " << i;
}

TEST(ZeroBubbleH2, WorkerIHolds2PMinus2IPlus1MBAnd2IMinus2MW) {
  const int p = 4;
  UniformCosts c{1, 1, 1, 0, 0};
  c.mw_over_mb = 0.25;
  EvalResult r = run(make("zb-h2", p, 12), c);
  for (int i = 1; i <= p; ++i)
    EXPECT_DOUBLE_EQ(r.device[i - 1].peak_memory, (2 * p - 2 * i + 1) + (2 * i - 2) * 0.25)
        << "worker " << i;
}

TEST(BreadthFirst, RunsEveryMicrobatchThroughALocalStageBeforeTheNext) {
  const int p = 2, m = 3, v = 2;
  Schedule s = make("breadth-first", p, m, v);
  // Device 1 holds stages 1 and 3: F1 x3, F3 x3, then BW3 x3 and BW1 x3, latest microbatch first.
  const auto& d = s.actions[1];
  ASSERT_EQ(d.size(), 12u);
  EXPECT_EQ(d[0], (Action{ActionKind::kF, 1, 0}));
  EXPECT_EQ(d[3], (Action{ActionKind::kF, 3, 0}));
  EXPECT_EQ(d[6], (Action{ActionKind::kBW, 3, 2}));
  EXPECT_EQ(d[11], (Action{ActionKind::kBW, 1, 0}));
  // All m*v chunk activations are held at once: m*v/v = m stage units.
  EvalResult r = run(s, UniformCosts{1, 1, 1, 0, 0});
  EXPECT_DOUBLE_EQ(r.device[0].peak_memory, m);
}

TEST(Gpipe, BubbleMatchesClosedForm) {
  // (p-1)(F+B+W) bubble time: Megatron (p-1)/m.
  EvalResult r = run(make("gpipe", 4, 8), UniformCosts{1, 1, 1, 0, 0});
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 3.0 / 8.0);
}

}  // namespace
}  // namespace pw
