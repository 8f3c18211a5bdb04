// Warm-up / cool-down reordering of repeated building blocks (planner/schedules/block_reorder.h)
// and the V-Min, V-Half and V-ZB generators built on it. Units: with UniformCosts{1,1,1} one chunk
// pass is one slot; a V chunk's activation is 0.5 of a 1F1B stage, so "chunk activations" = 2 *
// peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/validator.h"
#include "planner/schedules/block_reorder.h"
#include "planner/schedules/generator.h"
#include "planner/schedules/v_schedules.h"
#include "sim/evaluator.h"
#include "unit_costs.h"

namespace pw {
namespace {

using testing::max_peak;
using testing::params;
using testing::unit;

EvalResult run(const std::string& name, const GeneratorParams& gp) {
  const Schedule s = generate_schedule(default_registry(), name, gp);
  return evaluate(s, make_uniform_cost_table(s.placement, gp.costs));
}

TEST(VReorder, NoDevicePeakRisesAboveTheBlocksPeak) {
  // The reordering may only use memory the block already needs: every device stays within the
  // largest device peak of the plain repetition (and, with per_device_caps, within its own).
  for (double mw : {0.0, 0.5, 1.0}) {
    for (int p = 2; p <= 10; ++p) {
      const CostTable costs = make_uniform_cost_table(v_placement(p), unit(mw));
      for (const VOffsets& o : {v_min_offsets(p), v_half_offsets(p), v_zb_offsets(p)}) {
        const BuildingBlock blk = v_block(p, o, "v");
        const int m = 2 * p + 3;
        const EvalResult plain = evaluate(block_to_schedule(blk, m, {false}), costs);
        const double top = max_peak(plain);
        for (bool per_device : {false, true}) {
          ReorderOptions opt;
          opt.per_device_caps = per_device;
          const ReorderResult r = reorder_block(blk, m, costs, opt);
          validate_schedule(r.schedule);
          const EvalResult got = evaluate(r.schedule, costs);
          EXPECT_EQ(got.makespan, r.makespan);
          EXPECT_EQ(got.cost, r.cost);
          EXPECT_LE(got.makespan, plain.makespan) << "p=" << p;
          for (int d = 0; d < p; ++d) {
            const double cap = per_device ? plain.device[d].peak_memory : top;
            EXPECT_LE(got.device[d].peak_memory, cap + 1e-9)
                << "p=" << p << " mw=" << mw << " device " << d << " " << r.method;
          }
        }
      }
    }
  }
}

TEST(VZb, BlockIsCollisionFreeAndHolds2PChunkActivations) {
  // v_zb_offsets: lifespans 8p-4-2i and 4p-2+2i slots sum to 12p-6, so the bound is <= 2p chunk
  // activations per device; device 0 (i = 0) reaches it: ceil((8p-4)/6) + ceil((4p-2)/6) = 2p
  // for p = 4 (5 + 3 = 8).
  for (int p = 2; p <= 16; ++p) {
    const BuildingBlock blk = v_block(p, v_zb_offsets(p), "v-zb");  // throws on a collision
    const std::vector<double> bound = block_memory_bound(blk);
    for (int d = 0; d < p; ++d) EXPECT_LE(2 * bound[d], 2 * p + 1e-9) << "p=" << p;
  }
  const std::vector<StageLifespan> ls = block_lifespans(v_block(4, v_zb_offsets(4), "v-zb"));
  EXPECT_EQ(ls[0].lifespan, 28);  // F0 at 0 .. b at 8p-5 = 27, end 28
  EXPECT_EQ(ls[7].lifespan, 14);  // f at 7 .. B at 6p-4 = 20, end 21
}

TEST(VZb, ZeroBubbleFromTheBlockAtTwoPChunkActivations) {
  // Zero-bubble convention: cost = 6m (every device busy from its first to its last pass);
  // makespan - 6m = p - 1 (device p-1 cannot start before the first forward reaches it).
  for (int p = 2; p <= 8; ++p) {
    for (int m : {2 * p, 3 * p + 1, 4 * p}) {
      const GeneratorParams gp = params(p, m, 0.0);
      const CostTable costs = make_uniform_cost_table(v_placement(p), gp.costs);
      ReorderOptions opt;
      opt.caps.assign(p, p * 1.0);
      const ReorderResult blk = reorder_block(v_block(p, v_zb_offsets(p), "v-zb"), m, costs, opt);
      EXPECT_EQ(blk.cost, 6 * m) << "p=" << p << " m=" << m << " " << blk.method;
      EXPECT_EQ(blk.makespan, 6 * m + p - 1) << "p=" << p << " m=" << m;
      const EvalResult r = run("v-zb", gp);
      EXPECT_EQ(r.cost, 6 * m);
      EXPECT_LE(2 * max_peak(r), 2 * p + 1e-9);
    }
  }
}

TEST(VZb, LimitBelowOneForwardNamesTheSmallestFeasibleLimit) {
  GeneratorParams gp = params(4, 8, 0.0);
  gp.memory_limit = 0.25;  // less than one chunk's activation (0.5)
  try {
    generate_schedule(default_registry(), "v-zb", gp);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--memory-limit");
    EXPECT_NE(std::string(e.what()).find("v-zb"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("smallest feasible limit"), std::string::npos) << e.what();
  }
}

TEST(VReorder, LocalSearchNeverLengthensNorRaisesAPeak) {
  for (int p : {4, 6}) {
    const CostTable costs = make_uniform_cost_table(v_placement(p), unit(1.0));
    const BuildingBlock blk = v_block(p, v_min_offsets(p), "v-min");
    const ReorderResult plain = reorder_block(blk, 3 * p, costs);
    ReorderOptions opt;
    opt.search_budget = 20000;
    const ReorderResult searched = reorder_block(blk, 3 * p, costs, opt);
    validate_schedule(searched.schedule);
    EXPECT_LE(searched.makespan, plain.makespan);
    const EvalResult r = evaluate(searched.schedule, costs);
    EXPECT_EQ(r.makespan, searched.makespan);
    for (int d = 0; d < p; ++d) EXPECT_LE(r.device[d].peak_memory, searched.caps[d] + 1e-9);
  }
}

}  // namespace
}  // namespace pw
