#include "core/cost_table.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pw {

void check_clock_headroom(double passes, const UniformCosts& c, const std::string& flag) {
  const double per_pass = static_cast<double>(c.f) + static_cast<double>(c.b) +
                          static_cast<double>(c.w) + static_cast<double>(c.r) +
                          static_cast<double>(c.comm) + static_cast<double>(c.overlap);
  if (passes * per_pass > 4e18)
    throw ConfigError("", flag,
                      fmt::format("{:.3g} passes of these costs exceed the simulator's 64-bit "
                                  "picosecond clock (4e18 ps, about 46 days); expected smaller "
                                  "costs or fewer microbatches",
                                  passes));
}

CostTable make_uniform_cost_table(const Placement& placement, const UniformCosts& c,
                                  bool with_recompute) {
  CostTable t;
  t.num_stages = placement.num_stages();
  t.duration.assign(static_cast<std::size_t>(t.num_stages) * kNumActionKinds, 0);
  t.mem_delta.assign(static_cast<std::size_t>(t.num_stages) * kNumActionKinds, 0.0);
  t.comm.assign(t.num_stages, c.comm);
  for (int s = 0; s < t.num_stages; ++s) {
    const double w = placement.activation_weight(s);
    t.time(s, ActionKind::kF) = c.f;
    t.time(s, ActionKind::kB) = c.b;
    t.time(s, ActionKind::kW) = c.w;
    t.time(s, ActionKind::kBW) = c.b + c.w;
    t.time(s, ActionKind::kR) = c.r;
    t.time(s, ActionKind::kOverlapFB) = c.overlap > 0 ? c.overlap : c.f + c.b + c.w;
    const double keep = with_recompute ? c.recompute_keep : 1.0;
    t.mem(s, ActionKind::kF) = w * keep;
    t.mem(s, ActionKind::kR) = with_recompute ? w * (1.0 - keep) : 0.0;
    t.mem(s, ActionKind::kB) = -w * (1.0 - c.mw_over_mb);
    t.mem(s, ActionKind::kW) = -w * c.mw_over_mb;
    t.mem(s, ActionKind::kBW) = -w;
    // OVERLAP_F_B allocates the forward's activations and frees the backward's; net zero for
    // equal-weight chunks. Its allocation is modelled at the start, the release at the end.
    t.mem(s, ActionKind::kOverlapFB) = 0.0;
  }
  return t;
}

void append_cost_key(const CostTable& table, std::string* key) {
  auto put = [key](const void* data, std::size_t bytes) {
    key->append(static_cast<const char*>(data), bytes);
  };
  put(&table.num_stages, sizeof table.num_stages);
  const char pairs = table.overlap_pairs ? 1 : 0;
  put(&pairs, 1);
  put(table.duration.data(), table.duration.size() * sizeof(TimePs));
  put(table.mem_delta.data(), table.mem_delta.size() * sizeof(double));
  put(table.comm.data(), table.comm.size() * sizeof(TimePs));
}

}  // namespace pw
