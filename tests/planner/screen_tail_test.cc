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

}  // namespace
}  // namespace pw
