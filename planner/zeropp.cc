// ZeroPP-style blockwise task interleaving with fully sharded data parallelism: the model is cut
// into blocks of `block_layers` layers (GeneratorParams::v blocks per device, default 2; block
// size = num_layers / (p * v)), laid out looped (block s on device s mod p). F, B and W of each
// block are interleaved across devices by the zero-bubble greedy scheduler (1F1B memory budget),
// and each device gathers a block's weights (UNSHARD) right before the block's first pass and
// releases them (RESHARD) after its last, then reduce-scatters its gradients (REDUCE_GRAD).
// Gathering is modelled once per block per iteration; smaller blocks mean less gathered weight
// memory at a time and more, smaller collectives.
#include <fmt/format.h>

#include "core/error.h"
#include "planner/memory_family.h"
#include "planner/zb_auto.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

void add_sharding(Schedule& s) {
  const int S = s.placement.num_stages();
  for (auto& dev : s.actions) {
    std::vector<int> first(S, -1), last(S, -1);
    for (int i = 0; i < static_cast<int>(dev.size()); ++i) {
      const int st = dev[i].stage;
      if (first[st] < 0) first[st] = i;
      last[st] = i;
    }
    std::vector<Action> out;
    out.reserve(dev.size() + 3 * S);
    for (int i = 0; i < static_cast<int>(dev.size()); ++i) {
      const int st = dev[i].stage;
      const auto stage16 = static_cast<std::int16_t>(st);
      if (first[st] == i) out.push_back(Action{ActionKind::kUnshard, stage16, -1});
      out.push_back(dev[i]);
      if (last[st] == i) {
        out.push_back(Action{ActionKind::kReshard, stage16, -1});
        out.push_back(Action{ActionKind::kReduceGrad, stage16, -1});
      }
    }
    dev = std::move(out);
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
  Schedule s = zb_auto(pl, gp.m, costs, limit, "zeropp");
  add_sharding(s);
  return s;
}

}  // namespace pw
