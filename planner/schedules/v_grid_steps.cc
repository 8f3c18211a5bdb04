#include "planner/schedules/v_grid_steps.h"

#include <algorithm>
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

// The cell of (microbatch n, device i, kind v) in a per-pass table.
std::size_t cell_of(int n, int p, int i, int v) {
  return (static_cast<std::size_t>(n) * p + i) * kPeriod + v;
}

// Per kind and device position (0 inner, 1 first, 2 last): where the pass's dependency sits
// relative to its own (microbatch, device) cell, or kNone. At the ends of the V the dependency is
// the same device's earlier pass (device 0: f before B; device p-1: F before f, B before b), so
// the slot is the device's next free one either way. W and w wait for nothing in the squeeze
// (the authors' final check looks at them).
constexpr int kNone = 1 << 20;
constexpr int kDep[6][3] = {
    {-kPeriod + 0, kNone, -kPeriod + 0},  // F: device i-1's F (device 0: none)
    {kPeriod + 1, kPeriod + 1, 0},        // f: device i+1's f (device p-1: its own F)
    {-kPeriod + 2, 1, -kPeriod + 2},      // B: device i-1's B (device 0: its own f)
    {kPeriod + 3, kPeriod + 3, 2},        // b: device i+1's b (device p-1: its own B)
    {kNone, kNone, kNone},                // W
    {kNone, kNone, kNone}};               // w

// The squeeze of one grid. Per (microbatch, device, kind): the pass's new slot (-1 until placed)
// and the input column it came from; per (device, kind): passes placed; per device: its next
// free slot; per (device, input column): the slot given. Per-thread tables: no allocation a call.
//
// Steady state. Column x is periodic when every device holds a pass there, the same as six
// columns earlier. Where a window of six periodic columns holds each of the six kinds once on
// every device, every later window of the run is that window again with each pass one microbatch
// further. Say the windows ending at column j (a multiple of six) have each given every pass the
// slot of its copy one window earlier plus S, for `streak_` windows in a row, and every pass of
// the last window depends on a pass of those windows (or on none). Then the window from j does
// too, by induction over its passes in the loop's order: a pass's slot is the larger of its
// device's next free slot (its previous pass's, which moved by S) and its dependency's (the copy
// one window on of the dependency's copy's own dependency, inside the windows that moved by S,
// or earlier in this window). So do all later windows of the run: jump over them, each pass S
// slots after its copy one window earlier, as long as every kind has microbatches left and every
// slot fits the row (else the plain loop meets the same refusal at the same pass). Once: the
// column and slot tables are not written for the skipped windows.
class Squeezer {
 public:
  Squeezer(const Grid& g, int m, Grid& out) : p_(static_cast<int>(g.size())), m_(m) {
    len_ = grid_len(g);
    ilen_ = static_cast<int>(len_);
    // The slot table is not cleared: a cell is read only once its pass is placed, which its
    // kind's count on its device says (dep_cnt: that count's index, -1 for no dependency).
    thread_local std::vector<int> idx, cnt, next, off, dep_cnt, col, oslot;
    thread_local std::vector<const char*> in;
    thread_local std::vector<char*> orow;
    idx.resize(static_cast<std::size_t>(p_) * m * kPeriod);
    cnt.assign(static_cast<std::size_t>(p_) * kPeriod, 0);
    next.assign(p_, 0);
    off.resize(static_cast<std::size_t>(p_) * kPeriod);
    dep_cnt.resize(off.size());
    col.resize(idx.size());
    oslot.resize(static_cast<std::size_t>(p_) * len_);
    in.resize(p_);
    orow.resize(p_);
    for (int i = 0; i < p_; ++i) {
      in[i] = g[i].data(), orow[i] = out[i].data();
      // Passes lie before the rows' last pass: the columns after it hold nothing to place.
      const std::size_t last = g[i].find_last_not_of(' ');
      if (last != std::string::npos) end_ = std::max(end_, last + 1);
      for (int v = 0; v < kPeriod; ++v) {
        const int o = kDep[v][(i == 0) + 2 * (i == p_ - 1)];
        off[i * kPeriod + v] = o;
        // o = -6 + kind: device i-1's; 6 + kind: device i+1's; 0..5: this device's.
        dep_cnt[i * kPeriod + v] = o == kNone ? -1 : i * kPeriod + o;
      }
    }
    idx_ = idx.data(), cnt_ = cnt.data(), next_ = next.data(), off_ = off.data();
    dep_cnt_ = dep_cnt.data();
    col_ = col.data(), oslot_ = oslot.data(), in_ = in.data(), out_ = orow.data();
    thread_local std::vector<int> up;  // a column's up-going passes: device * 8 + kind
    up.resize(p_);
    up_ = up.data();
    run_ = &periodic_run(g, end_, true);
  }

