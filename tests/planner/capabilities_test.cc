// Every generator's declared capabilities (GeneratorCaps in its registry entry) agree with what
// it generates: placement shape, chunks, pipelines, split backward, R and OVERLAP actions, whether
// it honours v, whether it reads the memory limit and whether it reads the pass costs. The search
// trusts the declarations.
#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/schedules/generator.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

TEST(GeneratorCaps, EveryDeclarationMatchesTheGeneratedSchedule) {
  const GeneratorRegistry reg = default_registry();
  ASSERT_GE(reg.all().size(), 17u);
  for (const GeneratorInfo& g : reg.all()) {
    GeneratorParams gp;
    gp.p = 4;
    gp.m = 8;
    gp.num_layers = 48;
    const Schedule s = generate_schedule(reg, g.name, gp);
    const GeneratorCaps& c = g.caps;
    EXPECT_EQ(std::max(1, s.placement.num_pipelines()), c.pipelines) << g.name;
    EXPECT_EQ(s.placement.num_stages() / (gp.p * c.pipelines), c.chunks) << g.name;
    EXPECT_EQ(s.placement.kind == PlacementKind::kV, c.v_shape) << g.name;
    EXPECT_EQ(s.split_backward(), c.split_backward) << g.name;
    bool r = false, overlap = false;
    for (const auto& row : s.actions)
      for (const Action& a : row) {
        r |= a.kind == ActionKind::kR;
        overlap |= a.kind == ActionKind::kOverlapFB;
      }
    EXPECT_EQ(r, c.explicit_recompute) << g.name;
    EXPECT_EQ(overlap, c.overlap) << g.name;
    // Honours v: asked for 3 chunks per device, it places 3.
    GeneratorParams g3 = gp;
    g3.v = 3;
    bool three = false;
    try {
      three = generate_schedule(reg, g.name, g3).placement.num_stages() == 3 * gp.p * c.pipelines;
    } catch (const ConfigError&) {
    }
    EXPECT_EQ(three && c.chunks != 3, c.takes_v) << g.name;
    // Honours the group size: a group of 8 (interleaved's default is p = 4) or of 4 (ZeroPP's
    // default is m = 8) changes the schedule or is refused.
    bool grouped = false;
    for (int size : {4, 8}) {
      GeneratorParams gg = gp;
      gg.group_size = size;
      try {
        grouped |= !(generate_schedule(reg, g.name, gg) == s);
      } catch (const ConfigError&) {
        grouped = true;
      }
    }
    EXPECT_EQ(grouped, c.takes_group_size) << g.name;
    // Reads the memory limit: a tight limit changes the schedule or is refused.
    GeneratorParams gm = gp;
    gm.memory_limit = 2.0;
    bool reads = false;
    try {
      reads = !(generate_schedule(reg, g.name, gm) == s);
    } catch (const ConfigError&) {
      reads = true;
    }
    EXPECT_EQ(reads, c.memory_aware) << g.name;
    // Reads the pass costs: other F/B/W/hop costs or another W share of the activation change
    // the schedule (the search asks a generator that does not one question per p, m and v).
    bool costs = false;
    for (const UniformCosts& u :
         {UniformCosts{1, 2, 1, 0, 0}, UniformCosts{2, 2, 1, 0, 1}, UniformCosts{1, 1, 3, 0, 0}}) {
      GeneratorParams gc = gp;
      gc.costs = u;
      gc.costs.mw_over_mb = 0.5;
      try {
        costs |= !(generate_schedule(reg, g.name, gc) == s);
      } catch (const ConfigError&) {
        costs = true;
      }
    }
    EXPECT_EQ(costs, c.reads_costs) << g.name;
    // A memory reader weighs memory against time: it reads the costs too (`simulate` and the
    // search give both only to the generators that declare reading costs).
    if (c.memory_aware) {
      EXPECT_TRUE(c.reads_costs) << g.name;
    }
    // A memory reader declares the memory it is defined with, and keeps to it without a limit
    // (the search then gives it none): every device's peak, in 1F1B-stage units, at most that.
    EXPECT_EQ(c.own_budget != nullptr, c.memory_aware) << g.name;
    // A multi-pipeline generator declares its placement: the devices of every stage as
    // generated (the search reads them to know what each device holds).
    EXPECT_EQ(c.placement != nullptr, c.pipelines > 1) << g.name;
    if (c.placement) {
      const Placement pl = c.placement(gp.p, gp.num_layers);
      ASSERT_EQ(pl.stages.size(), s.placement.stages.size()) << g.name;
      for (std::size_t i = 0; i < pl.stages.size(); ++i) {
        EXPECT_EQ(pl.stages[i].device, s.placement.stages[i].device) << g.name << " stage " << i;
        EXPECT_EQ(pl.stages[i].pipeline, s.placement.stages[i].pipeline) << g.name;
        EXPECT_EQ(pl.stages[i].index, s.placement.stages[i].index) << g.name;
      }
    }
    if (c.own_budget) {
      const EvalResult e = evaluate(s, make_uniform_cost_table(s.placement, gp.costs));
      for (const DeviceStats& d : e.device)
        EXPECT_LE(d.peak_memory, c.own_budget(gp.p) + 1e-9) << g.name;
    }
  }
}

// Per-device limits name every device or none: a list of another length is refused with the
// parameter named (the generators read it by device index), for every generator alike.
TEST(GeneratorCaps, PerDeviceLimitsOfAnotherLengthAreRefused) {
  const GeneratorRegistry reg = default_registry();
  for (const GeneratorInfo& g : reg.all()) {
    GeneratorParams gp;
    gp.p = 4;
    gp.m = 8;
    gp.memory_caps = {4, 4, 4};  // three limits for four devices
    try {
      generate_schedule(reg, g.name, gp);
      ADD_FAILURE() << g.name << " accepted 3 limits for 4 devices";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "memory_caps") << g.name;
    }
  }
}

// The one way every tier lays a split onto a pipeline: stage i takes layers[i] after the stages
// before it in pipeline order, wherever the placement puts it (a V: device 0 holds stages 0 and
// 2p-1). Hand count for 2 + 3 + 4 + 5 = 14 layers over v_placement(2).
TEST(GeneratorCaps, AStageSplitIsLaidInPipelineOrder) {
  Placement pl = v_placement(2, 14);
  assign_stage_layers({2, 3, 4, 5}, &pl);
  const int begin[] = {0, 2, 5, 9}, end[] = {2, 5, 9, 14};
  for (const StageInfo& st : pl.stages) {
    EXPECT_EQ(st.layer_begin, begin[st.index]) << st.index;
    EXPECT_EQ(st.layer_end, end[st.index]) << st.index;
  }
}

}  // namespace
}  // namespace pw
