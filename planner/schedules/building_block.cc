#include "planner/schedules/building_block.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>

#include "core/dependency.h"
#include "core/error.h"

namespace pw {
namespace {

int mod(int a, int t) { return ((a % t) + t) % t; }

std::string pass_name(const BlockPass& p) {
  return fmt::format("{}{}@{}", action_kind_name(p.kind), p.stage, p.offset);
}

bool is_backward(ActionKind k) { return k == ActionKind::kB || k == ActionKind::kBW; }

// Block passes of device d, as (kind, stage) -> offset lookups for lifespans.
const BlockPass* find_pass(const std::vector<BlockPass>& dev, int stage, ActionKind k) {
  for (const BlockPass& p : dev)
    if (p.stage == stage && p.kind == k) return &p;
  return nullptr;
}

}  // namespace

std::optional<BlockCollision> find_collision(const BuildingBlock& block) {
  const int T = block.period;
  std::vector<int> owner;
  for (int d = 0; d < static_cast<int>(block.passes.size()); ++d) {
    const auto& dev = block.passes[d];
    owner.assign(std::max(T, 1), -1);
    for (int i = 0; i < static_cast<int>(dev.size()); ++i) {
      const BlockPass& p = dev[i];
      for (int k = 0; k < p.length; ++k) {
        const int slot = mod(p.offset + k, T);
        // A pass longer than the period collides with its own next copy.
        const int other = k >= T ? i : owner[slot];
        if (other >= 0) {
          const BlockPass& q = dev[other];
          int q_abs = q.offset;  // q's absolute slot that maps to `slot`
          while (mod(q_abs, T) != slot) ++q_abs;
          const int gap = std::abs(p.offset + k - q_abs) / T;
          return BlockCollision{d, slot, q, p, gap};
        }
        owner[slot] = i;
      }
    }
  }
  return std::nullopt;
}

void check_block(const BuildingBlock& block, const std::string& source) {
  if (block.period <= 0) throw ConfigError(source, "block.period", "expected a positive period");
  const Placement& pl = block.placement;
  if (static_cast<int>(block.passes.size()) != pl.num_devices)
    throw ConfigError(source, "block",
                      fmt::format("expected one pass list per device ({}), got {}", pl.num_devices,
                                  block.passes.size()));
  for (int d = 0; d < pl.num_devices; ++d) {
    for (const BlockPass& p : block.passes[d]) {
      const std::string key = fmt::format("block.device[{}]", d);
      if (p.stage < 0 || p.stage >= pl.num_stages())
        throw ConfigError(source, key, fmt::format("{}: stage out of range", pass_name(p)));
      if (pl.stages[p.stage].device != d)
        throw ConfigError(source, key,
                          fmt::format("{}: stage {} is placed on device {}", pass_name(p), p.stage,
                                      pl.stages[p.stage].device));
      if (p.offset < 0 || p.length <= 0)
        throw ConfigError(source, key,
                          fmt::format("{}: expected offset >= 0 and length >= 1", pass_name(p)));
    }
  }
  if (auto c = find_collision(block))
    throw ConfigError(
        source, fmt::format("block.device[{}]", c->device),
        fmt::format("passes collide on device {} at slot {} (mod period {}): {} and {} of a "
                    "microbatch {} period(s) later",
                    c->device, c->slot, block.period, pass_name(c->first), pass_name(c->second),
                    c->microbatch_gap));
}

std::vector<StageLifespan> block_lifespans(const BuildingBlock& block, bool include_w) {
  const Placement& pl = block.placement;
  std::vector<StageLifespan> out;
  for (int s = 0; s < pl.num_stages(); ++s) {
    const int d = pl.stages[s].device;
    const auto& dev = block.passes[d];
    const BlockPass* f = find_pass(dev, s, ActionKind::kF);
    const BlockPass* b = find_pass(dev, s, ActionKind::kB);
    if (!b) b = find_pass(dev, s, ActionKind::kBW);
    if (include_w)
      if (const BlockPass* w = find_pass(dev, s, ActionKind::kW)) b = w;
    if (!f || !b) continue;
    StageLifespan ls;
    ls.stage = s;
    ls.device = d;
    ls.lifespan = b->offset + b->length - f->offset;
    ls.microbatches = (ls.lifespan + block.period - 1) / block.period;
    ls.bound = ls.microbatches * pl.activation_weight(s);
    out.push_back(ls);
  }
  return out;
}

std::vector<double> block_memory_bound(const BuildingBlock& block, bool include_w) {
  std::vector<double> bound(block.placement.num_devices, 0.0);
  for (const StageLifespan& ls : block_lifespans(block, include_w)) bound[ls.device] += ls.bound;
  return bound;
}

void place_w_greedily(BuildingBlock& block, const std::vector<int>& w_order) {
  const int T = block.period;
  for (const int s : w_order) {
    const int d = block.placement.stages[s].device;
    auto& dev = block.passes[d];
    const BlockPass* b = find_pass(dev, s, ActionKind::kB);
    PW_ASSERT(b != nullptr, fmt::format("W of stage {} needs its B in the block", s));
    std::vector<char> used(T, 0);
    for (const BlockPass& p : dev)
      for (int k = 0; k < p.length; ++k) used[mod(p.offset + k, T)] = 1;
    const int from = b->offset + b->length;
    int slot = -1;
    for (int t = from; t < from + T && slot < 0; ++t)
      if (!used[mod(t, T)]) slot = t;
    if (slot < 0)
      throw ConfigError("", fmt::format("block.device[{}]", d),
                        fmt::format("no free slot for W of stage {} (period {} is full)", s, T));
    dev.push_back(BlockPass{ActionKind::kW, s, slot, 1});
  }
}

Schedule block_to_schedule(const BuildingBlock& block, int m, const BlockScheduleOptions& opt) {
  check_block(block);
  PW_ASSERT(m >= 1, "block_to_schedule needs m >= 1");
  Schedule s;
  s.name = block.name;
  s.placement = block.placement;
  s.num_microbatches = m;
  s.actions.resize(block.placement.num_devices);
  struct Keyed {
    long long slot;
    Action a;
  };
  std::vector<Keyed> keyed;
  for (int d = 0; d < block.placement.num_devices; ++d) {
    keyed.clear();
    for (const BlockPass& p : block.passes[d])
      for (int j = 0; j < m; ++j)
        keyed.push_back({p.offset + static_cast<long long>(j) * block.period,
                         Action{p.kind, static_cast<std::int16_t>(p.stage), j}});
    std::sort(keyed.begin(), keyed.end(),
              [](const Keyed& x, const Keyed& y) { return x.slot < y.slot; });
    auto& out = s.actions[d];
    out.reserve(keyed.size());
    for (const Keyed& k : keyed) out.push_back(k.a);
    if (!opt.reorder_cooldown) continue;
    // After the last forward only backward and weight passes remain; memory can only fall, so
    // running the backwards first never raises the peak and shortens the dependency chain.
    int last_f = -1;
    for (int i = 0; i < static_cast<int>(out.size()); ++i)
      if (out[i].kind == ActionKind::kF) last_f = i;
    std::stable_partition(out.begin() + (last_f + 1), out.end(),
                          [](const Action& a) { return is_backward(a.kind); });
  }
  return s;
}

namespace {

[[noreturn]] void parse_fail(const std::string& src, const std::string& tok,
                             const std::string& what) {
  throw ConfigError(src, "block", fmt::format("cannot read '{}': {}", tok, what));
}

int parse_int(const std::string& src, const std::string& tok, std::string_view s) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty())
    parse_fail(src, tok, "expected an integer");
  return v;
}

