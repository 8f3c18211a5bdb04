// The discrete-event simulator on a plan's lowered schedule (explicit SEND/RECV, what
// `pipewright simulate --plan` re-simulates) against the same schedule before lowering.
#include <gtest/gtest.h>

#include "core/lowering.h"
#include "sim/iteration.h"
#include "sim_test_util.h"

namespace pw {
namespace {

IterationResult simulate(const IterationInput& in, bool lowered, bool free_comm) {
  IterationInput copy = in;
  if (lowered) copy.schedule = lower_communication(in.schedule);
  IterationOptions o;
  o.free_communication = free_comm;
  return simulate_iteration(copy, o);
}

// Lowering only makes the transfers explicit: SEND/RECV last no time on the compute stream,
// and each RECV sits just before the pass that needs its data, so the iteration is the same.
TEST(LoweredPlan, SameIterationAsTheUnloweredScheduleWithAndWithoutCommunication) {
  for (const char* schedule : {"1f1b", "zb-h1", "gpipe", "interleaved"}) {
    hw::Scenario s = hw::load_scenario(testing::scenario_path("megatron/weak-scaling-76.1b.yaml"));
    s.parallel.schedule = schedule;
    if (std::string(schedule) != "interleaved") s.parallel.virtual_stages = 1;
    const IterationInput in = testing::input_for(s);
    ASSERT_GT(in.schedule.placement.num_devices, 1);
    for (bool free_comm : {true, false}) {
      const IterationResult a = simulate(in, false, free_comm);
      const IterationResult b = simulate(in, true, free_comm);
      EXPECT_EQ(a.iteration, b.iteration) << schedule << " free_comm " << free_comm;
    }
  }
}

}  // namespace
}  // namespace pw
