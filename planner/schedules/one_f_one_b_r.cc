// 1F1B with full activation recomputation (1F1B-R): the memory-limited baseline the
// controllable-memory and zero-bubble papers compare against. Same order as 1F1B; an R (recompute
// forward) runs right before each full backward. Score it with
// make_uniform_cost_table(placement, costs, /*with_recompute=*/true) so F keeps only the layer
// input (UniformCosts::recompute_keep) and R re-allocates the rest.
#include <algorithm>

#include "planner/schedules/memory_family.h"

namespace pw {
namespace {

Action act(ActionKind k, int stage, int mb) {
  return Action{k, static_cast<std::int16_t>(stage), mb};
}

}  // namespace

Schedule generate_1f1b_r(const GeneratorParams& gp) {
  Schedule s;
  s.name = "1f1b-r";
  s.placement = linear_placement(gp.p, gp.num_layers);
  s.num_microbatches = gp.m;
  s.actions.resize(gp.p);
  for (int d = 0; d < gp.p; ++d) {
    auto& out = s.actions[d];
    const int warmup = std::min(gp.p - d - 1, gp.m);
    int f = 0, b = 0;
    auto backward = [&] {
      out.push_back(act(ActionKind::kR, d, b));
      out.push_back(act(ActionKind::kBW, d, b++));
    };
    for (; f < warmup; ++f) out.push_back(act(ActionKind::kF, d, f));
    while (f < gp.m) {
      out.push_back(act(ActionKind::kF, d, f++));
      backward();
    }
    while (b < gp.m) backward();
  }
  return s;
}

}  // namespace pw
