// Classic schedules: GPipe, 1F1B (PipeDream-Flush). Further classic generators are added here.
#include <algorithm>

#include "core/error.h"
#include "planner/generator.h"

namespace pw {
namespace {

Action act(ActionKind k, int stage, int mb) {
  return Action{k, static_cast<std::int16_t>(stage), mb};
}

Schedule gpipe(const GeneratorParams& gp) {
  Schedule s;
  s.name = "gpipe";
  s.placement = linear_placement(gp.p, gp.num_layers);
  s.num_microbatches = gp.m;
  s.actions.resize(gp.p);
  for (int d = 0; d < gp.p; ++d) {
    for (int j = 0; j < gp.m; ++j) s.actions[d].push_back(act(ActionKind::kF, d, j));
    for (int j = 0; j < gp.m; ++j) s.actions[d].push_back(act(ActionKind::kBW, d, j));
  }
  return s;
}

// Device d runs min(p-d-1, m) warm-up forwards, then alternates one F and one full backward,
// then drains the remaining backwards.
Schedule one_f_one_b(const GeneratorParams& gp) {
  Schedule s;
  s.name = "1f1b";
  s.placement = linear_placement(gp.p, gp.num_layers);
  s.num_microbatches = gp.m;
  s.actions.resize(gp.p);
  for (int d = 0; d < gp.p; ++d) {
    auto& out = s.actions[d];
    const int warmup = std::min(gp.p - d - 1, gp.m);
    int f = 0, b = 0;
    for (; f < warmup; ++f) out.push_back(act(ActionKind::kF, d, f));
    while (f < gp.m) {
      out.push_back(act(ActionKind::kF, d, f++));
      out.push_back(act(ActionKind::kBW, d, b++));
    }
    while (b < gp.m) out.push_back(act(ActionKind::kBW, d, b++));
  }
  return s;
}

}  // namespace

void register_classic_generators(GeneratorRegistry& r) {
  r.add({"gpipe", "GPipe: all forwards, then all backwards (peak m microbatches)", gpipe});
  r.add({"1f1b", "1F1B / PipeDream-Flush (device s holds p-s microbatches)", one_f_one_b});
}

}  // namespace pw
