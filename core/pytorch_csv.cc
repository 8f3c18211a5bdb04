#include "core/pytorch_csv.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <vector>

#include "core/dependency.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/lowering.h"
#include "core/validator.h"

namespace pw {
namespace {

// PyTorch's computation types, longest first so prefixes do not shadow longer names.
struct TypeName {
  std::string_view token;
  ActionKind kind;
  bool has_microbatch;
};
constexpr TypeName kTypes[] = {
    {"REDUCE_GRAD", ActionKind::kReduceGrad, false},
    {"UNSHARD", ActionKind::kUnshard, false},
    {"RESHARD", ActionKind::kReshard, false},
    {"SEND_F", ActionKind::kSendF, true},
    {"RECV_F", ActionKind::kRecvF, true},
    {"SEND_B", ActionKind::kSendB, true},
    {"RECV_B", ActionKind::kRecvB, true},
    {"F", ActionKind::kF, true},
    {"I", ActionKind::kB, true},
    {"W", ActionKind::kW, true},
    {"B", ActionKind::kBW, true},
};
constexpr const char* kExpected =
    "expected STAGE{F,I,W,B}MICROBATCH, STAGE{SEND,RECV}_{F,B}MICROBATCH, "
    "STAGE{UNSHARD,RESHARD,REDUCE_GRAD} or (SF M;SB M)OVERLAP_F_B";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '"'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '"' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool read_number(std::string_view* s, long long* out) {
  auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), *out);
  if (ec != std::errc() || ptr == s->data()) return false;
  s->remove_prefix(static_cast<std::size_t>(ptr - s->data()));
  return true;
}

// Parses one simple token ("3I0", "0UNSHARD"); false if malformed.
bool parse_simple(std::string_view s, Action* a) {
  long long stage = 0, mb = -1;
  if (!read_number(&s, &stage) || stage < 0 || stage > 32767) return false;
  for (const TypeName& t : kTypes) {
    if (s.substr(0, t.token.size()) != t.token) continue;
    s.remove_prefix(t.token.size());
    if (t.has_microbatch) {
      if (!read_number(&s, &mb) || mb < 0 || mb > 0x7fffffff) return false;
    }
    if (!s.empty()) return false;
    *a = Action{t.kind, static_cast<std::int16_t>(stage), static_cast<std::int32_t>(mb)};
    return true;
  }
  return false;
}

bool parse_token(std::string_view s, Action* a) {
  constexpr std::string_view kOverlap = ")OVERLAP_F_B";
  if (s.empty() || s.front() != '(') return parse_simple(s, a);
  if (s.size() < kOverlap.size() + 2 || s.substr(s.size() - kOverlap.size()) != kOverlap)
    return false;
  std::string_view inner = s.substr(1, s.size() - 1 - kOverlap.size());
  const std::size_t semi = inner.find(';');
  if (semi == std::string_view::npos) return false;
  Action f, b;
  if (!parse_simple(trim(inner.substr(0, semi)), &f) || f.kind != ActionKind::kF) return false;
  if (!parse_simple(trim(inner.substr(semi + 1)), &b) || b.kind != ActionKind::kBW) return false;
  *a = Action{ActionKind::kOverlapFB, f.stage, f.microbatch, b.stage, b.microbatch};
  return true;
}

std::string cell_key(int line, int cell) { return fmt::format("line {}, cell {}", line, cell); }

struct Parsed {
  std::vector<std::vector<Action>> rows;
  std::vector<std::vector<int>> cells;  // 1-based column of each action
};

Parsed parse_rows(const std::string& text, const std::string& source) {
  std::vector<std::string_view> lines;
  std::string_view rest(text);
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    lines.push_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  while (!lines.empty() && trim(lines.back()).empty()) lines.pop_back();
  if (lines.empty()) throw ConfigError(source, "", "expected one CSV row per rank, got no rows");
  Parsed out;
  out.rows.resize(lines.size());
  out.cells.resize(lines.size());
  for (std::size_t r = 0; r < lines.size(); ++r) {
    std::string_view line = lines[r];
    for (int cell = 1;; ++cell) {
      const std::size_t comma = line.find(',');
      const std::string_view tok = trim(line.substr(0, comma));
      if (!tok.empty()) {
        Action a;
        if (!parse_token(tok, &a))
          throw ConfigError(source, cell_key(static_cast<int>(r) + 1, cell),
                            fmt::format("unknown action '{}' ({})", tok, kExpected));
        out.rows[r].push_back(a);
        out.cells[r].push_back(cell);
      }
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
    }
  }
  return out;
}