BlockPass parse_pass(const std::string& src, const std::string& tok) {
  const auto at = tok.find('@');
  if (at == std::string::npos) parse_fail(src, tok, "expected KIND<stage>@<slot>, e.g. F0@3");
  std::size_t i = 0;
  while (i < at && std::isalpha(static_cast<unsigned char>(tok[i]))) ++i;
  ActionKind kind;
  const std::string kname = tok.substr(0, i);
  if (!parse_action_kind(kname, &kind) || !(kind <= ActionKind::kR))
    parse_fail(src, tok, "expected kind F, B, W, BW or R");
  BlockPass p;
  p.kind = kind;
  p.stage = parse_int(src, tok, std::string_view(tok).substr(i, at - i));
  std::string_view rest = std::string_view(tok).substr(at + 1);
  const auto x = rest.find('x');
  if (x != std::string_view::npos) {
    p.length = parse_int(src, tok, rest.substr(x + 1));
    rest = rest.substr(0, x);
  } else {
    p.length = kind == ActionKind::kBW ? 2 : 1;
  }
  p.offset = parse_int(src, tok, rest);
  return p;
}

std::vector<std::string> split(const std::string& s, const char* seps) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (std::strchr(seps, c)) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

BuildingBlock parse_block(const std::string& text, const Placement& placement,
                          const std::string& source) {
  BuildingBlock b;
  b.name = "custom-block";
  b.placement = placement;
  b.passes.resize(placement.num_devices);
  for (const std::string& part : split(text, ";\n")) {
    const auto colon = part.find(':');
    const auto eq = part.find('=');
    std::vector<std::string> words = split(part, " \t");
    if (words.empty()) continue;
    if (colon == std::string::npos && eq != std::string::npos) {
      std::string key = part.substr(0, eq);
      key.erase(std::remove_if(key.begin(), key.end(), ::isspace), key.end());
      if (key != "T") parse_fail(source, part, "expected 'T=<period>'");
      std::string val = part.substr(eq + 1);
      val.erase(std::remove_if(val.begin(), val.end(), ::isspace), val.end());
      b.period = parse_int(source, part, val);
      continue;
    }
    if (colon == std::string::npos) parse_fail(source, part, "expected '<device>: passes'");
    std::string dev = part.substr(0, colon);
    dev.erase(std::remove_if(dev.begin(), dev.end(), ::isspace), dev.end());
    const int d = parse_int(source, part, dev);
    if (d < 0 || d >= placement.num_devices)
      parse_fail(source, part, fmt::format("device must be 0..{}", placement.num_devices - 1));
    for (const std::string& tok : split(part.substr(colon + 1), " \t,"))
      b.passes[d].push_back(parse_pass(source, tok));
  }
  if (b.period <= 0) throw ConfigError(source, "block.period", "missing 'T=<period>'");
  check_block(b, source);
  return b;
}

