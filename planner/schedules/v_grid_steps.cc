#include "planner/schedules/v_grid_steps.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace pw::vgrid {
namespace {

// Per column x < end, how many columns from x on (up to end) each hold on every row what the row
// holds six columns earlier (and, with `passes`, a pass rather than an idle slot); zero at and
// after `end` and before column six. Per thread: the caller reads it before the next call.
const std::vector<int>& periodic_run(const Grid& g, std::size_t end, bool passes) {
  thread_local std::vector<unsigned char> same;
  thread_local std::vector<int> run;
  same.assign(end, 1);
  run.assign(grid_len(g) + 1, 0);
  unsigned char* const at = same.data();
  for (const std::string& row : g) {
    const char* r = row.data();
    for (std::size_t x = kPeriod; x < end; ++x)
      at[x] &= static_cast<unsigned char>((r[x] == r[x - kPeriod]) & (!passes || r[x] != ' '));
  }
  for (std::size_t x = end; x-- > kPeriod;) run[x] = at[x] ? run[x + 1] + 1 : 0;
  return run;
}

}  // namespace

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
  const std::vector<int>& run = periodic_run(g, end, true);
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
              // Cell of (microbatch, device i, kind v) by index: no pointer past the table.
              std::size_t cell =
                  (static_cast<std::size_t>(cnt_at[i * kPeriod + v]) * p + i) * kPeriod + v;
              const std::size_t step = static_cast<std::size_t>(p) * kPeriod;
              for (int r = 0; r < R; ++r, cell += step) {
                slot += shift;
                orow_i[slot] = c;
                idx_at[cell] = slot;
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
  const std::vector<int>& run6 = periodic_run(g, len, false);
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
        std::size_t cell =
            (static_cast<std::size_t>(cnt_at[i * kPeriod + v]) * p + i) * kPeriod + v;
        for (long long r = 1; r <= R; ++r, cell += static_cast<std::size_t>(p) * kPeriod)
          idx_at[cell] = static_cast<int>(x + static_cast<std::size_t>(r) * kPeriod);
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

}  // namespace pw::vgrid
