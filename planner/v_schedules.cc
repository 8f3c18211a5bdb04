#include "planner/v_schedules.h"

#include <fmt/format.h>

#include "core/error.h"
#include "planner/adaptive.h"
#include "planner/memory_family.h"

namespace pw {
namespace {

constexpr int kVPeriod = 6;

void check_p(const GeneratorParams& gp, const char* name) {
  if (gp.p < 2)
    throw ConfigError("", "--pp", fmt::format("{} needs at least 2 pipeline devices", name));
}

Schedule v_schedule_from(const GeneratorParams& gp, const VOffsets& o, const char* name) {
  Schedule s = block_to_schedule(v_block(gp.p, o, name, gp.num_layers), gp.m);
  squeeze_fill_w(s, v_cost_table(gp));
  return s;
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
  VOffsets o;
  for (int i = 0; i < p; ++i) {
    o.F.push_back(i);
    o.f.push_back(2 * p - i - 1);
    o.B.push_back(2 * p + i);
    o.b.push_back(4 * p - i - 1);
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

Schedule generate_v_zb(const GeneratorParams& gp) {
  check_p(gp, "v-zb");
  // The zero-bubble V at 1F1B memory comes from the greedy scheduler on the V placement (the
  // block-offset family searched by v-adaptive does not reach zero bubble; see docs).
  Schedule s = generate_zb_v(gp);
  s.name = "v-zb";
  return s;
}

}  // namespace pw