std::string format_block(const BuildingBlock& block) {
  std::string out = fmt::format("T={}", block.period);
  for (int d = 0; d < static_cast<int>(block.passes.size()); ++d) {
    std::vector<BlockPass> dev = block.passes[d];
    std::stable_sort(dev.begin(), dev.end(),
                     [](const BlockPass& a, const BlockPass& b) { return a.offset < b.offset; });
    out += fmt::format("; {}:", d);
    for (const BlockPass& p : dev) {
      out += " " + pass_name(p);
      const int def = p.kind == ActionKind::kBW ? 2 : 1;
      if (p.length != def) out += fmt::format("x{}", p.length);
    }
  }
  return out;
}

TimePs squeeze_fill_w(Schedule& schedule, const CostTable& costs, BlockSqueeze* stats) {
  const DependencyGraph g = build_dependency_graph(schedule);
  const int D = schedule.placement.num_devices;
  const std::size_t n = g.size();
  constexpr TimePs kNever = std::numeric_limits<TimePs>::max();
  std::vector<TimePs> end(n, kNever), clock(D, 0);
  std::vector<std::uint8_t> done(n, 0);
  std::vector<std::int32_t> cursor(g.device_begin.begin(), g.device_begin.end() - 1);
  // Pending W ids per device (B done, W not yet run), oldest first; head index per device.
  std::vector<std::vector<std::int32_t>> pending(D);
  std::vector<std::size_t> head(D, 0);
  std::vector<std::vector<Action>> order(D);
  std::vector<std::uint8_t> blocked(D, 0);
  // W id of each B id on the same device (or -1), to make it pending when the B runs.
  std::vector<std::int32_t> w_of(n, -1);
  for (std::size_t id = 0; id < n; ++id)
    if (g.action[id].kind == ActionKind::kW) w_of[g.dep[g.dep_begin[id]]] = static_cast<int>(id);
  std::vector<TimePs> first(D, kNever);
  std::vector<double> mem(D, 0.0), peak(D, 0.0);
  auto run = [&](int d, std::int32_t id, TimePs t) {
    const Action& a = g.action[id];
    end[id] = t + costs.time(std::max<int>(a.stage, 0), a.kind);
    clock[d] = end[id];
    first[d] = std::min(first[d], t);
    mem[d] += costs.mem(std::max<int>(a.stage, 0), a.kind);
    peak[d] = std::max(peak[d], mem[d]);
    done[id] = 1;
    order[d].push_back(a);
    if (w_of[id] >= 0) pending[d].push_back(w_of[id]);
    std::fill(blocked.begin(), blocked.end(), 0);
  };
  std::size_t remaining = n;
  while (remaining > 0) {
    int d = -1;
    for (int k = 0; k < D; ++k) {
      while (cursor[k] < g.device_begin[k + 1] && done[cursor[k]]) ++cursor[k];
      const bool has_w = head[k] < pending[k].size();
      if ((cursor[k] == g.device_begin[k + 1] && !has_w) || blocked[k]) continue;
      if (d < 0 || clock[k] < clock[d]) d = k;
    }
    PW_ASSERT(d >= 0, "squeeze_fill_w: no device can progress (the schedule deadlocks)");
    const std::int32_t id = cursor[d] < g.device_begin[d + 1] ? cursor[d] : -1;
    TimePs ready = id < 0 ? kNever : 0;
    bool known = true;
    for (int k = id < 0 ? 0 : g.dep_begin[id]; id >= 0 && k < g.dep_begin[id + 1]; ++k) {
      if (!done[g.dep[k]]) {
        known = false;
        break;
      }
      ready = std::max(ready, end[g.dep[k]] + (g.dep_hop[k] >= 0 ? costs.comm[g.dep_hop[k]] : 0));
    }
    // Skip W ids that the in-order walk already ran.
    while (head[d] < pending[d].size() && done[pending[d][head[d]]]) ++head[d];
    const bool has_w = head[d] < pending[d].size();
    if (id >= 0 && known && ready <= clock[d]) {
      run(d, id, clock[d]);
    } else if (has_w) {
      run(d, pending[d][head[d]++], clock[d]);
    } else if (id >= 0 && known) {
      run(d, id, ready);
    } else {
      blocked[d] = 1;
      continue;
    }
    --remaining;
  }
  schedule.actions = std::move(order);
  TimePs last = 0, first_all = kNever, cost = 0;
  for (int d = 0; d < D; ++d) {
    last = std::max(last, clock[d]);
    if (first[d] == kNever) continue;
    first_all = std::min(first_all, first[d]);
    cost = std::max(cost, clock[d] - first[d]);
  }
  if (stats) {
    stats->makespan = first_all == kNever ? 0 : last - first_all;
    stats->cost = cost;
    stats->peak = peak;
    stats->peak_memory = *std::max_element(peak.begin(), peak.end());
  }
  return last;
}

