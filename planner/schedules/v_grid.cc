#include "planner/schedules/v_grid.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "planner/schedules/v_grid_steps.h"
#include "planner/schedules/v_schedules.h"

namespace pw {
namespace {

using vgrid::Grid;
using vgrid::grid_len;
using vgrid::id_of;
using vgrid::is_down;
using vgrid::is_w;
using vgrid::kIds;
using vgrid::kMemDelta;
using vgrid::kPeriod;
using vgrid::Reject;
using vgrid::reorder_greedily;
using vgrid::require;
using vgrid::squeeze;

// Per (microbatch, device): the slot of each pass, -1 until placed.
using Index = std::vector<std::array<int, 6>>;

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

// Python's s[i] for a possibly negative i.
char& at(std::string& row, long long i) {
  if (i < 0) i += static_cast<long long>(row.size());
  require(i >= 0 && i < static_cast<long long>(row.size()));
  return row[static_cast<std::size_t>(i)];
}

// The block repeated for m microbatches (4p + m + 1 periods), keeping of every pass's
// repetitions the m that follow the chain from device 0's first F (each pass the first of its
// kind at or after the column after the chain's previous pass; a weight pass the first of its kind
// after its backward) and clearing the rest. A column holds the pass whose pattern slot is the
// column mod 6, so the chain is walked on the pattern and only the kept repetitions are written.
// A probe past the row refuses the block.
Grid repeat_chain(int p, int m, const VGridPattern& pattern) {
  const long long size = (4LL * p + m + 1) * kPeriod;
  auto holds = [&](int i, int v, long long x) {
    require(x >= 0 && x < size);
    return pattern[i][v] == static_cast<int>(x % kPeriod);
  };
  // Per device and kind: the first kept column (-1: the chain never met it; all are kept).
  std::vector<std::array<long long, 6>> first(p);
  for (auto& f : first) f.fill(-1);
  long long index = kPeriod;
  for (const int v : {0, 1, 2, 3}) {  // F, f, B, b
    for (int k = 0; k < p; ++k) {
      const int i = is_down(kIds[v]) ? k : p - 1 - k;
      for (int j = 0; j < kPeriod; ++j, ++index) {
        if (!holds(i, v, index)) continue;
        first[i][v] = index++;
        if (v >= 2)  // B and b: their weight pass, W and w
          for (int q = 0; q < kPeriod; ++q)
            if (holds(i, v + 2, index + q)) {
              first[i][v + 2] = index + q;
              break;
            }
        break;
      }
    }
  }
  Grid g(p, std::string(static_cast<std::size_t>(size), ' '));
  for (int i = 0; i < p; ++i)
    for (int v = 0; v < kPeriod; ++v) {
      const long long from = first[i][v] >= 0 ? first[i][v] : pattern[i][v];
      const long long to = first[i][v] >= 0 ? std::min(size, from + kPeriod * m) : size;
      for (long long x = from; x < to; x += kPeriod) g[i][static_cast<std::size_t>(x)] = kIds[v];
    }
  return g;
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
  // Every cell is written before the checks read it (each row holds m of each kind, or the
  // count check returns first): per thread, not cleared.
  thread_local Index idx;
  idx.resize(static_cast<std::size_t>(p) * m);
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
  Grid g = repeat_chain(p, rm, pat);
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
