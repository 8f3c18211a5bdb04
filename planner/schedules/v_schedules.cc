#include "planner/schedules/v_schedules.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "planner/schedules/adaptive.h"
#include "planner/schedules/block_reorder.h"
#include "planner/schedules/memory_family.h"
#include "planner/schedules/v_grid.h"
#include "planner/schedules/zb_auto.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

constexpr int kVPeriod = 6;

void check_p(const GeneratorParams& gp, const char* name) {
  if (gp.p < 2)
    throw ConfigError("", "--pp", fmt::format("{} needs at least 2 pipeline devices", name));
}

// The authors' order of `block` (v_grid.h) and its timing under `costs`, or nullopt where their
// method refuses the block or the order holds some device above its cap.
std::optional<std::pair<Schedule, EvalResult>> grid_within(const GeneratorParams& gp,
                                                           const BuildingBlock& block,
                                                           const CostTable& costs,
                                                           const std::vector<double>& caps) {
  std::optional<Schedule> grid =
      v_grid_schedule(gp.p, gp.m, v_grid_pattern(block), 2 * gp.p, gp.num_layers);
  if (!grid) return std::nullopt;
  PW_ASSERT(static_cast<int>(caps.size()) == gp.p, "grid_within: one cap per device");
  grid->name = block.name;
  EvalResult e = evaluate(*grid, costs);
  for (int d = 0; d < gp.p; ++d)
    if (e.device[d].peak_memory > caps[d] + 1e-9) return std::nullopt;
  return std::pair{std::move(*grid), std::move(e)};
}

// The block's best reordering under its own peak (block_reorder.h), or the authors' method on
// the same block (v_grid.h: their repetition, squeeze, re-laid warm-up and cool-down and greedy
// fill, written for unit costs and their rule that an activation is held until its W) where its
// order is shorter under `gp`'s costs and holds no device above the reordering's cap. Under
// their rule (M_W = M_B) that order is what the published V-Min and V-Half bubbles come from
// (p = 6 V-Min 17 and p = 8 V-Half 17 slots, where the reordering alone gives 19).
Schedule v_schedule_from(const GeneratorParams& gp, const VOffsets& o, const char* name) {
  const BuildingBlock block = v_block(gp.p, o, name, gp.num_layers);
  const CostTable costs = v_cost_table(gp);
  ReorderResult best = reorder_block(block, gp.m, costs);
  auto grid = grid_within(gp, block, costs, best.caps);
  return grid && grid->second.makespan < best.makespan ? std::move(grid->first)
                                                       : std::move(best.schedule);
}

}  // namespace

BuildingBlock v_block(int p, const VOffsets& o, const std::string& name, int num_layers) {
  BuildingBlock blk;
  blk.name = name;
  blk.placement = v_placement(p, num_layers);
  blk.period = kVPeriod;
  blk.passes.resize(p);
  std::vector<int> w_order;
  for (int i = 0; i < p; ++i) {
    const int c0 = i, c1 = 2 * p - 1 - i;
    auto& dev = blk.passes[i];
    dev.push_back({ActionKind::kF, c0, o.F[i], 1});
    dev.push_back({ActionKind::kF, c1, o.f[i], 1});
    dev.push_back({ActionKind::kB, c1, o.B[i], 1});
    dev.push_back({ActionKind::kB, c0, o.b[i], 1});
  }
  // W of chunk 1 (its B comes first) then w of chunk 0, device by device.
  for (int i = 0; i < p; ++i) {
    w_order.push_back(2 * p - 1 - i);
    w_order.push_back(i);
  }
  place_w_greedily(blk, w_order);
  check_block(blk, name + " block");
  return blk;
}

VOffsets v_min_offsets(int p) {
  const int x = p % 3 == 0 ? 2 : 0;
  VOffsets o;
  for (int i = 0; i < p; ++i) {
    o.F.push_back(i);
    o.f.push_back(2 * p - i - 1);
    o.B.push_back(2 * p + x + i);
    o.b.push_back(4 * p + x - i - 1);
  }
  return o;
}

VOffsets v_half_offsets(int p) {
  const int x = p % 2 == 0 ? 3 : 0;
  VOffsets o;
  for (int i = 0; i < p; ++i) {
    o.F.push_back(2 * i);
    o.f.push_back(3 * p - i - 2);
    o.B.push_back(3 * p + x + 2 * i - 1);
    o.b.push_back(6 * p + x - i - 2);
  }
  return o;
}

VOffsets v_zb_offsets(int p) {
  // The tightest V chain (F: i, f: 2p-1-i) with a turn gap at device 0 of g = 4p-3 slots
  // (B: 2p-1+g+i, b: 4p-2+g-i). Mod 6, F, B = i, i+2 and f, b = 2p-1-i, 2p+1-i: the two pairs
  // differ by an even amount, the offsets within a pair by 2, so the four never collide and W, w
  // take the two free slots. Lifespans to the end of b / B: 8p-4-2i and 4p-2+2i slots, which
  // sum to 12p-6, so ceil(./6) + ceil(./6) <= 2p: the block holds 1F1B's p microbatches.
  VOffsets o;
  const int g = 4 * p - 3;
  for (int i = 0; i < p; ++i) {
    o.F.push_back(i);
    o.f.push_back(2 * p - 1 - i);
    o.B.push_back(2 * p - 1 + g + i);
    o.b.push_back(4 * p - 2 + g - i);
  }
  return o;
}