  // Every column in order, jumping once over the steady state when `jump`. Returns the length
  // the rows need.
  int run(bool jump) {
    jumped_ = !jump;
    for (std::size_t j = 0; j < end_; ++j) {
      if (j % kPeriod == 0 && !jumped_) {
        j += try_jump(j);
        if (j >= end_) break;
      }
      step(j);
    }
    return new_len_;
  }

 private:
  void place(int i, int v, int j) {
    const int n = cnt_[i * kPeriod + v];
    require(n < m_);
    const std::size_t cell = cell_of(n, p_, i, 0);
    int* here = idx_ + cell;
    const int off = off_[i * kPeriod + v];
    const int dc = dep_cnt_[i * kPeriod + v];
    require(dc < 0 || cnt_[dc] > n);
    const int dep = dc < 0 ? -1 : here[off];
    const int slot = std::max(dep + 1, next_[i]);
    require(slot < ilen_);
    out_[i][slot] = kIds[v];
    cnt_[i * kPeriod + v] = n + 1;
    here[v] = slot;
    col_[cell + v] = j;
    oslot_[static_cast<std::size_t>(i) * len_ + j] = slot;
    next_[i] = slot + 1;
    new_len_ = std::max(new_len_, slot + 1);
  }

  // Column j: down-going passes (and W) top to bottom, then up-going ones (and w) bottom to top.
  void step(std::size_t j) {
    int nu = 0;
    for (int i = 0; i < p_; ++i) {
      const int v = id_of(in_[i][j]);
      if (v < 0) continue;
      if ((v & 1) == 0)
        place(i, v, static_cast<int>(j));
      else
        up_[nu++] = i * 8 + v;
    }
    for (int k = nu - 1; k >= 0; --k) place(up_[k] >> 3, up_[k] & 7, static_cast<int>(j));
  }

  // Whether the window [j-6, j) moved every pass by one shift from its copy, and by how much.
  bool window_shift(std::size_t j, int& s) const {
    if (j < 2 * kPeriod || (*run_)[j - kPeriod] < kPeriod) return false;
    s = oslot_[j - kPeriod] - oslot_[j - 2 * kPeriod];
    for (int i = 0; i < p_; ++i) {
      const int* o = oslot_ + static_cast<std::size_t>(i) * len_;
      unsigned kinds = 0;
      for (std::size_t x = j - kPeriod; x < j; ++x) {
        kinds |= 1u << id_of(in_[i][x]);
        if (o[x] - o[x - kPeriod] != s) return false;
      }
      if (kinds != (1u << kPeriod) - 1) return false;
    }
    return true;
  }

  // At column j (a multiple of six): extends the streak and, when the last window's passes all
  // depend inside it, jumps. Returns the columns skipped.
  std::size_t try_jump(std::size_t j) {
    int s = 0;
    if (!window_shift(j, s)) return streak_ = 0, 0;
    streak_ = streak_ > 0 && s == shift_ ? streak_ + 1 : 1, shift_ = s;
    if (shift_ <= 0) return 0;
    // The last window's dependencies, the microbatches left and the row's room.
    int most = 0, last_slot = 0;
    for (int i = 0; i < p_; ++i)
      for (std::size_t x = j - kPeriod; x < j; ++x) {
        const int v = id_of(in_[i][x]);
        const int n = cnt_[i * kPeriod + v] - 1;
        most = std::max(most, n + 1);
        last_slot = std::max(last_slot, oslot_[static_cast<std::size_t>(i) * len_ + x]);
        const int off = off_[i * kPeriod + v];
        if (off != kNone && col_[static_cast<std::ptrdiff_t>(cell_of(n, p_, i, 0)) + off] <
                                static_cast<int>(j) - kPeriod * streak_)
          return 0;
      }
    const int R = std::min({(*run_)[j] / kPeriod, m_ - most, (ilen_ - 1 - last_slot) / shift_});
    if (R <= 0) return 0;
    // Each skipped pass's character and slot (later passes read it as a dependency).
    const std::size_t step = static_cast<std::size_t>(p_) * kPeriod;
    for (int i = 0; i < p_; ++i) {
      const int* o = oslot_ + static_cast<std::size_t>(i) * len_;
      for (std::size_t x = j - kPeriod; x < j; ++x) {
        const int v = id_of(in_[i][x]);
        int slot = o[x];
        std::size_t cell = cell_of(cnt_[i * kPeriod + v], p_, i, v);
        for (int r = 0; r < R; ++r, cell += step) {
          slot += shift_;
          out_[i][slot] = kIds[v];
          idx_[cell] = slot;
        }
      }
      for (int v = 0; v < kPeriod; ++v) cnt_[i * kPeriod + v] += R;
      next_[i] += R * shift_;
    }
    new_len_ = std::max(new_len_, last_slot + R * shift_ + 1);
    jumped_ = true;
    return static_cast<std::size_t>(R) * kPeriod;
  }