// Device of every stage as the file uses it; -1 where a stage never appears.
std::vector<int> observed_devices(const Parsed& in, int num_stages, const std::string& source) {
  std::vector<int> dev(static_cast<std::size_t>(num_stages), -1);
  auto see = [&](int stage, int r, int k) {
    int& d = dev[static_cast<std::size_t>(stage)];
    if (d >= 0 && d != r)
      throw ConfigError(source, cell_key(r + 1, in.cells[r][k]),
                        fmt::format("stage {} appears on rank {} and rank {}; each stage lives on "
                                    "one rank",
                                    stage, d, r));
    d = r;
  };
  for (std::size_t r = 0; r < in.rows.size(); ++r)
    for (std::size_t k = 0; k < in.rows[r].size(); ++k) {
      const Action& a = in.rows[r][k];
      see(a.stage, static_cast<int>(r), static_cast<int>(k));
      if (a.kind == ActionKind::kOverlapFB) see(a.stage2, static_cast<int>(r), static_cast<int>(k));
    }
  return dev;
}

bool fits(const std::vector<int>& dev, const Placement& pl) {
  for (std::size_t s = 0; s < dev.size(); ++s)
    if (dev[s] >= 0 && dev[s] != pl.stages[s].device) return false;
  return true;
}

Placement infer_placement(const Parsed& in, int num_stages, const CsvImportOptions& opt,
                          const std::string& source) {
  const int p = static_cast<int>(in.rows.size());
  const std::vector<int> dev = observed_devices(in, num_stages, source);
  const bool want_loop = opt.stage_map == "auto" || opt.stage_map == "loop";
  const bool want_v = opt.stage_map == "auto" || opt.stage_map == "v";
  if (!want_loop && !want_v)
    throw ConfigError(source, "stage map", "expected auto, loop or v, got '" + opt.stage_map + "'");
  if (want_loop && num_stages % p == 0) {
    Placement pl = num_stages == p ? linear_placement(p, opt.num_layers)
                                   : loop_placement(p, num_stages / p, opt.num_layers);
    if (fits(dev, pl)) return pl;
  }
  if (want_v && num_stages == 2 * p) {
    Placement pl = v_placement(p, opt.num_layers);
    if (fits(dev, pl)) return pl;
  }
  std::string seen;
  for (std::size_t s = 0; s < dev.size(); ++s)
    seen += fmt::format("{}{}->{}", s ? ", " : "", s,
                        dev[s] < 0 ? std::string("?") : std::to_string(dev[s]));
  throw ConfigError(source, "stage map",
                    fmt::format("{} stages on {} ranks fit no {} stage-to-rank map (stage->rank: "
                                "{}); loop needs rank = stage mod {}, v needs {} stages",
                                num_stages, p, want_loop && want_v ? "loop or v" : opt.stage_map,
                                seen, p, 2 * p));
}

// One-slot-per-compute-action timing (communication free) used to line up compute_only rows.
std::vector<std::vector<int>> slot_columns(const Schedule& s) {
  const DependencyGraph g = build_dependency_graph(s);
  std::vector<int> end(g.size(), 0), clock(static_cast<std::size_t>(s.placement.num_devices), 0);
  std::vector<std::vector<int>> cols(s.actions.size());
  for (std::size_t d = 0; d < s.actions.size(); ++d) cols[d].resize(s.actions[d].size());
  for (const std::int32_t id : g.order) {
    const int d = g.device_of[id];
    int t = clock[d];
    for (int k = g.dep_begin[id]; k < g.dep_begin[id + 1]; ++k) t = std::max(t, end[g.dep[k]]);
    end[id] = t + 1;
    clock[d] = t + 1;
    cols[d][id - g.device_begin[d]] = t;
  }
  return cols;
}

std::string token(const Action& a) {
  switch (a.kind) {
    case ActionKind::kF:
      return fmt::format("{}F{}", a.stage, a.microbatch);
    case ActionKind::kB:
      return fmt::format("{}I{}", a.stage, a.microbatch);
    case ActionKind::kW:
      return fmt::format("{}W{}", a.stage, a.microbatch);
    case ActionKind::kBW:
      return fmt::format("{}B{}", a.stage, a.microbatch);
    case ActionKind::kSendF:
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
    case ActionKind::kRecvB:
      return fmt::format("{}{}{}", a.stage, action_kind_name(a.kind), a.microbatch);
    case ActionKind::kOverlapFB:
      return fmt::format("({}F{};{}B{})OVERLAP_F_B", a.stage, a.microbatch, a.stage2,
                         a.microbatch2);
    case ActionKind::kReduceGrad:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
      return fmt::format("{}{}", a.stage, action_kind_name(a.kind));
    default:
      throw ConfigError("", "--export-csv",
                        fmt::format("PyTorch's CSV format has no token for {} ({})",
                                    action_kind_name(a.kind), describe_action(a)));
  }
}

bool is_p2p(ActionKind k) {
  return k == ActionKind::kSendF || k == ActionKind::kRecvF || k == ActionKind::kSendB ||
         k == ActionKind::kRecvB;
}

