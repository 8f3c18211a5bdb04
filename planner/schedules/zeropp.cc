// ZeroPP-style blockwise task interleaving with fully sharded data parallelism: the model is cut
// into blocks of layers (GeneratorParams::v blocks per device, default 2; layers per block =
// num_layers / (p * v)), laid out looped (block s on device s mod p). F, B and W of each layer
// block are interleaved across devices by the zero-bubble greedy scheduler (1F1B memory budget).
//
// Weights are gathered per block of microbatches: GeneratorParams::group_size microbatches (0 or
// >= m: all m, one gather per iteration; the CLI's --group-size). The microbatch blocks run one
// after another; on each device, every layer block's weights are gathered (UNSHARD, microbatch =
// the block's first) right before the microbatch block's first pass of that layer block and
// released (RESHARD) after its last W, so ceil(m / group) gathers per layer block and iteration.
// Gradients are reduce-scattered (REDUCE_GRAD) once, after the last W. Smaller microbatch blocks
// hold gathered weights and activations for less time (at most `group` microbatches in flight)
// at the price of more gathers and one pipeline fill and drain per block.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "planner/schedules/memory_family.h"
#include "planner/schedules/zb_auto.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

// Appends `part` (a schedule of microbatches 0..n-1) to `out` as microbatches first..first+n-1,
// wrapping each stage's passes in UNSHARD/RESHARD; `last` also adds REDUCE_GRAD per stage.
void append_block(const Schedule& part, int first, bool last, Schedule& out) {
  const int S = part.placement.num_stages();
  std::vector<int> first_at(S), last_at(S);
  for (std::size_t d = 0; d < part.actions.size(); ++d) {
    const auto& dev = part.actions[d];
    std::fill(first_at.begin(), first_at.end(), -1);
    for (int i = 0; i < static_cast<int>(dev.size()); ++i) {
      const int st = dev[i].stage;
      if (first_at[st] < 0) first_at[st] = i;
      last_at[st] = i;
    }
    auto& dst = out.actions[d];
    for (int i = 0; i < static_cast<int>(dev.size()); ++i) {
      const int st = dev[i].stage;
      const auto stage16 = static_cast<std::int16_t>(st);
      if (first_at[st] == i) dst.push_back(Action{ActionKind::kUnshard, stage16, first});
      Action a = dev[i];
      a.microbatch += first;
      dst.push_back(a);
      if (last_at[st] != i) continue;
      dst.push_back(Action{ActionKind::kReshard, stage16, first});
      if (last) dst.push_back(Action{ActionKind::kReduceGrad, stage16, -1});
    }
  }
}

}  // namespace

Schedule generate_zeropp(const GeneratorParams& gp) {
  const int v = gp.v > 0 ? gp.v : 2;
  if (gp.num_layers > 0 && gp.num_layers % (gp.p * v) != 0)
    throw ConfigError("", "--chunks",
                      fmt::format("zeropp needs num_layers ({}) divisible by p * blocks per "
                                  "device ({} * {})",
                                  gp.num_layers, gp.p, v));
  const Placement pl = loop_placement(gp.p, v, gp.num_layers);
  CostTable costs;
  if (gp.stage_costs) {
    if (gp.stage_costs->num_stages != pl.num_stages())
      throw ConfigError("", "stage_costs",
                        fmt::format("zeropp expects {} stages", pl.num_stages()));
    costs = *gp.stage_costs;
  } else {
    costs = make_uniform_cost_table(pl, gp.costs);
  }
  const double limit = gp.memory_limit > 0 ? gp.memory_limit : gp.p;
  const int group = gp.group_size > 0 ? std::min(gp.group_size, gp.m) : gp.m;
  Schedule s;
  s.name = "zeropp";
  s.placement = pl;
  s.num_microbatches = gp.m;
  s.actions.resize(gp.p);
  for (int first = 0; first < gp.m; first += group) {
    const int n = std::min(group, gp.m - first);
    append_block(zb_auto(pl, n, costs, limit, "zeropp"), first, first + n >= gp.m, s);
  }
  return s;
}

}  // namespace pw