  const int p_, m_;
  std::size_t len_ = 0, end_ = 0;
  int ilen_ = 0, new_len_ = 0;
  int *idx_ = nullptr, *cnt_ = nullptr, *next_ = nullptr, *col_ = nullptr, *oslot_ = nullptr;
  int* up_ = nullptr;
  const int *off_ = nullptr, *dep_cnt_ = nullptr;
  const char* const* in_ = nullptr;
  char* const* out_ = nullptr;
  const std::vector<int>* run_ = nullptr;
  int streak_ = 0, shift_ = 0;
  bool jumped_ = false;
};

// The greedy bubble fill of one grid, in place. Per device and kind: how many of its passes lie
// after the slot being filled (a kind with none left is no candidate: bit v of avail[i] is set
// while some are) and how many were taken; over all kinds, how many are left (a device with none
// left is done); per (microbatch, device, kind) the slot taken (-1: not yet). Per-thread tables.
//
// Steady state. The fill at column j depends only on each row from j on, each device's memory,
// the passes taken of each kind (only their differences: a dependency is met when its pass was
// taken at an earlier column, which the counts say) and which kinds have passes left. At every
// sixth column the rows from there (kHorizon slots), counts and memories are kept. Six columns
// later, if every row from there equals the kept one over the part either fill had changed, the
// rows beyond it repeat every six columns as far as the fill has read plus 6R, every memory is
// the same, every count one more and every kind has more than R passes left, then the next six
// columns fill as the last six did, one microbatch on, and so on for R windows (by induction over
// the windows, each reading six columns further than the one before): they are copied, the
// changed part of the rows moves 6R columns on, and the fill goes on from there. Once: the kept
// state is not kept for the copied windows.
class Filler {
 public:
  Filler(Grid& g, int m) : g_(g), p_(static_cast<int>(g.size())), m_(m), len_(grid_len(g)) {
    thread_local std::vector<int> later, cnt, idx, left, mem;
    thread_local std::vector<unsigned> avail;
    later.assign(static_cast<std::size_t>(p_) * kPeriod, 0);
    cnt.assign(static_cast<std::size_t>(p_) * kPeriod, 0);
    idx.resize(static_cast<std::size_t>(p_) * m * kPeriod);  // read once taken (the counts say)
    left.assign(p_, 0);
    mem.assign(p_, 0);
    avail.assign(p_, 0);
    later_ = later.data(), cnt_ = cnt.data(), idx_ = idx.data();
    left_ = left.data(), mem_ = mem.data(), avail_ = avail.data();
    for (int i = 0; i < p_; ++i) {
      int row_mem = 0;
      for (std::size_t j = 0; j < len_; ++j) {
        const char c = g[i][j];
        row_mem += kMemDelta[static_cast<unsigned char>(c)];
        peak_ = std::max(peak_, row_mem);  // the grid's peak, in the same pass (peak_of's sum)
        if (const int v = id_of(c); v >= 0) ++later_[i * kPeriod + v], ++left_[i];
      }
      for (int v = 0; v < kPeriod; ++v)
        avail_[i] |= static_cast<unsigned>(later_[i * kPeriod + v] > 0) << v;
    }
    thread_local std::string kept, moved;
    thread_local std::vector<int> kept_cnt, kept_mem;
    kept.resize(static_cast<std::size_t>(p_) * kHorizon);
    kept_cnt.resize(static_cast<std::size_t>(p_) * kPeriod);
    kept_mem.resize(p_);
    kept_ = kept.data(), moved_ = &moved, kept_cnt_ = kept_cnt.data(), kept_mem_ = kept_mem.data();
    run6_ = &periodic_run(g, len_, false);
  }

