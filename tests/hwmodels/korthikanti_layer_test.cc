// One 22B transformer layer's forward + backward time under each recomputation setting, against
// the measurements Korthikanti et al. 2022 publish for it (shared/reference/models-and-hardware.md:
// t = 8 on a DGX A100, s = 2048, b = 4, h = 6144, 64 heads): no recomputation 19.6 ms, full
// recomputation 27.2 ms, selective 20.9 ms, selective with sequence parallelism 20.3 ms. The
// model's layer time is the estimate's pass times (F + B + W + R and the passes' TP collectives,
// as `estimate` prints them) of the bundled 22B scenario with 48 layers minus the same with 47,
// so the embedding, the head and the optimizer step drop out.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hwmodels/estimate.h"
#include "hwmodels/scenario.h"

namespace pw::hw {
namespace {

double layer_ms(const std::string& recompute, bool sequence_parallel) {
  auto chunk = [&](int layers) {
    Scenario s = load_scenario(std::string(PW_SOURCE_DIR) +
                               "/scenarios/megatron/korthikanti-22b-selective.yaml");
    s.model.num_layers = layers;
    s.parallel.recompute = recompute;
    s.parallel.sequence_parallel = sequence_parallel;
    const Estimate e = make_estimate(s, GpuMemoryFigures{}, GpuMemoryFigures{});
    const StageCosts& c = e.first_costs;
    return ps_to_millis(c.f + c.b + c.w + c.r + e.tp_comm_f + e.tp_comm_b);
  };
  return chunk(48) - chunk(47);
}

TEST(KorthikantiLayer, RecomputationTimesAgainstThePublishedLayer) {
  struct Case {
    const char* recompute;
    bool sp;
    double published_ms;
  };
  const Case cases[] = {{"none", false, 19.6},
                        {"full", false, 27.2},
                        {"selective", false, 20.9},
                        {"selective", true, 20.3}};
  double model[4];
  for (int i = 0; i < 4; ++i) {
    model[i] = layer_ms(cases[i].recompute, cases[i].sp);
    // Each setting within 5% of the measured layer (the model reads 20.40, 27.89, 21.54 and
    // 20.55 ms: 1-4% slower than the 2022 layer throughout; docs/simulator.md).
    EXPECT_NEAR(model[i] / cases[i].published_ms, 1.0, 0.05)
        << cases[i].recompute << (cases[i].sp ? " + SP" : "") << ": " << model[i] << " ms";
  }
  // The recomputation overheads over the plain layer (published 38.8%, 6.6%, 3.6%): the issue's
  // question is whether selective recomputation is priced as cheap as it is. Each ratio within
  // 3% of the published one.
  for (int i = 1; i < 4; ++i)
    EXPECT_NEAR((model[i] / model[0]) / (cases[i].published_ms / cases[0].published_ms), 1.0, 0.03)
        << cases[i].recompute << (cases[i].sp ? " + SP" : "") << ": " << model[i] / model[0];
  // Selective against full, the ratio the issue names: published 20.9 / 27.2 = 0.768.
  EXPECT_NEAR((model[2] / model[1]) / (20.9 / 27.2), 1.0, 0.03) << model[2] / model[1];
}

}  // namespace
}  // namespace pw::hw
