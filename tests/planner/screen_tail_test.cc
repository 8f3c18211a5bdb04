// The screen's step tail: what follows the last backward on each device (here the embedding
// group's all-reduce), as the discrete-event simulator runs it.
#include <gtest/gtest.h>

#include <vector>

#include "hwmodels/collectives.h"
#include "hwmodels/profile.h"
#include "hwmodels/topology.h"
#include "planner/search/search.h"
#include "search_test_util.h"

namespace pw {
namespace {

using testing::problem;

// The screen's tail carries the tied copy's gradient all-reduce of the first and last stages'
// devices (the DES's build_embedding_sync, after their DP reduction): GPT-3 175B at t8 p8 d16
// on 1024 A100 (128 nodes), the pair GPU 0 and GPU t (0 + d 7) = 896, V h / t = 51,200 x
// 12,288 / 8 = 78,643,200 parameters at 4 bytes. Untied (its own output layer, as many
// parameters) the two ends' tails are shorter by the pair's all-reduce of those bytes, the
// middle devices' unchanged; ZB-V (both ends on device 0) has none.
TEST(Screen, TheTailCarriesTheTiedCopysAllReduceOnBothEnds) {
  const GeneratorRegistry reg = default_registry();
  const PlanProblem tied = problem("gpt3-175b", 1024);
  PlanProblem untied = tied;
  untied.model.untie_embeddings = true;
  const SearchSpace space = default_space(tied, reg, {1536});
  int one_f_one_b = -1, zbv = -1;
  for (std::size_t i = 0; i < space.schedules.size(); ++i) {
    if (space.schedules[i].name == "1f1b") one_f_one_b = static_cast<int>(i);
    if (space.schedules[i].name == "zb-v") zbv = static_cast<int>(i);
  }
  ASSERT_GE(one_f_one_b, 0);
  ASSERT_GE(zbv, 0);
  SearchConfig c;
  c.t = 8;
  c.p = 8;
  c.d = 16;
  c.micro_batch = 1;
  c.microbatches = 96;
  c.zero = 1;
  auto tails = [&](const PlanProblem& pr, int schedule) {
    const CostModel model(pr, space);
    SearchConfig k = c;
    k.schedule = static_cast<std::uint8_t>(schedule);
    StageCosts sc;
    EXPECT_TRUE(model.screen(k, &sc).costed);
    return sc.tail;
  };
  const hw::Topology topo(hw::topology_spec(tied.profile, 128));
  const hw::GroupNetwork ends = hw::describe_group(topo, tied.profile, {0, 896});
  const Bytes bytes{4.0 * 51200 * 12288 / 8};
  const double sync = ps_to_seconds(hw::collective_time(
      hw::CollectiveKind::kAllReduce,
      hw::choose_algorithm(hw::CollectiveKind::kAllReduce, bytes, ends), bytes, ends));
  ASSERT_GT(sync, 0);
  const std::vector<double> a = tails(tied, one_f_one_b), b = tails(untied, one_f_one_b);
  ASSERT_EQ(a.size(), 8u);
  for (int d = 0; d < 8; ++d) {
    const double want = d == 0 || d == 7 ? sync : 0;
    EXPECT_NEAR(a[d] - b[d], want, 1e-9 + 1e-6 * sync) << "device " << d;
  }
  EXPECT_EQ(tails(tied, zbv), tails(untied, zbv));
}

// FP8 under delayed scaling (Megatron's default recipe): each stage's F and B end with one
// all-reduce of its FP8 GEMMs' amaxes over the pipeline rank's t x d GPUs, which the DES and
// `estimate` wait for, and so must the screen (and the evaluator, which takes its costs).
// Llama 3 8B cut to 8 layers on two DGX H100 nodes (16 GPUs); a layer has 4 FP8 GEMMs (qkv,
// proj, fc1, fc2), 3 float32 amaxes each in F and 2 in B (hw::fp8_amax_bytes): a stage of L
// layers reduces 48 L bytes in F and 32 L in B. Against current scaling (tensorwise, no such
// reduction) every stage's F and B grow by the all-reduce of those bytes on that group, W not:
// t2 p2 d4 (4 layers a stage: 192 / 128 bytes over GPUs 0-7, one node), t2 p1 d8 (8 layers:
// 384 / 256 bytes over all 16 GPUs, two nodes).
TEST(Screen, DelayedScalingEndsEachStagePassWithItsAmaxAllReduce) {
  const GeneratorRegistry reg = default_registry();
  PlanProblem pr;
  ASSERT_TRUE(model_preset("llama3-8b", &pr.model));
  pr.model.num_layers = 8;
  pr.profile = hw::resolve_profile("dgx-h100", "", "", "");
  pr.num_gpus = 16;
  pr.sim.flash_attention = true;
  SearchSpace delayed = default_space(pr, reg, {64});
  delayed.fp8 = {0, 1};
  SearchSpace tensorwise = delayed;
  tensorwise.fp8_recipe = "tensorwise";
  ASSERT_EQ(delayed.fp8_recipe, "delayed");
  int one_f_one_b = -1;
  for (std::size_t i = 0; i < delayed.schedules.size(); ++i)
    if (delayed.schedules[i].name == "1f1b") one_f_one_b = static_cast<int>(i);
  ASSERT_GE(one_f_one_b, 0);
  const hw::Topology topo(hw::topology_spec(pr.profile, 2));
  auto all_reduce = [&](double bytes, int gpus) {
    std::vector<int> group(gpus);
    for (int g = 0; g < gpus; ++g) group[g] = g;
    const hw::GroupNetwork net = hw::describe_group(topo, pr.profile, group);
    return ps_to_seconds(
        hw::collective_time(hw::CollectiveKind::kAllReduce,
                            hw::choose_algorithm(hw::CollectiveKind::kAllReduce, Bytes{bytes}, net),
                            Bytes{bytes}, net));
  };
  for (const int p : {2, 1}) {
    SearchConfig c;
    c.t = 2;
    c.p = p;
    c.d = 8 / p;
    c.micro_batch = 1;
    c.microbatches = 8;
    c.zero = 1;
    c.fp8 = 1;
    c.sequence_parallel = 1;
    c.schedule = static_cast<std::uint8_t>(one_f_one_b);
    auto costs = [&](const SearchSpace& space) {
      const CostModel model(pr, space);
      StageCosts sc;
      EXPECT_TRUE(model.screen(c, &sc).costed);
      return sc;
    };
    const StageCosts a = costs(delayed), b = costs(tensorwise);
    const int layers = 8 / p, gpus = 16 / p;
    const double fwd = all_reduce(48.0 * layers, gpus), bwd = all_reduce(32.0 * layers, gpus);
    ASSERT_GT(fwd, 0);
    ASSERT_EQ(a.f.size(), static_cast<std::size_t>(p));
    for (int s = 0; s < p; ++s) {
      const std::string at = "p" + std::to_string(p) + " stage " + std::to_string(s);
      EXPECT_NEAR(a.f[s] - b.f[s], fwd, 1e-12 + 1e-6 * fwd) << at;
      EXPECT_NEAR(a.b[s] - b.b[s], bwd, 1e-12 + 1e-6 * bwd) << at;
      EXPECT_DOUBLE_EQ(a.w[s], b.w[s]) << at;
    }
    // Without FP8 the recipe changes nothing.
    c.fp8 = 0;
    const StageCosts a0 = costs(delayed), b0 = costs(tensorwise);
    EXPECT_EQ(a0.f, b0.f);
    EXPECT_EQ(a0.b, b0.b);
  }
}

}  // namespace
}  // namespace pw
