// BitPipe (Wu et al. 2024): two V-shaped interleaved pipelines running in opposite directions.
// Every device holds 4 chunks: 2 of the "down" pipeline (which enters at device 0) and 2 of the
// "up" pipeline (which enters at device p-1); paired devices j and p-1-j hold the same layers and
// all-reduce those gradients at the end (PAIR_REDUCE). Layer placement for 16 layers, 4 devices:
// dev0 [0,1][6,7][14,15][8,9], dev1 [2,3][4,5][12,13][10,11], dev2 [4,5][2,3][10,11][12,13],
// dev3 [6,7][0,1][8,9][14,15]. The first m/2 microbatches run in the down pipeline, the rest in
// the up one; the order on each device comes from the greedy list scheduler (full backwards,
// deepest stage first, forwards within a 1F1B-sized activation budget).
#include <fmt/format.h>

#include "core/error.h"
#include "planner/memory_family.h"
#include "planner/zb_auto.h"
#include "sim/evaluator.h"

namespace pw {

/// BitPipe's placement: stages 0..2p-1 = down pipeline, 2p..4p-1 = up pipeline.
Placement bitpipe_placement(int p, int num_layers) {
  Placement pl;
  pl.kind = PlacementKind::kExplicit;
  pl.num_devices = p;
  const int chunks = 2 * p;
  pl.num_layers = num_layers > 0 ? num_layers : chunks;
  for (int pipe = 0; pipe < 2; ++pipe) {
    for (int k = 0; k < chunks; ++k) {
      StageInfo st;
      const int down = k < p ? k : 2 * p - 1 - k;
      st.device = pipe == 0 ? down : p - 1 - down;
      st.layer_begin = static_cast<int>(static_cast<long long>(k) * pl.num_layers / chunks);
      st.layer_end = static_cast<int>(static_cast<long long>(k + 1) * pl.num_layers / chunks);
      st.pipeline = pipe;
      st.index = k;
      pl.stages.push_back(st);
    }
  }
  return pl;
}

Schedule generate_bitpipe(const GeneratorParams& gp) {
  if (gp.p < 2 || gp.p % 2 != 0)
    throw ConfigError("", "--pp", fmt::format("bitpipe needs an even p >= 2, got {}", gp.p));
  if (gp.m % gp.p != 0)
    throw ConfigError(
        "", "--microbatches",
        fmt::format("bitpipe needs m to be a multiple of p = {}, got {}", gp.p, gp.m));
  const Placement pl = bitpipe_placement(gp.p, gp.num_layers);
  CostTable costs;
  if (gp.stage_costs) {
    if (gp.stage_costs->num_stages != pl.num_stages())
      throw ConfigError("", "stage_costs",
                        fmt::format("bitpipe expects {} stages", pl.num_stages()));
    costs = *gp.stage_costs;
  } else {
    costs = make_uniform_cost_table(pl, gp.costs);
  }
  // 1F1B's budget: p microbatches of one 1F1B stage (each chunk weighs 1/2).
  const double limit = gp.memory_limit > 0 ? gp.memory_limit : gp.p;
  Schedule best;
  TimePs best_cost = -1;
  for (WPolicy w : {WPolicy::kFillAny}) {
    for (bool strict_f : {false, true}) {
      GreedyVariant v;
      v.w_policy = w;
      v.strict_f = strict_f;
      v.fused_backward = true;
      Schedule s = zb_greedy(pl, gp.m, costs, limit, v, "bitpipe");
      if (s.actions.empty()) continue;
      const TimePs c = evaluate(s, costs).cost;
      if (best_cost < 0 || c < best_cost) best_cost = c, best = std::move(s);
    }
  }
  if (best_cost < 0)
    throw ConfigError("", "--memory-limit",
                      fmt::format("bitpipe cannot run within {} activations per device", limit));
  // Gradients of every chunk are complete after its last backward: all-reduce with the pair.
  for (int d = 0; d < gp.p; ++d)
    for (int s = 0; s < pl.num_stages(); ++s)
      if (pl.stages[s].device == d)
        best.actions[d].push_back(
            Action{ActionKind::kPairReduce, static_cast<std::int16_t>(s), -1});
  return best;
}

}  // namespace pw
