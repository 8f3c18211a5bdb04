// The search under memory limits and on the 98.5B controllable-memory model: which schedule a
// limit selects, and how it bounds the microbatches in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "hwmodels/memory.h"
#include "planner/search/search.h"
#include "search_test_util.h"

namespace pw {
namespace {

using testing::problem;

// t = d = 1, microbatch 1: pure pipeline parallelism with `name` on p devices, m microbatches.
SearchConfig pipeline_only(const SearchSpace& space, const char* name, int p, int m) {
  SearchConfig c;
  c.t = 1, c.p = p, c.d = 1, c.micro_batch = 1, c.microbatches = m;
  for (std::size_t i = 0; i < space.schedules.size(); ++i)
    if (space.schedules[i].name == name) c.schedule = static_cast<std::uint8_t>(i);
  return c;
}

// The controllable-memory paper's 98.5B model (78 layers, h 10240, sequence 1024), pure pipeline.
// The paper places embedding and head as chunks too (80 chunks on 40 GPUs); with layers only,
// 78 layers give 2p = 78 V chunks at p = 39, one layer each. Published order: V-ZB > ZB-1p > 1F1B.
// The paper compares each schedule at its own memory (ZB-1p and V-ZB at 1F1B's). Here, without
// recomputation and t = d = 1, 1F1B needs 111 GB per GPU (40 GB of weights and optimizer state,
// 39 microbatches of 1.55 GB activations), so on an 80 GB GPU the planner hands ZB-1p and V-ZB
// the ~19 units of activations that are left instead of their 39: that starved ZB-1p took 18.5 s
// against 1F1B's 13.4 s, which is why this test failed before. The comparison is therefore made
// on a GPU with room for 1F1B (200 GB), where every schedule runs at its definition.
TEST(Search, RanksVzbAboveZb1pAbove1f1bOnThe98BModel) {
  const GeneratorRegistry reg = default_registry();
  for (const char* name : {"v-zb", "zb-1p", "1f1b"})
    if (!reg.find(name)) GTEST_SKIP() << name << " not registered";
  PlanProblem pr = problem("cm-98.5b", 39);
  pr.profile.gpu.hbm_capacity = Bytes{200e9};
  SearchSpace space = default_space(pr, reg, {117});
  const CostModel model(pr, space);
  auto time_of = [&](const char* name) {
    const Evaluated e = evaluate_config(model, reg, pipeline_only(space, name, 39, 117));
    EXPECT_GT(e.iteration, 0) << name << ": " << e.why_not;
    return e.iteration;
  };
  const double vzb = time_of("v-zb"), zb1p = time_of("zb-1p"), one = time_of("1f1b");
  EXPECT_LT(vzb, zb1p);
  EXPECT_LT(zb1p, one);
}

// The paper's order at sequence 3072 as well: ZB-1p ahead of 1F1B, here on the layout the
// planner finds best for both (bundled scenarios/zero-bubble/cm-98.5b-s3072.yaml: fused
// attention, t4 p10 d1 sp, 160 microbatches, 8 layers a stage and 7 on the last two), by the
// DES. Its middle stage's B is 6% slower than F and its W 7% faster; generated for costs
// rounded to quarter steps (F = B = W), ZB-1p's order left each device waiting a few ms for
// every other backward and lost to 1F1B (37.49 s against 37.27 s). ZB-H1's bound, with the
// passes' exposed TP time in them, puts it near (p - 1)(F + B - W) of idle instead of 1F1B's
// (p - 1)(F + B + W): 2(p - 1)W = 18 x 69 ms, about 1.2 s less.
TEST(Search, Zb1pIsAheadOf1f1bOnThe98BModelAtSequence3072) {
  const GeneratorRegistry reg = default_registry();
  for (const char* name : {"zb-1p", "1f1b"})
    if (!reg.find(name)) GTEST_SKIP() << name << " not registered";
  PlanProblem pr = problem("cm-98.5b", 40);
  pr.model.seq_length = 3072;
  pr.sim.flash_attention = true;
  const SearchSpace space = default_space(pr, reg, {160});
  const CostModel model(pr, space);
  auto config = [&](const char* name) {
    SearchConfig c = pipeline_only(space, name, 10, 160);
    c.t = 4;
    c.sequence_parallel = true;
    return c;
  };
  auto time_of = [&](const char* name) {
    const Evaluated e = evaluate_config_des(model, reg, config(name));
    EXPECT_TRUE(e.feasible) << name << ": " << e.why_not;
    EXPECT_EQ(e.tier, Tier::kDes) << name;
    return e.iteration;
  };
  const double zb1p = time_of("zb-1p"), one = time_of("1f1b");
  EXPECT_LT(zb1p, one);
  // At least three quarters of ZB-H1's saving over 1F1B, 2(p - 1)W with the middle stage's W
  // (the rest may go to the steady state's waits on uneven stages; quarter steps lost it all).
  StageCosts sc;
  ASSERT_TRUE(model.stage_costs(config("zb-1p"), &sc));
  EXPECT_GT(one - zb1p, 0.75 * 2 * 9 * sc.w[sc.num_stages / 2]);
}

// A memory-reading generator given room for one microbatch's activations on stage 0's device
// runs one microbatch's round trip at a time, and the screen's bound says so (before, it bounded
// only each device's own busy time, about a fifth of that here: the round trips are 5.5x one
// device's busy time).
TEST(Search, AMemoryLimitBoundsTheMicrobatchesInFlight) {
  const GeneratorRegistry reg = default_registry();
  if (!reg.find("zb-1p")) GTEST_SKIP() << "zb-1p not registered";
  PlanProblem pr = problem("megatron-7.5b", 8);
  const SearchSpace space = default_space(pr, reg, {64});
  const SearchConfig c = pipeline_only(space, "zb-1p", 8, 64);
  StageCosts sc;
  ASSERT_TRUE(CostModel(pr, space).stage_costs(c, &sc));
  double max_static = 0;
  for (double x : sc.static_mem) max_static = std::max(max_static, x);
  // 1.7 units free: the generator's grid (steps of 0.5 below 4 units) gives it 1.5 units (the
  // 5-layer stages need 5 * 8 / 36 = 1.11 to run at all); stage 0 holds 4 of 36 layers,
  // 4 * 8 / 36 = 0.89 units a microbatch, so a second microbatch (1.78) never fits beside one.
  pr.memory_limit = max_static + 1.7 * CostModel(pr, space).activation_unit(c);
  const CostModel model(pr, space);
  ASSERT_TRUE(model.stage_costs(c, &sc));
  // By hand: the round trip is every stage's forward and backward (B; W is off the chain) and
  // 7 hops each way between the 8 devices; 64 of them, one at a time.
  double trip = 14 * sc.hop;
  for (int i = 0; i < sc.num_stages; ++i) trip += sc.f[i] + sc.b[i];
  StageCosts scratch;
  const ScreenResult r = model.screen(c, &scratch);
  ASSERT_TRUE(r.valid);
  EXPECT_GE(r.time_lb, 64 * trip * (1 - 1e-6));
  const double own = 64 * (sc.f[0] + sc.b[0] + sc.w[0]);  // one device's busy time
  EXPECT_GT(r.time_lb, 4 * own);
  const Evaluated e = evaluate_config(model, reg, c);
  ASSERT_GT(e.iteration, 0) << e.why_not;
  EXPECT_LE(r.time_lb, e.iteration);
}

// Memory-reading generators run at their own definition when the budget allows it: ZB-2p gets
// twice ZB-1p's activation memory and is then no slower (it used to be capped at ZB-1p's).
TEST(Search, Zb2pRunsAtTwiceZb1pMemoryWhenItFits) {
  const GeneratorRegistry reg = default_registry();
  for (const char* name : {"zb-2p", "zb-1p"})
    if (!reg.find(name)) GTEST_SKIP() << name << " not registered";
  PlanProblem pr = problem("megatron-7.5b", 8);
  pr.profile.gpu.hbm_capacity = Bytes{400e9};
  SearchSpace space = default_space(pr, reg, {64});
  const CostModel model(pr, space);
  auto run = [&](const char* name) {
    const Evaluated e = evaluate_config(model, reg, pipeline_only(space, name, 8, 64));
    EXPECT_TRUE(e.feasible) << name << ": " << e.why_not;
    return e;
  };
  const Evaluated one = run("zb-1p"), two = run("zb-2p");
  EXPECT_GT(two.peak_memory, one.peak_memory);
  EXPECT_LE(two.iteration, one.iteration);
}

// Where memory does not bind, a memory-reading generator runs as it is defined (no limit). The
// screen used to drop every such configuration ("its zero-bubble end is covered by the fixed
// schedules"), so `plan --schedules zb-1p` on a GPU with room to spare answered "no feasible
// plan", and in the full space ZB-1p, ZB-2p and V-ZB were searched only where memory was short.
// Here 8 GPUs hold 7.5B with 400 GB each: every pipeline row of the three is searched, and ZB-1p
// runs at its own definition (peak at most p, 1F1B's, in its units: never more memory than
// 1F1B's row of the same configuration).
TEST(Search, MemoryReadersAreSearchedWhereMemoryDoesNotBind) {
  const GeneratorRegistry reg = default_registry();
  for (const char* name : {"zb-1p", "zb-2p", "v-zb", "1f1b"})
    if (!reg.find(name)) GTEST_SKIP() << name << " not registered";
  PlanProblem pr = problem("megatron-7.5b", 8);
  pr.profile.gpu.hbm_capacity = Bytes{400e9};
  SearchSpace space = default_space(pr, reg, {64});
  std::erase_if(space.schedules, [](const ScheduleOption& o) {
    return o.name != "zb-1p" && o.name != "zb-2p" && o.name != "v-zb" && o.name != "1f1b";
  });
  space.recompute = {Recompute::kNone};
  space.micro_batches = {1};  // memory binds no row: 64 sequences of 2,048 tokens per device
  const CostModel model(pr, space);
  for (const char* name : {"zb-1p", "zb-2p", "v-zb"}) {
    StageCosts scratch;
    EXPECT_TRUE(model.screen(pipeline_only(space, name, 8, 64), &scratch).valid) << name;
  }
  SearchOptions opt;
  opt.top = 1000;
  opt.des_top = 0;
  const SearchResult r = run_search(pr, space, reg, opt);
  std::map<std::string, int> rows;
  for (const Evaluated& e : r.top)
    if (e.config.p > 1) ++rows[space.schedules[e.config.schedule].name];
  for (const char* name : {"zb-1p", "zb-2p", "v-zb"}) EXPECT_GT(rows[name], 0) << name;
  // ZB-1p next to 1F1B at t = d = 1, p = 8, 64 microbatches: same memory or less, no slower.
  const Evaluated zb = evaluate_config(model, reg, pipeline_only(space, "zb-1p", 8, 64));
  const Evaluated one = evaluate_config(model, reg, pipeline_only(space, "1f1b", 8, 64));
  ASSERT_TRUE(zb.feasible && one.feasible) << zb.why_not << one.why_not;
  EXPECT_LE(zb.peak_memory, one.peak_memory * (1 + 1e-9));
  EXPECT_LT(zb.iteration, one.iteration);
}

// BitPipe's two pipelines each keep a copy of every stage on a device of their own (device k and
// 2p-1-k of the down V, mirrored for the up V): the search's per-device model state and tail
// are those of the device's own four chunks, as the DES holds them, not an average over the
// devices (which put part of the embedding and head on every device and made the evaluator's
// time bound exceed the DES's: 5.52 s against 4.72 s for 7.5B at t2 p4 d1 mb2 with full
// recomputation and offload, where the tail is the host optimizer step of the device's
// parameters). Devices 0 and p-1 hold the embedding and the head (chunks 0 and 2p-1 of one
// pipeline each); the middle devices hold layers only, and mirrored devices hold alike.
TEST(Search, BitPipeDevicesHoldTheirOwnChunksState) {
  const GeneratorRegistry reg = default_registry();
  if (!reg.find("bitpipe")) GTEST_SKIP() << "bitpipe not registered";
  PlanProblem pr = problem("megatron-7.5b", 4);
  SearchSpace space = default_space(pr, reg, {32});
  SearchConfig c = pipeline_only(space, "bitpipe", 4, 16);
  StageCosts sc;
  const CostModel model(pr, space);
  ASSERT_TRUE(model.stage_costs(c, &sc));
  ASSERT_EQ(sc.state_mem.size(), 4u);
  EXPECT_GT(sc.state_mem[0], sc.state_mem[1] * 1.01);
  EXPECT_DOUBLE_EQ(sc.state_mem[0], sc.state_mem[3]);
  EXPECT_DOUBLE_EQ(sc.state_mem[1], sc.state_mem[2]);
  // Together the four devices hold every stage twice: twice the model's state, as the average
  // did. Without ZeRO a parameter costs bf16 weights 2 + gradients (fp32 main gradients 4, the
  // space's default) + fp32 master weights and Adam moments 12 bytes.
  double total = 0, params = 0;
  for (double x : sc.state_mem) total += x;
  for (double x : sc.params) params += x;
  const double per_param = 2 + hw::grad_bytes_per_param(space.grad_reduce_in_fp32) + 12;
  EXPECT_NEAR(total, 2 * params * per_param, 1e-6 * total);
}

// A 34 GB limit (without activation recomputation, as the controllable-memory paper compares
// schedules) leaves GPT-3 on 1024 GPUs only the V-shape family's memory/bubble trade-offs: the
// planner's first row is one of them and fits the limit by the simulator's own accounting.
TEST(Search, MemoryLimitPicksAControllableMemorySchedule) {
  const GeneratorRegistry reg = default_registry();
  if (!reg.find("v-adaptive")) GTEST_SKIP() << "memory-controllable schedules not registered";
  const PlanProblem pr = problem("gpt3-175b", 1024, 34);
  SearchSpace space = default_space(pr, reg, {1536});
  space.gpu_counts = {1024};
  space.recompute = {Recompute::kNone};
  const SearchResult r = run_search(pr, space, reg, SearchOptions{});
  ASSERT_FALSE(r.top.empty());
  const std::string best = space.schedules[r.top[0].config.schedule].name;
  EXPECT_TRUE(best == "v-zb" || best == "v-adaptive" || best == "v-half" || best == "v-min")
      << describe_config(space, r.top[0].config);
  EXPECT_EQ(r.top[0].tier, Tier::kDes);
  for (const Evaluated& e : r.top) EXPECT_LE(e.peak_memory, 34e9);
}

}  // namespace
}  // namespace pw