  // Every column in order, jumping once over the steady state when `jump`. Returns the grid's
  // peak afterwards (memory only changes where a pass is taken).
  int run(bool jump) {
    jumped_ = !jump;
    for (std::size_t j = 0; j < len_; ++j) {
      if (j % kPeriod == 0 && !jumped_) {
        if (kept_j_ >= 0 && kept_j_ + kPeriod == static_cast<long long>(j)) j += try_jump(j);
        if (j >= len_) break;
        if (!jumped_) keep(j);
      }
      read_ = std::max(read_, static_cast<long long>(j));
      for (int i = 0; i < p_; ++i)
        if (left_[i] > 0) fill(i, j);
    }
    return peak_after_;
  }

 private:
  static constexpr int kHorizon = 64;

  // Takes pass kind v (char c) of device i at slot j: its microbatch is the next of its kind.
  void take(int i, int v, char c, std::size_t j) {
    const int n = cnt_[i * kPeriod + v];
    require(n < m_);
    cnt_[i * kPeriod + v] = n + 1;
    idx_[cell_of(n, p_, i, v)] = static_cast<int>(j);
    if (--later_[i * kPeriod + v] == 0) avail_[i] &= ~(1u << v);
    --left_[i];
    mem_[i] += kMemDelta[static_cast<unsigned char>(c)];
    peak_after_ = std::max(peak_after_, mem_[i]);
  }

  // Whether microbatch n of kind v (char c) of device i may run at column j: its dependency was
  // taken at an earlier column.
  bool ready(int i, int v, char c, int n, std::size_t j) const {
    const int col = static_cast<int>(j);
    auto before = [&](int d) {  // kind v of microbatch n on device d, taken before column j
      return cnt_[d * kPeriod + v] > n && idx_[cell_of(n, p_, d, v)] < col;
    };
    if (is_down(c)) return i > 0 ? before(i - 1) : c != 'B' || cnt_[i * kPeriod + 1] > n;
    if (is_up(c)) return i + 1 < p_ ? before(i + 1) : cnt_[i * kPeriod + (c == 'f' ? 0 : 2)] > n;
    return cnt_[i * kPeriod + (c == 'W' ? 2 : 3)] > n;
  }

  // Column j of device i: its pass, or the first later pass of each kind that can move there
  // without raising the device's peak.
  void fill(int i, std::size_t j) {
    char* const row = g_[i].data();
    const char here = row[j];
    if (const int v = id_of(here); v >= 0) return take(i, v, here, j);
    require(here == ' ');
    unsigned want = avail_[i];  // the kinds with a later pass, each a candidate once
    int mem_delta = 0, peak_delta = 0;
    std::size_t k = j + 1;
    for (; k < len_ && want != 0; ++k) {
      const char c = row[k];
      const int prev_peak = peak_delta;
      mem_delta += kMemDelta[static_cast<unsigned char>(c)];
      peak_delta = std::max(peak_delta, mem_delta);
      const int v = id_of(c);
      if (v < 0 || !(want >> v & 1u)) continue;
      want &= ~(1u << v);
      if (is_fwd(c) && mem_[i] + prev_peak >= peak_) continue;
      if (!ready(i, v, c, cnt_[i * kPeriod + v], j)) continue;
      row[j] = c;
      row[k] = ' ';
      take(i, v, c, j);
      reach_ = std::max(reach_, static_cast<long long>(k) + 1);
      break;
    }
    read_ = std::max(read_, static_cast<long long>(std::min(k, len_ - 1)));
  }