namespace {

// Flattens `block` into `ws` (its passes in ws.flat; device, dependencies, hops, cost index and
// round offset per pass, in that order); false when a pass starts (in slots) before a pass it
// depends on ends, or has a kind the squeeze does not time.
bool prepare_block(const BuildingBlock& block, BlockWorkspace& ws) {
  std::vector<const BlockPass*>& flat = ws.flat;
  const Placement& pl = block.placement;
  const int D = pl.num_devices, T = block.period;
  // Flatten the block's passes; index of (stage, kind) for dependency lookups.
  std::vector<int>& dev = ws.device;
  ws.pass_order.clear();
  dev.clear();
  ws.q.clear();
  flat.clear();
  flat.reserve(6 * D);
  for (int d = 0; d < D; ++d)
    for (const BlockPass& p : block.passes[d]) {
      flat.push_back(&p);
      dev.push_back(d);
    }
  const int P = static_cast<int>(flat.size());
  ws.dep0.assign(static_cast<std::size_t>(pl.num_stages()) * kNumActionKinds, -1);
  for (int k = 0; k < P; ++k) ws.dep0[flat[k]->stage * kNumActionKinds + int(flat[k]->kind)] = k;
  auto lookup = [&](int stage, ActionKind kind) {
    return stage < 0 ? -1 : ws.dep0[stage * kNumActionKinds + int(kind)];
  };
  auto back_of = [&](int stage) {
    const int b = lookup(stage, ActionKind::kB);
    return b >= 0 ? b : lookup(stage, ActionKind::kBW);
  };
  // deps[k*3 + i], hop stage per dep (-1: same device).
  ws.dep1.assign(static_cast<std::size_t>(P) * 3, -1);
  ws.hop1.assign(static_cast<std::size_t>(P) * 3, -1);
  ws.cost_index.resize(P);
  for (int k = 0; k < P; ++k) {
    const BlockPass& p = *flat[k];
    int* dk = &ws.dep1[k * 3];
    switch (p.kind) {
      case ActionKind::kF:
        dk[0] = lookup(pl.prev_stage(p.stage), ActionKind::kF);
        break;
      case ActionKind::kB:
      case ActionKind::kBW:
        dk[0] = lookup(p.stage, ActionKind::kF);
        dk[1] = pl.next_stage(p.stage) >= 0 ? back_of(pl.next_stage(p.stage)) : -1;
        dk[2] = lookup(p.stage, ActionKind::kR);
        break;
      case ActionKind::kW:
        dk[0] = lookup(p.stage, ActionKind::kB);
        break;
      case ActionKind::kR:
        dk[0] = lookup(p.stage, ActionKind::kF);
        break;
      default:
        return false;
    }
    for (int i = 0; i < 3; ++i) {
      if (dk[i] < 0) continue;
      const BlockPass& q = *flat[dk[i]];
      if (q.offset + q.length > p.offset) return false;
      if (dev[dk[i]] != dev[k]) ws.hop1[k * 3 + i] = q.stage;
    }
    ws.cost_index[k] = p.stage * kNumActionKinds + static_cast<int>(p.kind);
    ws.q.push_back(p.offset / T);
  }
  return true;
}

}  // namespace

