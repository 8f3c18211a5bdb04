// The CPU benchmarks' timer: a call far shorter than reading the clock still gets a positive
// time (it is timed in batches). No speed is asserted here (timings belong in benchmarks).
#include <gtest/gtest.h>
#include <sched.h>

#include "calibration/cpu_bench.h"
#include "calibration/fit.h"

namespace pw::calibration {
namespace {

volatile double g_acc = 0;

// A fresh clone's CI once failed calibration on an 8 KiB copy whose every sample read 0 (the call
// took about as long as the clock's own cost, which is subtracted): its fit saw a zero time.
TEST(TimeCalls, ACallShorterThanTheClockStillReadsAPositiveTime) {
  const Timing t = time_calls([] { g_acc = g_acc + 1.0; }, 0.01, 5);
  // Unbatched, most samples of this call read 0 after the clock's cost is taken off (the minimum
  // always did); batched, none does.
  EXPECT_GT(t.median_s, 0.0);
  EXPECT_GT(t.min_s, 0.0);
}

// Calibration pins itself to the slowest core it may use: the pin must hold while alive and the
// thread's own mask must come back afterwards.
TEST(CorePin, PinsTheThreadAndGivesItsMaskBack) {
  const std::vector<int> before = allowed_cores();
  ASSERT_FALSE(before.empty());
  const int core = before.back();
  {
    CorePin pin(core);
    ASSERT_TRUE(pin.ok());
    EXPECT_EQ(allowed_cores(), std::vector<int>{core});
    for (int i = 0; i < 100; ++i) ASSERT_EQ(sched_getcpu(), core);
  }
  EXPECT_EQ(allowed_cores(), before);
  // A core that cannot exist changes nothing.
  {
    CorePin none(-1);
    EXPECT_FALSE(none.ok());
    EXPECT_EQ(allowed_cores(), before);
  }
  EXPECT_EQ(allowed_cores(), before);
}

TEST(CorePin, TheSlowestProbeIsChosenTheLowestCoreAmongEquals) {
  EXPECT_EQ(slowest_core({}), -1);
  const Timing fast{1.0e-3, 1.0e-3, 1.0e-3, 5}, slow{1.25e-3, 1.2e-3, 1.3e-3, 5};
  EXPECT_EQ(slowest_core({{0, fast}, {3, slow}, {1, slow}, {2, fast}}), 1);
  EXPECT_EQ(slowest_core({{4, fast}}), 4);
}

TEST(CorePin, TheReportNamesEveryCoreAndTheOnePinned) {
  FitResult fit;
  EXPECT_EQ(cores_line(fit), "");  // nothing probed (a GPU run, an older raw file)
  fit.core_probes = {{0, {2.33e-3, 2.3e-3, 2.4e-3, 5}}, {1, {1.87e-3, 1.8e-3, 1.9e-3, 5}}};
  fit.pinned_core = 0;
  // 2.33 / 1.87 = 1.246.
  EXPECT_EQ(cores_line(fit),
            "cores 0: 2.33 ms, 1: 1.87 ms (executor layer forward h=256, 128 tokens) -> "
            "benchmarks pinned to core 0, the slowest (1.25x the fastest)");
  fit.core_probes.clear();  // more than 8 cores: the range only
  for (int c = 0; c < 12; ++c)
    fit.core_probes.push_back({c, {(2 + 0.1 * c) * 1e-3, 1e-3, 4e-3, 5}});
  fit.pinned_core = 11;
  // Fastest 2.0 ms (core 0), slowest 3.1 ms (core 11): 1.55x.
  EXPECT_EQ(cores_line(fit),
            "cores (12) 2.00 to 3.10 ms (executor layer forward h=256, 128 tokens) -> "
            "benchmarks pinned to core 11, the slowest (1.55x the fastest)");
}

}  // namespace
}  // namespace pw::calibration
