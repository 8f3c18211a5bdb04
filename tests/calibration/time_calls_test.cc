// The CPU benchmarks' timer: a call far shorter than reading the clock still gets a positive
// time (it is timed in batches). No speed is asserted here (timings belong in benchmarks).
#include <gtest/gtest.h>

#include "calibration/cpu_bench.h"

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

}  // namespace
}  // namespace pw::calibration
