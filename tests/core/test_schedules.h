#pragma once
// Hand-built schedules for the core tests (core links no generator).
#include <algorithm>

#include "core/schedule.h"

namespace pw::testing {

/// 1F1B on p devices: min(p-d-1, m) warm-up forwards, then F/BW pairs, then the remaining BW.
inline Schedule hand_1f1b(int p, int m, bool split = false) {
  Schedule s;
  s.name = split ? "1f1b-split" : "1f1b";
  s.placement = linear_placement(p);
  s.num_microbatches = m;
  s.actions.resize(p);
  auto st = [](int d) { return static_cast<std::int16_t>(d); };
  for (int d = 0; d < p; ++d) {
    auto& out = s.actions[d];
    auto back = [&](int b) {
      if (!split) return out.push_back({ActionKind::kBW, st(d), b});
      out.push_back({ActionKind::kB, st(d), b});
      out.push_back({ActionKind::kW, st(d), b});
    };
    const int warm = std::min(p - d - 1, m);
    int f = 0, b = 0;
    for (; f < warm; ++f) out.push_back({ActionKind::kF, st(d), f});
    while (f < m) {
      out.push_back({ActionKind::kF, st(d), f++});
      back(b++);
    }
    while (b < m) back(b++);
  }
  return s;
}

}  // namespace pw::testing