  // Keeps the state at column j for the jump six columns later.
  void keep(std::size_t j) {
    kept_j_ = static_cast<long long>(j);
    kept_reach_ = reach_;
    std::copy(cnt_, cnt_ + static_cast<std::ptrdiff_t>(p_) * kPeriod, kept_cnt_);
    std::copy(mem_, mem_ + p_, kept_mem_);
    const std::size_t n = std::min<std::size_t>(kHorizon, len_ - j);
    for (int i = 0; i < p_; ++i)
      std::char_traits<char>::copy(kept_ + static_cast<std::size_t>(i) * kHorizon, g_[i].data() + j,
                                   n);
  }

  // How many windows from column j repeat the last one (0: none, or the state differs).
  long long windows(std::size_t j) const {
    const long long J = static_cast<long long>(j);
    const long long y = std::max({reach_ - J, kept_reach_ - kept_j_, 0LL});
    if (y > kHorizon || J + y >= static_cast<long long>(len_)) return 0;
    long long R = m_;
    for (int i = 0; i < p_; ++i) {
      if (mem_[i] != kept_mem_[i]) return 0;
      for (int v = 0; v < kPeriod; ++v) {
        const int k = i * kPeriod + v;
        if (cnt_[k] - kept_cnt_[k] != 1) return 0;
        R = std::min(
            {R, static_cast<long long>(later_[k]) - 1, static_cast<long long>(m_ - cnt_[k])});
      }
      if (std::char_traits<char>::compare(g_[i].data() + j, kept_ + i * kHorizon,
                                          static_cast<std::size_t>(y)) != 0)
        return 0;
    }
    const long long from = J + y;
    return std::min(R, (from + (*run6_)[static_cast<std::size_t>(from)] - 1 - read_) / kPeriod);
  }

  // At column j, six after the kept state: copies the windows that repeat the last one. Returns
  // the columns skipped.
  std::size_t try_jump(std::size_t j) {
    const long long R = windows(j);
    if (R < 1) return 0;
    const std::size_t span = static_cast<std::size_t>(R) * kPeriod;
    const std::size_t changed =
        static_cast<std::size_t>(std::max(0LL, reach_ - static_cast<long long>(j)));
    for (int i = 0; i < p_; ++i) {
      char* const row = g_[i].data();
      moved_->assign(row + j, changed);
      for (std::size_t x = j; x < j + span; x += kPeriod)
        std::char_traits<char>::copy(row + x, row + j - kPeriod, kPeriod);
      std::char_traits<char>::copy(row + j + span, moved_->data(), changed);
      for (std::size_t x = j - kPeriod; x < j; ++x) {
        const int v = id_of(row[x]);
        std::size_t cell = cell_of(cnt_[i * kPeriod + v], p_, i, v);
        for (long long r = 1; r <= R; ++r, cell += static_cast<std::size_t>(p_) * kPeriod)
          idx_[cell] = static_cast<int>(x + static_cast<std::size_t>(r) * kPeriod);
      }
      for (int v = 0; v < kPeriod; ++v) {
        cnt_[i * kPeriod + v] += static_cast<int>(R);
        later_[i * kPeriod + v] -= static_cast<int>(R);
      }
      left_[i] -= static_cast<int>(R) * kPeriod;
    }
    reach_ += static_cast<long long>(span);
    read_ += static_cast<long long>(span);
    jumped_ = true;
    return span;
  }

  Grid& g_;
  const int p_, m_;
  const std::size_t len_;
  int *later_ = nullptr, *cnt_ = nullptr, *idx_ = nullptr, *left_ = nullptr, *mem_ = nullptr;
  unsigned* avail_ = nullptr;
  int peak_ = 0, peak_after_ = 0;
  char* kept_ = nullptr;
  std::string* moved_ = nullptr;
  int *kept_cnt_ = nullptr, *kept_mem_ = nullptr;
  const std::vector<int>* run6_ = nullptr;
  long long kept_j_ = -1, kept_reach_ = 0;
  long long reach_ = 0, read_ = 0;  // past the farthest slot the fill changed; the farthest read
  bool jumped_ = false;
};

}  // namespace

Grid squeeze(const Grid& g, int m, bool jump) {
  Grid out(g.size(), std::string(grid_len(g), ' '));
  const int new_len = Squeezer(g, m, out).run(jump);
  for (std::string& r : out) r.resize(static_cast<std::size_t>(new_len));
  return out;
}

int reorder_greedily(Grid& g, int m, bool jump) { return Filler(g, m).run(jump); }

}  // namespace pw::vgrid