// PyTorch's runtime scales a stage's gradients by 1/M (scale_grads) and reduces them over data
// parallelism at that stage's REDUCE_GRAD; its compute_only lowering (_add_reduce_grad) puts one
// right after the action that completes the stage's M-th weight gradient (W, or a full backward
// B, alone or inside OVERLAP_F_B). A compute_comms CSV runs as written, so a stage without one
// gets it here by the same rule: without it PyTorch leaves the gradients M times too large.
void add_reduce_grad(Schedule& s) {
  std::vector<char> has(static_cast<std::size_t>(s.placement.num_stages()), 0);
  for (const auto& dev : s.actions)
    for (const Action& a : dev)
      if (a.kind == ActionKind::kReduceGrad && a.stage >= 0) has[std::size_t(a.stage)] = 1;
  std::vector<int> done(has.size(), 0);
  for (auto& dev : s.actions) {
    std::vector<Action> out;
    out.reserve(dev.size() + 2);
    for (std::size_t k = 0; k < dev.size(); ++k) {
      const Action& a = dev[k];
      out.push_back(a);
      int stage = -1;
      if (a.kind == ActionKind::kW || a.kind == ActionKind::kBW) stage = a.stage;
      if (a.kind == ActionKind::kOverlapFB) stage = a.stage2;
      if (stage < 0 || has[std::size_t(stage)]) continue;
      if (++done[std::size_t(stage)] != s.num_microbatches) continue;
      // after the backward's own gradient send, as PyTorch's lowering orders them, so that the
      // reduction does not hold up the previous stage
      if (k + 1 < dev.size() && dev[k + 1].kind == ActionKind::kSendB && dev[k + 1].stage == stage)
        out.push_back(dev[++k]);
      out.push_back(Action{ActionKind::kReduceGrad, static_cast<std::int16_t>(stage), -1});
    }
    dev = std::move(out);
  }
}

}  // namespace

bool parse_csv_form(const std::string& name, CsvForm* out) {
  if (name == "compute_only") return *out = CsvForm::kComputeOnly, true;
  if (name == "compute_comms") return *out = CsvForm::kComputeComms, true;
  return false;
}

Schedule schedule_from_pytorch_csv(const std::string& text, const std::string& source,
                                   const CsvImportOptions& opt) {
  const Parsed in = parse_rows(text, source);
  int num_stages = 0, num_mb = 0;
  for (const auto& row : in.rows)
    for (const Action& a : row) {
      num_stages = std::max({num_stages, a.stage + 1, a.stage2 + 1});
      num_mb = std::max({num_mb, a.microbatch + 1, a.microbatch2 + 1});
    }
  if (num_stages == 0) throw ConfigError(source, "", "expected at least one action, got none");
  if (num_mb == 0) throw ConfigError(source, "", "expected at least one microbatch pass");
  Schedule s;
  s.name = opt.name;
  s.placement = infer_placement(in, num_stages, opt, source);
  s.num_microbatches = num_mb;
  s.actions = in.rows;
  validate_schedule(s, source, [&](int device, int position) {
    return cell_key(device + 1, in.cells[device][position]);
  });
  return s;
}

Schedule load_pytorch_csv(const std::string& path, const CsvImportOptions& options) {
  return schedule_from_pytorch_csv(read_file(path), path, options);
}

std::string schedule_to_pytorch_csv(const Schedule& schedule, CsvForm form) {
  if (schedule.placement.num_pipelines() > 1)
    throw ConfigError("", "--export-csv",
                      "PyTorch's CSV format holds one pipeline; this schedule has " +
                          std::to_string(schedule.placement.num_pipelines()));
  Schedule s = form == CsvForm::kComputeComms ? lower_communication(schedule) : schedule;
  // OPT is the training loop's step after the schedule, and R is the module's activation
  // checkpointing in PyTorch: neither is a CSV action. compute_only holds compute alone: PyTorch
  // refuses any other token there and inserts SEND/RECV, UNSHARD/RESHARD and REDUCE_GRAD itself.
  const auto compute_only_drops = [](ActionKind k) {
    return is_p2p(k) || k == ActionKind::kReduceGrad || k == ActionKind::kUnshard ||
           k == ActionKind::kReshard;
  };
  for (auto& dev : s.actions)
    dev.erase(std::remove_if(dev.begin(), dev.end(),
                             [&](const Action& a) {
                               return a.kind == ActionKind::kOptStep || a.kind == ActionKind::kR ||
                                      (form == CsvForm::kComputeOnly && compute_only_drops(a.kind));
                             }),
              dev.end());
  if (form == CsvForm::kComputeComms) add_reduce_grad(s);
  std::vector<std::vector<int>> cols;
  if (form == CsvForm::kComputeOnly) cols = slot_columns(s);
  std::string out;
  for (std::size_t d = 0; d < s.actions.size(); ++d) {
    int col = 0;
    for (std::size_t k = 0; k < s.actions[d].size(); ++k) {
      const int want = form == CsvForm::kComputeOnly ? cols[d][k] : static_cast<int>(k);
      for (; col < want; ++col) out += col ? "," : "";
      if (col > 0) out += ',';
      out += token(s.actions[d][k]);
      ++col;
    }
    out += '\n';
  }
  return out;
}

void save_pytorch_csv(const std::string& path, const Schedule& schedule, CsvForm form) {
  write_file_atomic(path, schedule_to_pytorch_csv(schedule, form));
}

}  // namespace pw
