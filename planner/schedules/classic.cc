// Classic schedules: GPipe, 1F1B (PipeDream-Flush), interleaved 1F1B (Megatron), the handcrafted
// zero-bubble schedules ZB-H1 and ZB-H2, and looped breadth-first.
#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/lowering.h"
#include "planner/schedules/generator.h"

namespace pw {

namespace {

Action act(ActionKind k, int stage, int mb) {
  return Action{k, static_cast<std::int16_t>(stage), mb};
}

Schedule empty_schedule(const char* name, Placement placement, int m) {
  Schedule s;
  s.name = name;
  s.placement = std::move(placement);
  s.num_microbatches = m;
  s.actions.resize(s.placement.num_devices);
  return s;
}

// Chunk count for multi-chunk schedules: `v` if given, otherwise 2.
int chunks_or_default(const GeneratorParams& gp, const char* name) {
  const int v = gp.v > 0 ? gp.v : 2;
  if (static_cast<long long>(v) * gp.p > 32767)
    throw ConfigError("", "--chunks",
                      fmt::format("{}: p*v = {} stages is too many", name, gp.p * v));
  return v;
}

Schedule gpipe(const GeneratorParams& gp) {
  Schedule s = empty_schedule("gpipe", linear_placement(gp.p, gp.num_layers), gp.m);
  for (int d = 0; d < gp.p; ++d) {
    for (int j = 0; j < gp.m; ++j) s.actions[d].push_back(act(ActionKind::kF, d, j));
    for (int j = 0; j < gp.m; ++j) s.actions[d].push_back(act(ActionKind::kBW, d, j));
  }
  return s;
}

// Device d runs min(p-d-1, m) warm-up forwards, then alternates one F and one full backward,
// then drains the remaining backwards.
Schedule one_f_one_b(const GeneratorParams& gp) {
  Schedule s = empty_schedule("1f1b", linear_placement(gp.p, gp.num_layers), gp.m);
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

// --- Interleaved 1F1B ------------------------------------------------------------------------

// Megatron's order of (microbatch, local chunk) pairs on every rank: microbatches go in groups of
// g; within a group all chunks are visited in turn, each for the whole group. The last group
// takes the remainder (m mod g microbatches, which must then be at least p).
std::vector<std::pair<int, int>> interleaved_table(int m, int v, int g) {
  std::vector<std::pair<int, int>> table;
  table.reserve(static_cast<std::size_t>(m) * v);
  for (int first = 0; first < m; first += g) {
    const int last = first + g >= m ? m : first + g;
    for (int c = 0; c < v; ++c)
      for (int mb = first; mb < last; ++mb) table.emplace_back(mb, c);
  }
  return table;
}

int interleaved_group_size(const GeneratorParams& gp) {
  const int g = gp.group_size > 0 ? gp.group_size : gp.p;
  const std::string key = gp.group_size > 0 ? "--group-size" : "--microbatches";
  if (g < gp.p || g > gp.m)
    throw ConfigError(
        "", key,
        fmt::format("interleaved needs p <= g <= m for the microbatch group size g "
                    "(p={}, m={}, g={}){}",
                    gp.p, gp.m, g, gp.group_size > 0 ? "" : "; m must be at least p"));
  const int rem = gp.m % g;
  if (rem != 0 && rem < gp.p)
    throw ConfigError("", key,
                      fmt::format("interleaved: m={} is not compatible with group size g={} (needs "
                                  "m mod g == 0 or m mod g >= p={}); use m a multiple of {} or "
                                  "pass --group-size {}",
                                  gp.m, g, gp.p, g, gp.m));
  return g;
}

// Megatron's interleaved schedule. Rank r runs 2(p-r-1) + (v-1)g warm-up forwards (capped at m*v;
// all of them when m == p), then alternates one forward and one backward, then drains.
Schedule interleaved(const GeneratorParams& gp) {
  const int p = gp.p, m = gp.m;
  const int v = chunks_or_default(gp, "interleaved");
  if (v < 2) throw ConfigError("", "--chunks", "interleaved needs at least 2 chunks (v=1 is 1f1b)");
  const int g = interleaved_group_size(gp);
  Schedule s = empty_schedule("interleaved", loop_placement(p, v, gp.num_layers), m);
  const auto table = interleaved_table(m, v, g);
  const int total = m * v;
  for (int r = 0; r < p; ++r) {
    auto fwd = [&](int k) { return act(ActionKind::kF, table[k].second * p + r, table[k].first); };
    auto bwd = [&](int k) {
      return act(ActionKind::kBW, (v - 1 - table[k].second) * p + r, table[k].first);
    };
    int warmup = 2 * (p - r - 1) + (v - 1) * g;
    if (m == p || warmup > total) warmup = total;
    auto& out = s.actions[r];
    for (int k = 0; k < warmup; ++k) out.push_back(fwd(k));
    for (int k = 0; k < total - warmup; ++k) {
      out.push_back(fwd(warmup + k));
      out.push_back(bwd(k));
    }
    for (int k = total - warmup; k < total; ++k) out.push_back(bwd(k));
  }
  return s;
}

Schedule zb_h1(const GeneratorParams& gp) { return zero_bubble_handcrafted("zb-h1", gp, false); }
Schedule zb_h2(const GeneratorParams& gp) { return zero_bubble_handcrafted("zb-h2", gp, true); }

// --- Looped breadth-first --------------------------------------------------------------------

// Stage s on device s mod p. Each device runs every microbatch through its first local stage,
// then its next one, and so on; the backward visits the local stages in reverse, each for all
// microbatches (latest first), so each stage's gradient is complete as early as possible.
Schedule breadth_first(const GeneratorParams& gp) {
  const int p = gp.p, m = gp.m;
  const int v = chunks_or_default(gp, "breadth-first");
  // One chunk per device is the linear placement (and reads back as such from PyTorch CSV).
  Placement pl = v == 1 ? linear_placement(p, gp.num_layers) : loop_placement(p, v, gp.num_layers);
  Schedule s = empty_schedule("breadth-first", std::move(pl), m);
  for (int d = 0; d < p; ++d) {
    auto& out = s.actions[d];
    for (int c = 0; c < v; ++c)
      for (int j = 0; j < m; ++j) out.push_back(act(ActionKind::kF, c * p + d, j));
    for (int c = v - 1; c >= 0; --c)
      for (int j = m - 1; j >= 0; --j) out.push_back(act(ActionKind::kBW, c * p + d, j));
  }
  return s;
}

}  // namespace

void register_classic_generators(GeneratorRegistry& r) {
  r.add({"gpipe", "GPipe: all forwards, then all backwards (peak m microbatches)", gpipe,
         GeneratorCaps{.holds_all_microbatches = true}});
  r.add({"1f1b", "1F1B / PipeDream-Flush (device s holds p-s microbatches)", one_f_one_b,
         GeneratorCaps{}});
  r.add({"interleaved",
         "Megatron interleaved 1F1B, v chunks per device (--chunks, default 2; m mod g == 0 or "
         ">= p)",
         interleaved, GeneratorCaps{.chunks = 2, .takes_v = true, .takes_group_size = true}});
  r.add({"zb-h1", "ZB-H1: split B/W, 1F1B memory, bubble (p-1)(F+B-W)", zb_h1,
         GeneratorCaps{.split_backward = true}});
  r.add({"zb-h2", "ZB-H2: split B/W, extra warm-up, bubble (p-1)(F+B-2W), (2p-1) M_B", zb_h2,
         GeneratorCaps{.split_backward = true}});
  r.add({"breadth-first",
         "Looped breadth-first: all microbatches through a local stage before the next (v chunks)",
         breadth_first,
         GeneratorCaps{.chunks = 2, .takes_v = true, .holds_all_microbatches = true}});
}

int interleaved_group_of(const Schedule& s) {
  const int p = s.placement.num_devices;
  const int m = s.num_microbatches;
  if (p < 2 || m < p || s.placement.num_pipelines() != 1 || static_cast<int>(s.actions.size()) != p)
    return 0;
  const int stages = s.placement.stages_per_pipeline();
  if (stages % p != 0 || stages / p < 2) return 0;
  // Megatron's stages lie in a loop: stage k on device k mod p.
  for (int k = 0; k < stages; ++k)
    if (s.placement.stages[k].device != k % p || s.placement.stages[k].index != k) return 0;
  const std::vector<std::vector<Action>> passes = compute_passes(s);  // a plan's transfers out
  // Megatron's table starts with the first chunk's group of g microbatches, and device 0's
  // warm-up (2(p-1) + (v-1)g forwards) runs at least that group before the next chunk's: g is
  // device 0's count of leading forwards of stage 0. One order to check, not one per g.
  const int g = leading_first_stage_forwards(s);
  if (g < p || g > m || (m % g != 0 && m % g < p)) return 0;  // Megatron refuses such a group
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  gp.v = stages / p;
  gp.group_size = g;
  return interleaved(gp).actions == passes ? g : 0;
}

// --- Zero-bubble handcrafted schedules -------------------------------------------------------

// Device d (0-based) runs `warmup(d)` forwards, then repeats B(k), W(k - lag(d)) when due, F(next),
// then drains the backwards and finally the deferred W passes. Deferring W on later devices lets
// input gradients travel upstream after B alone; the deferred W passes fill the tail bubble.
// ZB-H2 runs one more warm-up forward, so its cycle is B, W, F instead of F, B, W.
Schedule zero_bubble_handcrafted(const char* name, const GeneratorParams& gp, bool h2) {
  const int p = gp.p, m = gp.m;
  Schedule s = empty_schedule(name, linear_placement(p, gp.num_layers), m);
  for (int d = 0; d < p; ++d) {
    auto& out = s.actions[d];
    const int warmup = std::min(h2 ? 2 * (p - d) - 1 : p - d - 1, m);
    const int lag = h2 ? 2 * d : d;
    int f = 0, b = 0, w = 0;
    for (; f < warmup; ++f) out.push_back(act(ActionKind::kF, d, f));
    while (b < m) {
      if (!h2 && f < m) out.push_back(act(ActionKind::kF, d, f++));
      out.push_back(act(ActionKind::kB, d, b++));
      if (b - 1 - lag >= 0 && w < b - lag) out.push_back(act(ActionKind::kW, d, w++));
      if (h2 && f < m) out.push_back(act(ActionKind::kF, d, f++));
    }
    while (w < m) out.push_back(act(ActionKind::kW, d, w++));
  }
  return s;
}

}  // namespace pw
