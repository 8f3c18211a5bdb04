#include "planner/schedules/v_grid.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "planner/schedules/v_schedules.h"

namespace pw {
namespace {

constexpr int kPeriod = 6;
constexpr char kIds[] = "FfBbWw";  // the pattern's order

using Grid = std::vector<std::string>;  // one row per device, one char per slot (' ': idle)

// A step of the method refuses the block (their assertions and checks).
struct Reject {};

void require(bool ok) {
  if (!ok) throw Reject{};
}

// A slot's pass kind as the pattern's index (-1: idle), by table.
constexpr std::array<signed char, 256> kId = [] {
  std::array<signed char, 256> t{};
  t.fill(-1);
  for (int v = 0; v < 6; ++v) t[static_cast<unsigned char>(kIds[v])] = static_cast<signed char>(v);
  return t;
}();

int id_of(char c) { return kId[static_cast<unsigned char>(c)]; }

bool is_fwd(char c) { return c == 'F' || c == 'f'; }
bool is_w(char c) { return c == 'W' || c == 'w'; }
// The passes that travel down the V (device i-1 to i) and up it (i+1 to i).
bool is_down(char c) { return c == 'F' || c == 'B'; }
bool is_up(char c) { return c == 'f' || c == 'b'; }

// Per (microbatch, device): the slot of each pass, -1 until placed.
using Index = std::vector<std::array<int, 6>>;

// The memory rule as a table: +1 at F/f, -1 at W/w, 0 elsewhere (read once per slot).
constexpr std::array<signed char, 256> kMemDelta = [] {
  std::array<signed char, 256> t{};
  t['F'] = t['f'] = 1;
  t['W'] = t['w'] = -1;
  return t;
}();

int peak_of(const std::string& row) {
  int peak = 0, mem = 0;
  for (char c : row) {
    mem += kMemDelta[static_cast<unsigned char>(c)];
    peak = std::max(peak, mem);
  }
  return peak;
}

int peak_mem(const Grid& g) {
  int peak = 0;
  for (const std::string& r : g) peak = std::max(peak, peak_of(r));
  return peak;
}

std::size_t grid_len(const Grid& g) {
  for (const std::string& r : g) require(r.size() == g[0].size());
  return g.empty() ? 0 : g[0].size();
}

// Python's s[i] for a possibly negative i.
char& at(std::string& row, long long i) {
  if (i < 0) i += static_cast<long long>(row.size());
  require(i >= 0 && i < static_cast<long long>(row.size()));
  return row[static_cast<std::size_t>(i)];
}

Grid repeat(int p, int m, const VGridPattern& pattern) {
  Grid g(p);
  const int len = 4 * p + m + 1;
  for (int i = 0; i < p; ++i) {
    std::string unit(kPeriod, ' ');
    for (int v = 0; v < 6; ++v) unit[pattern[i][v]] = kIds[v];
    g[i].reserve(static_cast<std::size_t>(len) * kPeriod);
    for (int k = 0; k < len; ++k) g[i] += unit;
  }
  return g;
}

void clear_from(std::string& row, long long pos, int dir) {
  while (pos >= 0 && pos < static_cast<long long>(row.size())) {
    row[static_cast<std::size_t>(pos)] = ' ';
    pos += dir * kPeriod;
  }
}

// Keeps, of every pass's repetitions, the m that follow the chain from device 0's first F (each
// pass the first of its kind after the previous one of the chain), and clears the rest.
void clear_invalid(Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  long long index = kPeriod;
  for (char id : std::string("FfBb")) {
    for (int k = 0; k < p; ++k) {
      const int i = is_down(id) ? k : p - 1 - k;
      for (int j = 0; j < kPeriod; ++j) {
        if (at(g[i], index) == id) {
          clear_from(g[i], index - kPeriod, -1);
          clear_from(g[i], index + static_cast<long long>(kPeriod) * m, +1);
          ++index;
          if (id == 'B' || id == 'b') {
            const char w = id == 'B' ? 'W' : 'w';
            for (int q = 0; q < kPeriod; ++q) {
              if (at(g[i], index + q) == w) {
                clear_from(g[i], index + q - kPeriod, -1);
                clear_from(g[i], index + q + static_cast<long long>(kPeriod) * m, +1);
                break;
              }
            }
          }
          break;
        }
        ++index;
      }
    }
  }
}

// Every pass as early as its device's previous pass and its dependency allow, in the same
// order per device (slot by slot: down-going passes top to bottom, then up-going bottom to top).
Grid squeeze(const Grid& g, int m, bool jump) {
  const int p = static_cast<int>(g.size());
  const std::size_t len = grid_len(g);
  Grid out(p, std::string(len, ' '));
  // Per (microbatch, device, kind): the pass's new slot (-1 until placed); per (device, kind):
  // passes placed; per device: its next free slot and, per kind, where its dependency sits.
  // Kept per thread: no allocation per call.
  thread_local std::vector<int> idx, cnt, next, dep_off;
  thread_local std::vector<const char*> row;
  thread_local std::vector<char*> orow;
  idx.assign(static_cast<std::size_t>(p) * m * kPeriod, -1);
  cnt.assign(static_cast<std::size_t>(p) * kPeriod, 0);
  next.assign(p, 0);
  dep_off.resize(static_cast<std::size_t>(p) * kPeriod);
  row.resize(p);
  orow.resize(p);
  // Passes lie before the rows' last pass: the columns after it hold nothing to place.
  std::size_t end = 0;
  for (int i = 0; i < p; ++i) {
    row[i] = g[i].data(), orow[i] = out[i].data();
    const std::size_t last = g[i].find_last_not_of(' ');
    if (last != std::string::npos) end = std::max(end, last + 1);
  }
  // Per kind and device position (0 inner, 1 first, 2 last): where the pass's dependency sits
  // relative to its own (microbatch, device) cell, or kNone. At the ends of the V the
  // dependency is the same device's earlier pass (device 0: f before B; device p-1: F before f,
  // B before b), so the slot is the device's next free one either way. W and w wait for nothing
  // here (correct() checks them at the end).
  constexpr int kNone = 1 << 20;
  static constexpr int kDep[6][3] = {
      {-kPeriod + 0, kNone, -kPeriod + 0},  // F: device i-1's F (device 0: none)
      {kPeriod + 1, kPeriod + 1, 0},        // f: device i+1's f (device p-1: its own F)
      {-kPeriod + 2, 1, -kPeriod + 2},      // B: device i-1's B (device 0: its own f)
      {kPeriod + 3, kPeriod + 3, 2},        // b: device i+1's b (device p-1: its own B)
      {kNone, kNone, kNone},                // W
      {kNone, kNone, kNone}};               // w
  for (int i = 0; i < p; ++i)
    for (int v = 0; v < kPeriod; ++v)
      dep_off[i * kPeriod + v] = kDep[v][(i == 0) + 2 * (i == p - 1)];
  // Raw pointers: the lambda below then keeps them in registers.
  int* const idx_at = idx.data();
  int* const cnt_at = cnt.data();
  int* const next_at = next.data();
  const int* const off_at = dep_off.data();
  char* const* const out_at = orow.data();
  const char* const* const in_at = row.data();
  int new_len = 0;
  const int ilen = static_cast<int>(len);
  // For the steady-state jump below: per (microbatch, device, kind) the input column the pass
  // came from, and per (device, input column) the slot it was given.
  thread_local std::vector<int> col, oslot;
  col.resize(idx.size());
  oslot.resize(static_cast<std::size_t>(p) * len);
  int* const col_at = col.data();
  int* const oslot_at = oslot.data();
  auto place = [&](int i, int v, char c, int j) {
    const int n = cnt_at[i * kPeriod + v];
    require(n < m);
    const std::size_t cell = (static_cast<std::size_t>(n) * p + i) * kPeriod;
    int* here = idx_at + cell;
    const int off = off_at[i * kPeriod + v];
    const int dep = off == kNone ? -1 : here[off];
    require(off == kNone || dep >= 0);
    const int slot = std::max(dep + 1, next_at[i]);
    require(slot < ilen);
    out_at[i][slot] = c;
    cnt_at[i * kPeriod + v] = n + 1;
    here[v] = slot;
    col_at[cell + v] = j;
    oslot_at[static_cast<std::size_t>(i) * len + j] = slot;
    next_at[i] = slot + 1;
    new_len = std::max(new_len, slot + 1);
  };
  // Steady state. Column x is periodic when every device holds a pass there, the same as six
  // columns earlier; run[x] counts the periodic columns from x on. Where a window of six
  // periodic columns holds each of the six kinds once on every device, every later window of
  // the run is that window again with each pass one microbatch further. Say the windows ending
  // at column j (a multiple of six) have each given every pass the slot of its copy one window
  // earlier plus S, for `streak` windows in a row, and every pass of the last window depends on
  // a pass of those windows (or on none). Then the window from j does too, by induction over its
  // passes in the loop's order: a pass's slot is the larger of its device's next free slot (its
  // previous pass's, which moved by S) and its dependency's (the copy one window on of the
  // dependency's copy's own dependency, inside the windows that moved by S, or earlier in this
  // window). So do all later windows of the run: jump over them, each pass S slots after its copy
  // one window earlier, as long as every kind has microbatches left and every slot fits the row
  // (else the plain loop meets the same refusal at the same pass).
  thread_local std::vector<unsigned char> periodic;
  thread_local std::vector<int> run;
  periodic.assign(end, 1);
  run.assign(len + 1, 0);
  unsigned char* const per = periodic.data();
  for (int i = 0; i < p; ++i) {
    const char* r = in_at[i];
    for (std::size_t x = kPeriod; x < end; ++x)
      per[x] &= static_cast<unsigned char>((r[x] == r[x - kPeriod]) & (r[x] != ' '));
  }
  for (std::size_t x = end; x-- > kPeriod;) run[x] = per[x] ? run[x + 1] + 1 : 0;
  int streak = 0, shift = 0;
  bool jumped = !jump;  // once: the cells the checks read are not kept for the skipped windows
  // Whether the window [j-6, j) moved every pass by one shift from its copy, and by how much.
  auto window_shift = [&](std::size_t j, int& s) {
    if (j < 2 * kPeriod || run[j - kPeriod] < kPeriod) return false;
    s = oslot_at[j - kPeriod] - oslot_at[j - 2 * kPeriod];
    for (int i = 0; i < p; ++i) {
      const int* o = oslot_at + static_cast<std::size_t>(i) * len;
      unsigned kinds = 0;
      for (std::size_t x = j - kPeriod; x < j; ++x) {
        kinds |= 1u << id_of(in_at[i][x]);
        if (o[x] - o[x - kPeriod] != s) return false;
      }
      if (kinds != (1u << kPeriod) - 1) return false;
    }
    return true;
  };
  thread_local std::vector<int> up;  // a column's up-going passes: device * 8 + kind
  up.resize(p);
  int* const up_at = up.data();
  for (std::size_t j = 0; j < end; ++j) {
    if (j % kPeriod == 0 && !jumped) {
      int s = 0;
      if (!window_shift(j, s))
        streak = 0;
      else
        streak = streak > 0 && s == shift ? streak + 1 : 1, shift = s;
      if (streak > 0) {
        // The last window's dependencies, the microbatches left and the row's room.
        bool inside = true;
        int most = 0, last_slot = 0;
        for (int i = 0; i < p && inside; ++i)
          for (std::size_t x = j - kPeriod; x < j && inside; ++x) {
            const int v = id_of(in_at[i][x]);
            const int n = cnt_at[i * kPeriod + v] - 1;
            most = std::max(most, n + 1);
            last_slot = std::max(last_slot, oslot_at[static_cast<std::size_t>(i) * len + x]);
            const int off = off_at[i * kPeriod + v];
            if (off == kNone) continue;
            const std::size_t cell = (static_cast<std::size_t>(n) * p + i) * kPeriod;
            inside = col_at[static_cast<std::ptrdiff_t>(cell) + off] >=
                     static_cast<int>(j) - kPeriod * streak;
          }
        int R = run[j] / kPeriod;
        R = std::min(R, m - most);
        if (shift > 0) R = std::min(R, (ilen - 1 - last_slot) / shift);
        if (inside && shift > 0 && R > 0) {
          // Each skipped pass's character and slot (later passes read it as a dependency).
          for (int i = 0; i < p; ++i) {
            const int* o = oslot_at + static_cast<std::size_t>(i) * len;
            char* const orow_i = out_at[i];
            for (std::size_t x = j - kPeriod; x < j; ++x) {
              const int v = id_of(in_at[i][x]);
              const char c = kIds[v];
              int slot = o[x];
              int* cell = idx_at +
                          (static_cast<std::size_t>(cnt_at[i * kPeriod + v]) * p + i) * kPeriod + v;
              const std::size_t step = static_cast<std::size_t>(p) * kPeriod;
              for (int r = 0; r < R; ++r, cell += step) {
                slot += shift;
                orow_i[slot] = c;
                *cell = slot;
              }
            }
            for (int v = 0; v < kPeriod; ++v) cnt_at[i * kPeriod + v] += R;
            next_at[i] += R * shift;
          }
          new_len = std::max(new_len, last_slot + R * shift + 1);
          j += static_cast<std::size_t>(R) * kPeriod;
          jumped = true;
          if (j >= end) break;
        }
      }
    }
    // Down-going passes (and W) top to bottom, then up-going ones (and w) bottom to top.
    int nu = 0;
    for (int i = 0; i < p; ++i) {
      const int v = id_of(in_at[i][j]);
      if (v < 0) continue;
      if ((v & 1) == 0)
        place(i, v, kIds[v], static_cast<int>(j));
      else
        up_at[nu++] = i * 8 + v;
    }
    for (int k = nu - 1; k >= 0; --k)
      place(up_at[k] >> 3, up_at[k] & 7, kIds[up_at[k] & 7], static_cast<int>(j));
  }
  for (std::string& r : out) r.resize(static_cast<std::size_t>(new_len));
  return out;
}

// Re-lays each device's passes before its first b: up to 2(p-1-i) slots of F, then i+1 pairs
// (F, f), then (B, W, f-or-F) triples, with #f = min(i+1, peak/2) and #F = peak - #f.
// `grid_peak` is peak_mem(g), known to the caller.
void warmup(Grid& g, int m, int grid_peak) {
  const int p = static_cast<int>(g.size());
  const int peak = std::min(grid_peak, 2 * p);
  std::vector<int> cnt_f(p), cnt_ff(p);
  for (int i = 0; i < p; ++i) {
    cnt_ff[i] = std::min({i + 1, peak / 2, m});
    cnt_f[i] = std::min(peak - cnt_ff[i], m);
  }
  for (int i = 0; i < p; ++i) {
    std::string& row = g[i];
    int c_f = 0, c_ff = 0, c_b = 0, c_w = 0;
    for (std::size_t j = 0; j < row.size(); ++j) {
      const char c = row[j];
      if (c == 'b') break;
      if (c == 'F')
        ++c_f;
      else if (c == 'f')
        ++c_ff;
      else if (c == 'B')
        ++c_b;
      else if (c == 'W')
        ++c_w;
      else
        require(c == ' ');
      row[j] = ' ';
    }
    long long j = i;
    int u_f = 0, u_ff = 0, u_b = 0, u_w = 0;
    for (int k = 0; k < 2 * (p - 1 - i); ++k) {
      if (u_f < cnt_f[i] && u_f < c_f) at(row, j) = 'F', ++u_f;
      ++j;
    }
    for (int k = 0; k < i + 1; ++k) {
      if (u_f < cnt_f[i] && u_f < c_f) at(row, j) = 'F', ++u_f;
      ++j;
      if (u_ff < cnt_ff[i] && u_ff < c_ff) at(row, j) = 'f', ++u_ff;
      ++j;
    }
    while (u_f < c_f || u_ff < c_ff || u_b < c_b || u_w < c_w) {
      if (u_b < c_b) at(row, j) = 'B', ++u_b;
      ++j;
      if (u_w < c_w) at(row, j) = 'W', ++u_w;
      ++j;
      if (u_ff < c_ff) {
        require(u_ff < u_f);
        at(row, j) = 'f', ++u_ff;
      } else if (u_f < c_f) {
        at(row, j) = 'F', ++u_f;
      }
      ++j;
    }
  }
}

void remove_redundancy(Grid& g, int m) {
  for (std::string& row : g) {
    std::array<int, 6> cnt{};
    for (char& c : row) {
      const int v = id_of(c);
      if (v < 0) continue;
      if (cnt[v] >= m)
        c = ' ';
      else
        ++cnt[v];
    }
  }
}

// With few microbatches: moves each device's first weight passes to its end while it stays
// under the peak, so the warm-up can run more forwards.
void release_w(Grid& g, int peak) {
  const int p = static_cast<int>(g.size());
  const std::size_t len = grid_len(g);
  std::vector<int> all(p);
  for (int i = 0; i < p; ++i) all[i] = peak_of(g[i]);
  const int min_peak = *std::min_element(all.begin(), all.end());
  for (int i = 0; i < p; ++i) {
    int cnt = 0;
    std::string pad(static_cast<std::size_t>(std::max(0, peak - min_peak)), ' ');
    for (std::size_t j = 0; j < len; ++j) {
      if (all[i] + cnt >= peak) break;
      if (is_w(g[i][j])) {
        require(cnt < static_cast<int>(pad.size()));
        pad[static_cast<std::size_t>(cnt)] = g[i][j];
        g[i][j] = ' ';
        ++cnt;
      }
    }
    g[i] += pad;
  }
}

// Re-lays the cool-down: after the last f, (peak+1)/2 b's and min(i+1, peak - #b) B's at fixed
// slots, the trailing weight passes re-added in the free slots after the last weight pass.
// `grid_peak` is peak_mem(g), known to the caller.
Grid cooldown(Grid g, int m, int grid_peak, bool jump) {
  const int p = static_cast<int>(g.size());
  const int peak = grid_peak;
  require(peak <= 2 * p);
  const int max_bb = std::min((peak + 1) / 2, m);
  const int max_b = std::min(peak - max_bb, m);
  long long start = -1;
  for (int i = 0; i < p; ++i) {
    std::string& row = g[i];
    int c_b = 0, c_bb = 0, c_w = 0, c_ww = 0;
    long long last_ff = -1;
    for (long long j = static_cast<long long>(row.size()) - 1; j >= 0; --j) {
      char& c = row[static_cast<std::size_t>(j)];
      if (c == 'f' && last_ff == -1) last_ff = j;
      if (c == 'B' && c_b < i + 1 && c_b < max_b) {
        c = ' ';
        ++c_b;
      }
      if (c == 'b' && c_bb < max_bb) {
        c = ' ';
        ++c_bb;
      }
    }
    for (long long j = static_cast<long long>(row.size()) - 1; j >= 0; --j) {
      if (c_w >= c_b && c_ww >= c_bb && c_w + c_ww >= peak) break;
      char& c = row[static_cast<std::size_t>(j)];
      if (c == 'W') {
        c = ' ';
        ++c_w;
      }
      if (c == 'w') {
        c = ' ';
        ++c_ww;
      }
    }
    if (i == 0) start = last_ff;
    for (int k = 0; k < c_bb; ++k) {
      char& c = at(row, start - i + 2 * p - 2 * k);
      require(c == ' ');
      c = 'b';
    }
    for (int k = 0; k < c_b; ++k) at(row, start + 1 + i - 2 * k) = 'B';
  }
  std::size_t max_len = 0;
  for (int i = 0; i < p; ++i) {
    std::string& row = g[i];
    int c_w = 0, c_ww = 0;
    long long last_w = -1;
    for (long long j = static_cast<long long>(row.size()) - 1; j >= 0; --j)
      if (is_w(row[static_cast<std::size_t>(j)])) {
        last_w = j;
        break;
      }
    for (std::size_t j = 0; j < row.size(); ++j) {
      const char c = row[j];
      if (c == 'B')
        ++c_w;
      else if (c == 'b')
        ++c_ww;
      else if (c == 'W')
        --c_w;
      else if (c == 'w')
        --c_ww;
      if (c == ' ' && static_cast<long long>(j) > last_w) {
        if (c_w > 0) {
          row[j] = 'W';
          --c_w;
        } else if (c_ww > 0) {
          row[j] = 'w';
          --c_ww;
        }
      }
    }
    row.append(static_cast<std::size_t>(std::max(0, c_w)), 'W');
    row.append(static_cast<std::size_t>(std::max(0, c_ww)), 'w');
    max_len = std::max(max_len, row.size());
  }
  for (std::string& row : g) row.resize(max_len, ' ');
  return squeeze(g, m, jump);
}

// Slot by slot, a bubble takes the first later pass of its device that can move there without
// breaking a dependency or raising the device's peak. Returns the grid's peak afterwards.
int reorder_greedily(Grid& g, int m, bool jump) {
  const int p = static_cast<int>(g.size());
  const std::size_t len = grid_len(g);
  // Per device and kind: how many of its passes lie after the slot being filled (a kind with
  // none left is no candidate: bit v of avail[i] is set while some are), and over all kinds (a
  // device with none left is done). Flat per-thread arrays, read through raw pointers.
  thread_local std::vector<int> later, cnt, idx;
  thread_local std::vector<int> left, mem;
  thread_local std::vector<unsigned> avail;
  later.assign(static_cast<std::size_t>(p) * kPeriod, 0);
  cnt.assign(static_cast<std::size_t>(p) * kPeriod, 0);
  idx.assign(static_cast<std::size_t>(p) * m * kPeriod, -1);
  left.assign(p, 0);
  mem.assign(p, 0);
  avail.assign(p, 0);
  int* const later_at = later.data();
  int* const cnt_at = cnt.data();
  int* const idx_at = idx.data();
  int peak = 0;  // the grid's, found by the same pass over each row (peak_of's sum)
  for (int i = 0; i < p; ++i) {
    int row_mem = 0;
    for (std::size_t j = 0; j < len; ++j) {
      const char c = g[i][j];
      row_mem += kMemDelta[static_cast<unsigned char>(c)];
      peak = std::max(peak, row_mem);
      if (const int v = id_of(c); v >= 0) ++later_at[i * kPeriod + v], ++left[i];
    }
    for (int v = 0; v < kPeriod; ++v)
      avail[i] |= static_cast<unsigned>(later_at[i * kPeriod + v] > 0) << v;
  }
  int peak_after = 0;  // the reordered grid's peak: memory only changes where a pass is taken
  // Takes pass kind v (char c) of device i at slot j: its microbatch is the next of its kind.
  auto take_pass = [&](int i, int v, char c, std::size_t j) {
    const int n = cnt_at[i * kPeriod + v];
    require(n < m);
    cnt_at[i * kPeriod + v] = n + 1;
    idx_at[(static_cast<std::size_t>(n) * p + i) * kPeriod + v] = static_cast<int>(j);
    if (--later_at[i * kPeriod + v] == 0) avail[i] &= ~(1u << v);
    --left[i];
    mem[i] += kMemDelta[static_cast<unsigned char>(c)];
    peak_after = std::max(peak_after, mem[i]);
  };
  // The slot of pass kind v of microbatch n on device d (-1: not yet taken).
  auto slot_of = [&](int n, int d, int v) {
    return n < m ? idx_at[(static_cast<std::size_t>(n) * p + d) * kPeriod + v] : -1;
  };
  // Steady state. The fill at column j depends only on each row from j on, each device's
  // memory, the passes taken of each kind (only their differences: a dependency is met when its
  // pass was taken at an earlier column, which the counts say) and which kinds have passes left.
  // At every sixth column the rows from there (kHorizon slots), counts and memories are kept.
  // Six columns later, if every row from there equals the kept one over the part either fill had
  // changed, the rows beyond it repeat every six columns as far as the fill has read plus
  // 6R, every memory is the same, every count one more and every kind has more than R passes
  // left, then the next six columns fill as the last six did, one microbatch on, and so on for R
  // windows (by induction over the windows, each reading six columns further than the one
  // before): they are copied, the changed part of the rows moves 6R columns on, and the fill goes
  // on from there. Once: the kept state is not kept for the copied windows.
  constexpr int kHorizon = 64;
  thread_local std::vector<unsigned char> same6;
  thread_local std::vector<int> run6;
  same6.assign(len, 1);
  run6.assign(len + 1, 0);
  for (int i = 0; i < p; ++i) {
    const char* r = g[i].data();
    for (std::size_t x = kPeriod; x < len; ++x)
      same6[x] &= static_cast<unsigned char>(r[x] == r[x - kPeriod]);
  }
  for (std::size_t x = len; x-- > kPeriod;) run6[x] = same6[x] ? run6[x + 1] + 1 : 0;
  thread_local std::string kept, moved;
  thread_local std::vector<int> kept_cnt, kept_mem;
  kept.resize(static_cast<std::size_t>(p) * kHorizon);
  long long kept_j = -1, kept_reach = 0;
  long long reach = 0, read = 0;  // past the farthest slot the fill changed; the farthest it read
  bool jumped = !jump;
  auto try_jump = [&](std::size_t j) -> std::size_t {
    const long long J = static_cast<long long>(j);
    const long long y = std::max({reach - J, kept_reach - kept_j, 0LL});
    if (y > kHorizon || J + y > static_cast<long long>(len)) return 0;
    for (int i = 0; i < p; ++i) {
      if (mem[i] != kept_mem[i]) return 0;
      for (int v = 0; v < kPeriod; ++v)
        if (cnt_at[i * kPeriod + v] - kept_cnt[i * kPeriod + v] != 1) return 0;
      if (std::char_traits<char>::compare(g[i].data() + j, kept.data() + i * kHorizon,
                                          static_cast<std::size_t>(y)) != 0)
        return 0;
    }
    long long R = m;
    for (int i = 0; i < p; ++i)
      for (int v = 0; v < kPeriod; ++v)
        R = std::min({R, static_cast<long long>(later_at[i * kPeriod + v]) - 1,
                      static_cast<long long>(m - cnt_at[i * kPeriod + v])});
    const long long from = J + y;
    if (from >= static_cast<long long>(len)) return 0;
    R = std::min(R, (from + run6[static_cast<std::size_t>(from)] - 1 - read) / kPeriod);
    if (R < 1) return 0;
    const std::size_t span = static_cast<std::size_t>(R) * kPeriod;
    const std::size_t changed = static_cast<std::size_t>(std::max(0LL, reach - J));
    for (int i = 0; i < p; ++i) {
      char* const row = g[i].data();
      moved.assign(row + j, changed);
      for (std::size_t x = j; x < j + span; x += kPeriod)
        std::char_traits<char>::copy(row + x, row + j - kPeriod, kPeriod);
      std::char_traits<char>::copy(row + j + span, moved.data(), changed);
      for (std::size_t x = j - kPeriod; x < j; ++x) {
        const int v = id_of(row[x]);
        int* cell =
            idx_at + (static_cast<std::size_t>(cnt_at[i * kPeriod + v]) * p + i) * kPeriod + v;
        for (long long r = 1; r <= R; ++r, cell += static_cast<std::size_t>(p) * kPeriod)
          *cell = static_cast<int>(x + static_cast<std::size_t>(r) * kPeriod);
      }
      for (int v = 0; v < kPeriod; ++v) {
        cnt_at[i * kPeriod + v] += static_cast<int>(R);
        later_at[i * kPeriod + v] -= static_cast<int>(R);
      }
      left[i] -= static_cast<int>(R) * kPeriod;
    }
    reach += static_cast<long long>(span);
    read += static_cast<long long>(span);
    jumped = true;
    return span;
  };
  for (std::size_t j = 0; j < len; ++j) {
    if (j % kPeriod == 0 && !jumped) {
      if (kept_j >= 0 && kept_j + kPeriod == static_cast<long long>(j)) j += try_jump(j);
      if (j >= len) break;
      if (!jumped) {
        kept_j = static_cast<long long>(j);
        kept_reach = reach;
        kept_cnt.assign(cnt.begin(), cnt.end());
        kept_mem.assign(mem.begin(), mem.end());
        const std::size_t n = std::min<std::size_t>(kHorizon, len - j);
        char* const to = kept.data();
        for (int i = 0; i < p; ++i)
          std::char_traits<char>::copy(to + static_cast<std::size_t>(i) * kHorizon, g[i].data() + j,
                                       n);
      }
    }
    read = std::max(read, static_cast<long long>(j));
    for (int i = 0; i < p; ++i) {
      if (left[i] == 0) continue;
      char* const row = g[i].data();
      const char here = row[j];
      if (const int v = id_of(here); v >= 0) {
        take_pass(i, v, here, j);
        continue;
      }
      require(here == ' ');
      // The kinds with a later pass, each a candidate at its first later slot.
      unsigned want = avail[i];
      int mem_delta = 0, peak_delta = 0;
      std::size_t k = j + 1;
      for (; k < len && want != 0; ++k) {
        const char c = row[k];
        const int prev_peak = peak_delta;
        mem_delta += kMemDelta[static_cast<unsigned char>(c)];
        peak_delta = std::max(peak_delta, mem_delta);
        const int v = id_of(c);
        if (v < 0 || !(want >> v & 1u)) continue;
        want &= ~(1u << v);
        if (is_fwd(c) && mem[i] + prev_peak >= peak) continue;
        const int n = cnt_at[i * kPeriod + v];
        bool can;
        if (is_down(c)) {
          if (i > 0) {
            const int at_prev = slot_of(n, i - 1, v);
            can = at_prev > -1 && at_prev < static_cast<int>(j);
          } else {
            can = c != 'B' || cnt_at[i * kPeriod + 1] > n;
          }
        } else if (is_up(c)) {
          if (i + 1 < p) {
            const int at_prev = slot_of(n, i + 1, v);
            can = at_prev > -1 && at_prev < static_cast<int>(j);
          } else {
            can = cnt_at[i * kPeriod + (c == 'f' ? 0 : 2)] > n;
          }
        } else {
          can = cnt_at[i * kPeriod + (c == 'W' ? 2 : 3)] > n;
        }
        if (!can) continue;
        row[j] = c;
        row[k] = ' ';
        take_pass(i, v, c, j);
        reach = std::max(reach, static_cast<long long>(k) + 1);
        break;
      }
      read = std::max(read, static_cast<long long>(std::min(k, len - 1)));
    }
  }
  return peak_after;
}

// Each weight pass takes the kind of the oldest backward still waiting for its W.
void relabel_w(Grid& g, int m) {
  for (std::string& row : g) {
    std::array<int, 6> cnt{};
    for (char c : row)
      if (const int v = id_of(c); v >= 0) ++cnt[v];
    for (int v = 0; v < 6; ++v) require(cnt[v] == m);
    // The waiting backwards' weight kinds, oldest first: at most 2m are ever queued.
    std::string queue;
    queue.reserve(static_cast<std::size_t>(2 * m));
    std::size_t head = 0;
    for (char& c : row) {
      if (c == 'B')
        queue.push_back('W');
      else if (c == 'b')
        queue.push_back('w');
      else if (is_w(c)) {
        require(head < queue.size());
        c = queue[head++];
      }
    }
    require(head == queue.size());
  }
}

bool correct(const Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  Index idx(static_cast<std::size_t>(p) * m);
  for (auto& a : idx) a.fill(-1);
  for (int i = 0; i < p; ++i) {
    std::array<int, 6> cnt{};
    for (std::size_t j = 0; j < g[i].size(); ++j) {
      const int v = id_of(g[i][j]);
      if (v < 0) continue;
      if (cnt[v] >= m) return false;
      idx[cnt[v] * p + i][v] = static_cast<int>(j);
      ++cnt[v];
    }
    for (int v = 0; v < 6; ++v)
      if (cnt[v] != m) return false;
  }
  for (int i = 0; i < p; ++i)
    for (int j = 0; j < m; ++j) {
      const auto& x = idx[j * p + i];
      if (x[2] >= x[4] || x[3] >= x[5]) return false;  // B before W, b before w
      if (i == 0 && x[1] >= x[2]) return false;        // f before B at the turn
      if (i == p - 1 && (x[0] >= x[1] || x[2] >= x[3])) return false;
      if (i > 0 && i < p - 1) {
        const auto& up = idx[j * p + i - 1];
        const auto& dn = idx[j * p + i + 1];
        if (up[0] >= x[0] || up[2] >= x[2] || dn[1] >= x[1] || dn[3] >= x[3]) return false;
      }
    }
  return true;
}

// The method's first steps: the block repeated for the authors' spare microbatches, cleared to
// one chain per pass and squeezed. nullopt where the repetition's peak refuses the block. From
// here on the method is a function of this grid (and p, m, max_mem): blocks that give the same
// grid give the same schedule. `peak` receives the grid's peak.
std::optional<Grid> first_squeeze(int p, int m, const VGridPattern& pat, int max_mem, int& peak,
                                  bool jump) {
  const int rm = std::max(m, 2 * p);  // the authors' spare microbatches
  Grid g = repeat(p, rm, pat);
  clear_invalid(g, rm);
  peak = peak_mem(g);
  if ((m == rm && peak > max_mem) || peak > 2 * p) return std::nullopt;
  return squeeze(g, rm, jump);  // keeps each device's order, so its peak too
}

// The rest of the method on first_squeeze's grid, whose peak is `init_peak`.
std::optional<Schedule> finish(Grid g, int init_peak, int p, int m, int max_mem, int num_layers,
                               bool jump) {
  const int rm = std::max(m, 2 * p);
  warmup(g, rm, init_peak);
  g = squeeze(g, rm, jump);
  int peak = peak_mem(g);
  if (peak > init_peak) return std::nullopt;
  if (m < rm) {
    remove_redundancy(g, m);
    if (m <= p && 2 * m <= max_mem) release_w(g, std::min(2 * p, peak));
    g = squeeze(g, m, jump);
    init_peak = peak = peak_mem(g);
    if (peak > max_mem) return std::nullopt;
  }
  g = cooldown(std::move(g), m, peak, jump);
  const int final_peak = reorder_greedily(g, m, jump);
  relabel_w(g, m);  // W and w hold alike: the peak stays
  if (final_peak > init_peak || !correct(g, m)) return std::nullopt;
  Schedule s;
  s.name = "v-adaptive";
  s.placement = v_placement(p, num_layers);
  s.num_microbatches = m;
  s.actions.resize(p);
  for (int i = 0; i < p; ++i) {
    std::array<int, 6> cnt{};
    const int c0 = i, c1 = 2 * p - 1 - i;
    s.actions[i].reserve(static_cast<std::size_t>(6 * m));
    for (char c : g[i]) {
      const int v = id_of(c);
      if (v < 0) continue;
      static constexpr ActionKind kKind[6] = {ActionKind::kF, ActionKind::kF, ActionKind::kB,
                                              ActionKind::kB, ActionKind::kW, ActionKind::kW};
      const int stage = (v == 0 || v == 3 || v == 5) ? c0 : c1;
      s.actions[i].push_back(Action{kKind[v], static_cast<std::int16_t>(stage), cnt[v]++});
    }
  }
  return s;
}

}  // namespace

namespace {

std::optional<Schedule> grid_schedule(int p, int m, const VGridPattern& pattern, int max_mem,
                                      int num_layers, bool jump) {
  if (p < 2 || m < 1 || static_cast<int>(pattern.size()) != p) return std::nullopt;
  try {
    int peak = 0;
    std::optional<Grid> g = first_squeeze(p, m, pattern, max_mem, peak, jump);
    if (!g) return std::nullopt;
    return finish(std::move(*g), peak, p, m, max_mem, num_layers, jump);
  } catch (const Reject&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<Schedule> v_grid_schedule(int p, int m, const VGridPattern& pattern, int max_mem,
                                        int num_layers) {
  return grid_schedule(p, m, pattern, max_mem, num_layers, true);
}

std::optional<Schedule> detail::v_grid_schedule_stepped(int p, int m, const VGridPattern& pattern,
                                                        int max_mem) {
  return grid_schedule(p, m, pattern, max_mem, 0, false);
}

VGridPattern v_grid_pattern(const BuildingBlock& block) {
  const Placement& pl = block.placement;
  const int p = pl.num_devices;
  if (block.period != kPeriod || static_cast<int>(block.passes.size()) != p ||
      pl.num_stages() != 2 * p)
    return {};
  VGridPattern pat(p);
  for (int i = 0; i < p; ++i) {
    const int c0 = i, c1 = 2 * p - 1 - i;
    std::array<int, 6>& slots = pat[i];
    slots.fill(-1);
    unsigned used = 0;
    for (const BlockPass& x : block.passes[i]) {
      if (x.length != 1 || x.stage < 0 || x.stage >= 2 * p || pl.stages[x.stage].device != i)
        return {};
      const bool zero = x.stage == c0;
      if (!zero && x.stage != c1) return {};
      int v;  // the pattern's order: F f B b W w (chunk 0 forward, chunk 1 forward, ...)
      switch (x.kind) {
        case ActionKind::kF:
          v = zero ? 0 : 1;
          break;
        case ActionKind::kB:
          v = zero ? 3 : 2;
          break;
        case ActionKind::kW:
          v = zero ? 5 : 4;
          break;
        default:
          return {};
      }
      const int slot = x.offset % kPeriod;
      if (slots[v] >= 0 || (used >> slot & 1u)) return {};
      slots[v] = slot;
      used |= 1u << slot;
    }
    if (used != (1u << kPeriod) - 1) return {};
  }
  return pat;
}

VGridSchedules v_grid_schedules(int p, int m, const std::vector<VGridPattern>& patterns,
                                int max_mem, int num_layers) {
  VGridSchedules out;
  const std::size_t n = patterns.size();
  out.of.assign(n, 0);
  if (n == 0) return out;
  std::vector<std::optional<Grid>> first(n);
  std::vector<int> first_peak(n, 0);  // a function of the grid, so shared with it
  tbb::parallel_for(std::size_t{0}, n, [&](std::size_t k) {
    if (p < 2 || m < 1 || static_cast<int>(patterns[k].size()) != p) return;
    try {
      first[k] = first_squeeze(p, m, patterns[k], max_mem, first_peak[k], true);
    } catch (const Reject&) {
    }
  });
  // In the patterns' order: each distinct grid's first block is finished; refused ones share.
  std::map<Grid, std::size_t> seen;
  std::vector<std::size_t> todo;  // per answer: the pattern finished for it (n: refused)
  std::optional<std::size_t> refused;
  for (std::size_t k = 0; k < n; ++k) {
    if (!first[k]) {
      if (!refused) refused = todo.size(), todo.push_back(n);
      out.of[k] = *refused;
      continue;
    }
    auto [it, fresh] = seen.try_emplace(*first[k], todo.size());
    if (fresh) todo.push_back(k);
    out.of[k] = it->second;
  }
  out.schedules.resize(todo.size());
  tbb::parallel_for(std::size_t{0}, todo.size(), [&](std::size_t u) {
    if (todo[u] == n) return;
    try {
      out.schedules[u] =
          finish(std::move(*first[todo[u]]), first_peak[todo[u]], p, m, max_mem, num_layers, true);
    } catch (const Reject&) {
    }
  });
  return out;
}

}  // namespace pw
