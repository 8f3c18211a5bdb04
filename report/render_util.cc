#include "report/render_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pw::report_detail {

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

TimeUnit pick_time_unit(TimePs span) {
  if (span >= kPsPerSecond) return {1e12, "s"};
  if (span >= kPsPerMilli) return {1e9, "ms"};
  if (span >= kPsPerMicro) return {1e6, "µs"};
  if (span >= kPsPerNano) return {1e3, "ns"};
  return {1, "ps"};
}

std::string format_time(TimePs t, TimeUnit unit, int decimals) {
  return fmt::format("{:.{}f} {}", static_cast<double>(t) / unit.ps_per_unit, decimals,
                     unit.symbol);
}

std::string format_number(double v) {
  std::string s = fmt::format("{:.3f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string format_time_auto(TimePs t) {
  const TimeUnit u = pick_time_unit(t);
  const double v = static_cast<double>(t) / u.ps_per_unit;
  const int decimals = v < 10 ? 3 : (v < 100 ? 2 : 1);
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s + " " + u.symbol;
}

std::string coord(double v) {
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() >= 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

std::string format_bytes(double bytes) { return fmt::format("{:.2f} GiB", bytes / kGiB); }

std::string format_percent(double f) { return fmt::format("{:.1f}%", f * 100.0); }

std::vector<double> nice_ticks(double max, int target) {
  std::vector<double> ticks;
  if (!(max > 0) || target < 1) return {0.0};
  const double raw = max / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double k : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = k * mag;
    if (step >= raw) break;
  }
  for (int i = 0;; ++i) {
    const double t = step * i;
    if (t > max * (1 + 1e-9)) break;
    ticks.push_back(t);
  }
  return ticks;
}

Shade shade_of(ActionKind k) {
  switch (k) {
    case ActionKind::kF:
      return Shade::kF;
    case ActionKind::kB:
      return Shade::kB;
    case ActionKind::kW:
      return Shade::kW;
    case ActionKind::kBW:
      return Shade::kBW;
    case ActionKind::kR:
      return Shade::kR;
    case ActionKind::kOverlapFB:
      return Shade::kOverlap;
    case ActionKind::kOptStep:
      return Shade::kOpt;
    default:
      return Shade::kComm;
  }
}

const char* shade_class(Shade s) {
  switch (s) {
    case Shade::kF:
      return "F";
    case Shade::kB:
      return "B";
    case Shade::kW:
      return "W";
    case Shade::kBW:
      return "BW";
    case Shade::kR:
      return "R";
    case Shade::kComm:
      return "C";
    case Shade::kOpt:
      return "O";
    case Shade::kOverlap:
      return "FB";
  }
  return "C";
}

char shade_letter(Shade s) {
  switch (s) {
    case Shade::kF:
      return 'F';
    case Shade::kB:
    case Shade::kBW:
      return 'B';
    case Shade::kW:
      return 'W';
    case Shade::kR:
      return 'R';
    case Shade::kComm:
      return '~';
    case Shade::kOpt:
      return 'O';
    case Shade::kOverlap:
      return 'X';
  }
  return '?';
}

std::vector<int> chunk_of_stages(const Placement& placement) {
  std::vector<int> chunk(placement.stages.size(), 0);
  std::vector<int> seen(std::max(placement.num_devices, 0), 0);
  for (std::size_t s = 0; s < placement.stages.size(); ++s) {
    const int d = placement.stages[s].device;
    if (d >= 0 && d < placement.num_devices) chunk[s] = seen[d]++;
  }
  return chunk;
}

const std::vector<std::string>& kind_group_names() {
  static const std::vector<std::string> kNames = {
      "F", "B", "W", "BW", "R", "overlap", "sends", "collectives", "optimizer"};
  return kNames;
}

const std::string& kind_group(ActionKind k) {
  const auto& n = kind_group_names();
  switch (k) {
    case ActionKind::kF:
      return n[0];
    case ActionKind::kB:
      return n[1];
    case ActionKind::kW:
      return n[2];
    case ActionKind::kBW:
      return n[3];
    case ActionKind::kR:
      return n[4];
    case ActionKind::kOverlapFB:
      return n[5];
    case ActionKind::kSendF:
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
    case ActionKind::kRecvB:
      return n[6];
    case ActionKind::kReduceGrad:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
    case ActionKind::kPairReduce:
      return n[7];
    case ActionKind::kOptStep:
      return n[8];
  }
  return n[7];
}

double memory_scale(const ReportInput& input) {
  double m = std::max(input.memory_limit, 1e-9);
  for (const ScheduleReport& s : input.schedules) {
    if (!s.ok()) continue;
    for (const DeviceStats& d : s.result.device) m = std::max(m, d.peak_memory);
    for (const auto& series : s.result.memory)
      for (const MemoryPoint& p : series) m = std::max(m, p.value);
  }
  return m;
}

TimePs time_scale(const ReportInput& input) {
  TimePs t = 1;
  for (const ScheduleReport& s : input.schedules)
    if (s.ok()) t = std::max(t, s.result.makespan);
  return t;
}

}  // namespace pw::report_detail