bool squeeze_block_applies(const BuildingBlock& block, BlockWorkspace& ws) {
  return prepare_block(block, ws);
}

BlockSqueeze squeeze_block(const BuildingBlock& block, int m, const CostTable& costs,
                           BlockWorkspace& ws) {
  BlockSqueeze out;
  const Placement& pl = block.placement;
  const int D = pl.num_devices, T = block.period;
  if (!prepare_block(block, ws)) return out.makespan = -1, out;
  const std::vector<const BlockPass*>& flat = ws.flat;
  const std::vector<int>& dev = ws.device;
  const int P = static_cast<int>(flat.size());
  // Within a round, passes by slot of the period, then device (a collision-free block has no
  // two passes of one device in one slot, so the keys are distinct).
  ws.pass_order.resize(P);
  ws.order_key.resize(P);
  for (int k = 0; k < P; ++k) {
    ws.pass_order[k] = k;
    ws.order_key[k] = (flat[k]->offset % T) * D + dev[k];
  }
  std::sort(ws.pass_order.begin(), ws.pass_order.end(),
            [&](int a, int b) { return ws.order_key[a] < ws.order_key[b]; });
  int max_q = 0;
  for (int k = 0; k < P; ++k) max_q = std::max(max_q, ws.q[k]);
  // Per pass: how many rounds in a row (up to the last) it has ended a fixed time after its copy
  // one round earlier, and that time (the steady-state test below).
  ws.streak.assign(P, 0);
  ws.last_delta.assign(P, -1);
  constexpr TimePs kNever = std::numeric_limits<TimePs>::max();
  // Row P of `end` stays zero: missing dependencies point at it, so the hot loop has no branch.
  // The other rows are not cleared: a cell is read only after it is written (a pass's
  // dependencies lie earlier in the block, so they are timed in an earlier round or earlier in
  // the same one, for the same microbatch; the steady-state test below reads cells of rounds
  // already timed), and clearing them cost 50 KB of stores a call at p=16, m=64.
  const std::size_t M = static_cast<std::size_t>(m);
  ws.end.resize((static_cast<std::size_t>(P) + 1) * M);
  std::fill_n(ws.end.begin() + static_cast<std::ptrdiff_t>(P * M), M, TimePs{0});
  ws.timed.resize(static_cast<std::size_t>(P));
  for (int x = 0; x < P; ++x) {
    const int k = ws.pass_order[x];
    BlockWorkspace::Timed& t = ws.timed[x];
    t.row = static_cast<std::size_t>(k) * M;
    for (int i = 0; i < 3; ++i) {
      const int dk = ws.dep1[k * 3 + i];
      t.dep[i] = (dk < 0 ? static_cast<std::size_t>(P) : static_cast<std::size_t>(dk)) * M;
      t.hop[i] = ws.hop1[k * 3 + i] >= 0 ? costs.comm[ws.hop1[k * 3 + i]] : 0;
    }
    t.duration = costs.duration[ws.cost_index[k]];
    t.mem_delta = costs.mem_delta[ws.cost_index[k]];
    t.round_offset = ws.q[k];
    t.device = dev[k];
  }
  ws.clock.assign(D, 0);
  ws.first.assign(D, kNever);
  ws.mem.assign(D, 0.0);
  out.peak.assign(D, 0.0);
  TimePs last = 0;
  TimePs* end = ws.end.data();
  TimePs* clock = ws.clock.data();
  TimePs* first_start = ws.first.data();
  double* mem = ws.mem.data();
  double* peak = out.peak.data();
  for (int round = 0; round < max_q + m; ++round) {
    for (const BlockWorkspace::Timed& x : ws.timed) {
      const int j = round - x.round_offset;
      if (j < 0 || j >= m) continue;
      const int d = x.device;
      TimePs t = clock[d];
      t = std::max(t, end[x.dep[0] + j] + x.hop[0]);
      t = std::max(t, end[x.dep[1] + j] + x.hop[1]);
      t = std::max(t, end[x.dep[2] + j] + x.hop[2]);
      const TimePs e = t + x.duration;
      end[x.row + j] = e;
      clock[d] = e;
      first_start[d] = std::min(first_start[d], t);
      mem[d] += x.mem_delta;
      peak[d] = std::max(peak[d], mem[d]);
    }
    // Steady state: once every pass of round R ends a fixed time S after its copy one round
    // earlier, round R+1 repeats round R S later if every pass's inputs do. Each device's clock
    // does (the device's previous pass, in this round or the last). A dependency read L rounds
    // after it was timed does if its last L rounds ended S apart (L = 0: timed earlier in the
    // same round, by induction over the round's passes). A dependency that has not repeated so
    // long must never bind instead: it did not at R (strictly below the reader's start s, so s
    // came from the inputs that repeat) and each of its cells the reader still has to read, at
    // round R + t, ends by s + t S (with its hop), where the repeating inputs put the reader's
    // start then. By induction over the rounds R+1, R+2, ... every pass then ends S a round
    // later until the cool-down, and so do the cells computed after R that later rounds read
    // (those reach back at most max_q + 1 rounds): jump ahead, extrapolating every pass from
    // round R.
    if (round < max_q + 1 || round + 2 >= m) continue;
    TimePs shift = -1;
    bool same = true;
    for (int k = 0; k < P; ++k) {
      const std::size_t row = static_cast<std::size_t>(k) * M;
      const int j = round - ws.q[k];
      const TimePs dlt = end[row + j] - end[row + j - 1];
      if (shift < 0) shift = dlt;
      same = same && dlt == shift;
      ws.streak[k] = dlt == ws.last_delta[k] ? ws.streak[k] + 1 : 1;
      ws.last_delta[k] = dlt;
    }
    if (!same) continue;
    bool repeats = true;
    for (int k = 0; k < P && repeats; ++k) {
      const int j = round - ws.q[k];
      const TimePs start =
          end[static_cast<std::size_t>(k) * M + j] - costs.duration[ws.cost_index[k]];
      for (int i = 0; i < 3 && repeats; ++i) {
        const int dk = ws.dep1[k * 3 + i];
        if (dk < 0) continue;
        const int lag = ws.q[k] - ws.q[dk];
        if (lag == 0 || ws.streak[dk] >= lag) continue;
        const TimePs hop = ws.hop1[k * 3 + i] >= 0 ? costs.comm[ws.hop1[k * 3 + i]] : 0;
        const TimePs* cell = end + static_cast<std::size_t>(dk) * M + j;  // read this round
        repeats = cell[0] + hop < start;
        for (int t = 1; t <= lag && repeats; ++t) repeats = cell[t] + hop <= start + t * shift;
      }
    }
    if (!repeats) continue;
    const int K = (m - 2) - round;  // rounds skipped; round m-2 is then the last one computed
    if (K <= 0) continue;
    const TimePs add = shift * K;
    // The skipped rounds' cells that later rounds read (at most max_q + 1 rounds back).
    for (int k = 0; k < P; ++k) {
      const std::size_t row = static_cast<std::size_t>(k) * M;
      const int hi = round - ws.q[k];
      for (int j = std::max(hi + 1, hi + K - max_q - 1); j <= hi + K; ++j)
        end[row + j] = end[row + hi] + static_cast<TimePs>(j - hi) * shift;
    }
    for (int d = 0; d < D; ++d) ws.clock[d] += add;
    round += K;
    std::fill(ws.streak.begin(), ws.streak.end(), 0);
    std::fill(ws.last_delta.begin(), ws.last_delta.end(), TimePs{-1});
  }
  for (int d = 0; d < D; ++d) last = std::max(last, ws.clock[d]);
  TimePs first = kNever;
  for (int d = 0; d < D; ++d) {
    if (ws.first[d] == kNever) continue;
    first = std::min(first, ws.first[d]);
    out.cost = std::max(out.cost, ws.clock[d] - ws.first[d]);
    out.peak_memory = std::max(out.peak_memory, out.peak[d]);
  }
  out.makespan = first == kNever ? 0 : last - first;
  return out;
}

}  // namespace pw
