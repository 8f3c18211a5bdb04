// Reading nccl-tests logs (text and JSON) into NcclTestsLog; the fit is calibration/nccl_tests.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "calibration/nccl_tests.h"
#include "core/error.h"
#include "core/input_limits.h"

namespace pw::calibration {
namespace {

using hw::CollectiveKind;

// The largest message a row may hold: 2^44 B (16 TiB), far past any GPU's memory (nccl-tests
// sweeps to a few GiB), and small enough that the collective model's 64-bit picosecond clock
// holds its time at any effective bandwidth above about 4 MB/s (2 x 2^44 B in 9.2e6 s; a JSON
// size of 1e95 overflowed it: libFuzzer's find).
constexpr double kMaxRowBytes = 17592186044416.0;

// The file names and program names that say which collective a log measured: nccl-tests'
// binaries (hwmodels' one table of their names).
constexpr CollectiveKind kTested[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                      CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll,
                                      CollectiveKind::kSendRecv};

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool number(const std::string& t, double* out) {
  if (t.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Which collective, how many ranks on how many nodes: from what the log said (its collective
// line or program name, its device lines), else the file name, else the hints.
void finish_log(NcclTestsLog* log, std::string collective, int rank_lines,
                const std::set<std::string>& hosts, const std::string& file,
                const NcclTestsHints& hints) {
  if (log->rows.empty())
    throw ConfigError(file, "",
                      "no measurement rows; expected nccl-tests output (size count type ...)");
  if (collective.empty()) {
    const std::string base = file.substr(file.find_last_of('/') + 1);
    for (CollectiveKind k : kTested)
      if (base.find(std::string(hw::nccl_tests_name(k)) + "_perf") != std::string::npos)
        collective = hw::nccl_tests_name(k);
  }
  if (!hints.collective.empty()) collective = hints.collective;
  if (collective.empty())
    throw ConfigError(file, "",
                      "cannot tell which collective this log measured (no 'Collective test "
                      "starting' line, no *_perf in the file name); give --log-collective "
                      "(" +
                          hw::nccl_tests_names() + ")");
  CollectiveKind kind;
  if (!hw::parse_nccl_tests_name(collective, &kind))
    throw ConfigError(file, "collective",
                      fmt::format("'{}' is not a collective pipewright models; expected one of {}",
                                  collective, hw::nccl_tests_names()));
  log->collective = hw::nccl_tests_name(kind);
  log->kind = kind;
  log->ranks = hints.ranks > 0 ? hints.ranks : rank_lines;
  log->nodes = hints.nodes > 0 ? hints.nodes : static_cast<int>(hosts.size());
  if (log->ranks < 2)
    throw ConfigError(file, "",
                      "cannot tell the rank count (no '#  Rank N ... on HOST' lines or JSON "
                      "devices); give --log-ranks");
  if (log->nodes < 1)
    throw ConfigError(file, "",
                      "cannot tell the node count (no '#  Rank N ... on HOST' lines or JSON "
                      "devices); give --log-nodes");
  if (log->ranks % log->nodes != 0)
    throw ConfigError(file, "",
                      fmt::format("{} ranks on {} nodes; expected the same ranks on every node",
                                  log->ranks, log->nodes));
}

// nccl-tests' `-J FILE.json` output (nccl-tests >= 2.17): {"args": [program, ...], "devices":
// [{"rank", "hostname", ...}], "results": [{"size", "out_of_place": {"time" | "cpu_time",
// "alg_bw", "bus_bw", "nwrong"} | null, "in_place": {...}}, ...], ...}.
NcclTestsLog parse_json_log(const std::string& text, const std::string& file,
                            const NcclTestsHints& hints) {
  const nlohmann::json doc = parse_json_limited(text, file);
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    throw ConfigError(file, "results",
                      "missing; expected nccl-tests JSON output (-J FILE.json) with a results "
                      "list");
  NcclTestsLog log;
  log.file = file;
  std::string collective;
  if (doc.contains("args") && doc["args"].is_array() && !doc["args"].empty() &&
      doc["args"][0].is_string()) {
    const std::string prog = doc["args"][0].get<std::string>();
    const std::string base = prog.substr(prog.find_last_of('/') + 1);
    if (CollectiveKind k; hw::parse_nccl_tests_name(base, &k)) collective = base;
  }
  std::set<std::string> hosts;
  int ranks = 0;
  if (doc.contains("devices") && doc["devices"].is_array())
    for (const nlohmann::json& d : doc["devices"]) {
      ++ranks;
      if (d.is_object() && d.contains("hostname") && d["hostname"].is_string())
        hosts.insert(d["hostname"].get<std::string>());
    }
  const nlohmann::json& results = doc["results"];
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string at = fmt::format("results[{}]", i);
    const nlohmann::json& r = results[i];
    if (!r.is_object() || !r.contains("size") || !r["size"].is_number())
      throw ConfigError(file, at + ".size", "missing; expected a byte count");
    NcclTestsRow row;
    row.line = static_cast<int>(i) + 1;
    row.bytes = r["size"].get<double>();
    if (!(row.bytes > 0) || row.bytes != std::floor(row.bytes) || row.bytes > kMaxRowBytes)
      throw ConfigError(
          file, at + ".size",
          fmt::format("{}; expected a positive byte count of at most {}", row.bytes, kMaxRowBytes));
    // The faster of the out-of-place and in-place runs, as in the text form.
    double best = 0;
    for (const char* place : {"out_of_place", "in_place"}) {
      if (!r.contains(place) || r[place].is_null()) continue;
      const nlohmann::json& p = r[place];
      const char* key = p.contains("time") ? "time" : "cpu_time";
      if (!p.is_object() || !p.contains(key) || !p[key].is_number() || !(p[key].get<double>() > 0))
        throw ConfigError(file, fmt::format("{}.{}.time", at, place),
                          "expected a positive time in microseconds");
      const double us = p[key].get<double>();
      best = best > 0 ? std::min(best, us) : us;
      if (std::string(place) == "out_of_place" && p.contains("bus_bw") && p["bus_bw"].is_number())
        row.busbw = p["bus_bw"].get<double>() * 1e9;
    }
    if (best <= 0) throw ConfigError(file, at, "neither out_of_place nor in_place holds a time");
    row.time_s = best * 1e-6;
    if (!log.rows.empty() && row.bytes <= log.rows.back().bytes)
      throw ConfigError(
          file, at + ".size",
          fmt::format("{} after {}; expected ascending sizes", row.bytes, log.rows.back().bytes));
    log.rows.push_back(row);
  }
  finish_log(&log, collective, ranks, hosts, file, hints);
  return log;
}

}  // namespace

NcclTestsLog parse_nccl_tests(const std::string& text, const std::string& file,
                              const NcclTestsHints& hints) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return parse_json_log(text, file, hints);
  NcclTestsLog log;
  log.file = file;
  std::string collective;
  std::set<std::string> hosts;
  int rank_lines = 0;
  std::istringstream in(text);
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> t = tokens(line);
    if (t.empty()) continue;
    if (t[0][0] == '#') {
      // "# Collective test starting: all_reduce_perf" (nccl-tests >= 2.13)
      const std::size_t at = line.find("Collective test starting:");
      if (at != std::string::npos) {
        const std::vector<std::string> rest = tokens(line.substr(at + 25));
        if (!rest.empty()) collective = rest[0];
      }
      // "#  Rank  0 Group  0 Pid  1234 on   host-a device  0 [0x1b] NVIDIA H100 80GB HBM3"
      if (t.size() >= 7 && (t[0] == "#" && t[1] == "Rank")) {
        ++rank_lines;
        const auto on = std::find(t.begin(), t.end(), "on");
        if (on != t.end() && on + 1 != t.end()) hosts.insert(*(on + 1));
      }
      continue;
    }
    // A measurement row: size count type redop [root] time algbw busbw #wrong time algbw busbw
    // #wrong (13 columns since nccl-tests 2.10 added root; 12 before).
    if (t.size() != 13 && t.size() != 12)
      throw ConfigError(file, fmt::format("line {}", no),
                        fmt::format("expected an nccl-tests row of 12 or 13 columns (size count "
                                    "type redop root time algbw busbw #wrong time algbw busbw "
                                    "#wrong), got {}: a truncated or foreign log",
                                    t.size()));
    const int tc = t.size() == 13 ? 5 : 4;  // out-of-place time column; in-place at tc + 4
    NcclTestsRow r;
    r.line = no;
    double time_us = 0, busbw = 0;
    if (!number(t[0], &r.bytes) || r.bytes <= 0 || r.bytes != std::floor(r.bytes) ||
        r.bytes > kMaxRowBytes)
      throw ConfigError(
          file, fmt::format("line {}", no),
          fmt::format("size '{}' is not a positive byte count of at most {}", t[0], kMaxRowBytes));
    if (!number(t[tc], &time_us) || time_us <= 0 || !number(t[tc + 2], &busbw) || busbw < 0)
      throw ConfigError(file, fmt::format("line {}", no),
                        fmt::format("time '{}' and busbw '{}' are not a positive time (us) and a "
                                    "bandwidth (GB/s)",
                                    t[tc], t[tc + 2]));
    // The faster of the out-of-place and in-place runs: the same collective measured twice, and
    // a slow outlier in one of them (the published DGX H100 log has 68 us against 13.5 us at
    // 32 B) is noise, not the machine.
    double in_place_us = 0;
    if (number(t[tc + 4], &in_place_us) && in_place_us > 0)
      time_us = std::min(time_us, in_place_us);
    r.time_s = time_us * 1e-6;
    r.busbw = busbw * 1e9;
    if (!log.rows.empty() && r.bytes <= log.rows.back().bytes)
      throw ConfigError(file, fmt::format("line {}", no),
                        fmt::format("size {} after {}; expected ascending sizes", r.bytes,
                                    log.rows.back().bytes));
    log.rows.push_back(r);
  }
  finish_log(&log, collective, rank_lines, hosts, file, hints);
  return log;
}

}  // namespace pw::calibration