VOffsets v_zb_grid_offsets(int p) {
  // Each chain's first hop one slot, every later hop three; the turns one slot at device p-1
  // and three at device 0 (before B): F_0 = 0, F_i = 3i-2; f_i = 6p-7-3i; B_0 = 6p-4,
  // B_i = 6p-6+3i; b_i = 12p-11-3i.
  VOffsets o;
  for (int i = 0; i < p; ++i) {
    o.F.push_back(i == 0 ? 0 : 3 * i - 2);
    o.f.push_back(6 * p - 7 - 3 * i);
    o.B.push_back(i == 0 ? 6 * p - 4 : 6 * p - 6 + 3 * i);
    o.b.push_back(12 * p - 11 - 3 * i);
  }
  return o;
}

Schedule generate_v_min(const GeneratorParams& gp) {
  check_p(gp, "v-min");
  return v_schedule_from(gp, v_min_offsets(gp.p), "v-min");
}

Schedule generate_v_half(const GeneratorParams& gp) {
  check_p(gp, "v-half");
  return v_schedule_from(gp, v_half_offsets(gp.p), "v-half");
}

namespace {

Schedule v_zb(const GeneratorParams& gp, const CostTable& costs) {
  // 1F1B memory: p microbatches of each device's two chunks (its own, with uneven stages).
  ReorderOptions opt;
  if (!gp.memory_caps.empty())
    opt.caps = gp.memory_caps;
  else if (gp.memory_limit > 0)
    opt.caps.assign(gp.p, gp.memory_limit);
  else
    opt.caps = own_stage_budgets(v_placement(gp.p, gp.num_layers), costs, 1);
  std::optional<ReorderResult> block;
  try {
    block =
        reorder_block(v_block(gp.p, v_zb_offsets(gp.p), "v-zb", gp.num_layers), gp.m, costs, opt);
  } catch (const ConfigError&) {
    // No reordering of the block fits the limit; the greedy scheduler decides (and reports).
  }
  // The greedy zero-bubble scheduler on the same placement and limit is the other candidate:
  // with uneven pass costs or communication it can beat the block; keep the lower cost. When
  // neither fits the limit, the greedy scheduler's error names the smallest feasible limit.
  Schedule greedy;
  try {
    greedy = generate_zb_v(gp);
  } catch (const ConfigError& e) {
    if (block) return std::move(block->schedule);
    std::string msg = e.message();
    if (msg.rfind("zb-v", 0) == 0) msg.replace(0, 4, "v-zb");
    throw ConfigError(e.file(), e.key(), msg);
  }
  greedy.name = "v-zb";
  const EvalResult g = evaluate(greedy, costs);
  Schedule best = std::move(greedy);
  std::tuple<TimePs, TimePs> best_key{g.cost, g.makespan};
  if (block && std::tie(block->cost, block->makespan) <= best_key) {
    best = std::move(block->schedule);
    best_key = {block->cost, block->makespan};
  }
  // The authors' method (v_grid.h) on their V-ZB block: under their memory rule (an activation
  // held until its W) the block above has a bubble from p = 5 (one slot at p = 5..8, five at
  // p = 16 with F = B = W) where this order has none at the same peak, 2p chunk activations.
  // Kept where it is strictly cheaper and every device stays within its cap.
  auto grid = grid_within(gp, v_block(gp.p, v_zb_grid_offsets(gp.p), "v-zb", gp.num_layers), costs,
                          opt.caps);
  if (grid && std::tie(grid->second.cost, grid->second.makespan) < best_key)
    return std::move(grid->first);
  return best;
}

}  // namespace

Schedule generate_v_zb(const GeneratorParams& gp) {
  check_p(gp, "v-zb");
  const CostTable costs = v_cost_table(gp);
  if (!gp.memo) return v_zb(gp, costs);
  // v-adaptive asks the same question under the same limit: share the answer, refusal included.
  struct Outcome {
    std::optional<Schedule> schedule;
    std::string file, key, message;
  };
  std::string key = fmt::format("v-zb/{}/{}/{}/{}", gp.p, gp.m, gp.num_layers, gp.memory_limit);
  for (double c : gp.memory_caps) key += fmt::format("/{}", c);
  append_cost_key(costs, &key);
  const auto held = gp.memo->get<Outcome>(key, [&] {
    Outcome o;
    try {
      o.schedule = v_zb(gp, costs);
    } catch (const ConfigError& e) {
      o.file = e.file();
      o.key = e.key();
      o.message = e.message();
    }
    return o;
  });
  if (!held->schedule) throw ConfigError(held->file, held->key, held->message);
  return *held->schedule;
}

}  // namespace pw
