#pragma once
/// The slot grid of the authors' V method (planner/schedules/v_grid.h: one row per device, one
/// character per slot) and its two column sweeps, each able to jump over its steady state: the
/// squeeze (every pass as early as its device and its dependency allow, each device's order
/// kept) and the greedy bubble fill. Internal to v_grid.cc (and its tests through
/// detail::v_grid_schedule_stepped).
#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace pw::vgrid {

constexpr int kPeriod = 6;
constexpr char kIds[] = "FfBbWw";  // the pattern's order

using Grid = std::vector<std::string>;  // one row per device, one char per slot (' ': idle)

// A step of the method refuses the block (their assertions and checks).
struct Reject {};

inline void require(bool ok) {
  if (!ok) throw Reject{};
}

// A slot's pass kind as the pattern's index (-1: idle), by table.
inline constexpr std::array<signed char, 256> kId = [] {
  std::array<signed char, 256> t{};
  t.fill(-1);
  for (int v = 0; v < 6; ++v) t[static_cast<unsigned char>(kIds[v])] = static_cast<signed char>(v);
  return t;
}();

inline int id_of(char c) { return kId[static_cast<unsigned char>(c)]; }

inline bool is_fwd(char c) { return c == 'F' || c == 'f'; }
inline bool is_w(char c) { return c == 'W' || c == 'w'; }
// The passes that travel down the V (device i-1 to i) and up it (i+1 to i).
inline bool is_down(char c) { return c == 'F' || c == 'B'; }
inline bool is_up(char c) { return c == 'f' || c == 'b'; }

// The memory rule as a table: +1 at F/f, -1 at W/w, 0 elsewhere (read once per slot).
inline constexpr std::array<signed char, 256> kMemDelta = [] {
  std::array<signed char, 256> t{};
  t['F'] = t['f'] = 1;
  t['W'] = t['w'] = -1;
  return t;
}();

inline std::size_t grid_len(const Grid& g) {
  for (const std::string& r : g) require(r.size() == g[0].size());
  return g.empty() ? 0 : g[0].size();
}

/// Every pass as early as its device's previous pass and its dependency allow, in the same
/// order per device; `jump`: skip the steady state (v_grid_steps.cc).
Grid squeeze(const Grid& g, int m, bool jump);

/// Slot by slot, a bubble takes the first later pass of its device that can move there
/// without breaking a dependency or raising the device's peak. Returns the grid's peak
/// afterwards; `jump`: skip the steady state.
int reorder_greedily(Grid& g, int m, bool jump);

}  // namespace pw::vgrid
