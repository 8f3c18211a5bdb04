// Markdown and plain-text renderings: the same tables as the HTML page, timelines as text.
#include <fmt/format.h>

#include <algorithm>

#include "report/render_util.h"
#include "report/report.h"

namespace pw {
namespace {

using namespace report_detail;

// A table rendered either as Markdown or as space-aligned text. Column 0 is left-aligned.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  std::string markdown() const {
    std::string out = "|";
    for (const std::string& h : header) out += " " + h + " |";
    out += "\n|";
    for (std::size_t c = 0; c < header.size(); ++c) out += c == 0 ? "---|" : "--:|";
    out += "\n";
    for (const auto& r : rows) {
      out += "|";
      for (const std::string& cell : r) out += " " + cell + " |";
      out += "\n";
    }
    return out;
  }

  std::string text() const {
    std::vector<std::size_t> width(header.size(), 0);
    auto len = [](const std::string& s) {
      // Display width: count UTF-8 lead bytes only.
      std::size_t n = 0;
      for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
      return n;
    };
    for (std::size_t c = 0; c < header.size(); ++c) width[c] = len(header[c]);
    for (const auto& r : rows)
      for (std::size_t c = 0; c < r.size() && c < width.size(); ++c)
        width[c] = std::max(width[c], len(r[c]));
    auto line = [&](const std::vector<std::string>& r) {
      std::string out;
      for (std::size_t c = 0; c < r.size(); ++c) {
        const std::string pad(width[c] > len(r[c]) ? width[c] - len(r[c]) : 0, ' ');
        out += c == 0 ? r[c] + pad : "  " + pad + r[c];
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      return out + "\n";
    };
    std::string out = line(header);
    std::size_t total = 0;
    for (std::size_t c = 0; c < width.size(); ++c) total += width[c] + (c ? 2 : 0);
    out += std::string(total, '-') + "\n";
    for (const auto& r : rows) out += line(r);
    return out;
  }
};

Table summary(const ReportInput& in, bool markdown) {
  const std::vector<Column> cols = summary_columns(in);
  Table t;
  t.header.push_back("schedule");
  for (const Column& c : cols) t.header.push_back(c.header);
  for (std::size_t i = 0; i < in.schedules.size(); ++i) {
    const ScheduleReport& s = in.schedules[i];
    std::vector<std::string> row{s.name};
    if (!s.ok()) {
      // Plain text lists failures under the table: a long reason would widen a column.
      if (!markdown) continue;
      row.push_back("could not be built: " + s.error);
      row.resize(t.header.size());
      t.rows.push_back(row);
      continue;
    }
    for (const Column& c : cols) {
      if (!c.best[i]) {
        row.push_back(c.text[i]);
      } else {
        row.push_back(markdown ? "**" + c.text[i] + "** ★" : c.text[i] + " *");
      }
    }
    t.rows.push_back(row);
  }
  return t;
}

// Per device: busy, idle and peak memory; the peak's bytes too unless the peak already counts
// everything the device holds (`total`).
Table devices(const ScheduleReport& s, const std::string& unit, bool total) {
  Table t;
  t.header = {"device", "busy", "idle", "peak (" + unit + ")"};
  const bool bytes = !s.peak_memory_bytes.empty() && !total;
  if (bytes) t.header.push_back("peak memory");
  const TimePs span = s.result.makespan;
  for (std::size_t d = 0; d < s.result.device.size(); ++d) {
    const DeviceStats& ds = s.result.device[d];
    std::vector<std::string> row{fmt::format("dev{}", d), format_time_auto(ds.busy),
                                 format_time_auto(std::max<TimePs>(0, span - ds.busy)),
                                 format_number(ds.peak_memory)};
    if (bytes)
      row.push_back(d < s.peak_memory_bytes.size() ? format_bytes(s.peak_memory_bytes[d]) : "n/a");
    t.rows.push_back(row);
  }
  return t;
}

Table curve_table(const Curve& c) {
  Table t;
  t.header = {c.x_label, c.y_label, "note"};
  for (const CurvePoint& p : c.points)
    t.rows.push_back(
        {format_number(p.x), c.y_is_fraction ? format_percent(p.y) : format_number(p.y), p.label});
  return t;
}

Table pareto_table(const std::vector<ParetoPoint>& pts) {
  Table t;
  t.header = {"configuration", "iteration time", "peak memory", "tokens/s", "on front"};
  for (const ParetoPoint& p : pts)
    t.rows.push_back({p.label, format_time_auto(p.iteration_time),
                      format_bytes(p.peak_memory_bytes),
                      p.tokens_per_second ? fmt::format("{:.0f}", *p.tokens_per_second) : "n/a",
                      p.on_front ? "yes" : "no"});
  return t;
}

Table measured_table(const RunComparison& c) {
  Table t;
  t.header = {"kind", "actions", "predicted", "measured", "error"};
  std::vector<KindError> rows = c.kinds;
  rows.push_back(c.iteration);
  for (const KindError& k : rows)
    t.rows.push_back({k.kind, std::to_string(k.count), format_time_auto(k.predicted),
                      format_time_auto(k.measured),
                      k.measured > 0 ? fmt::format("{:+.1f}%", k.error() * 100) : "n/a"});
  return t;
}

// Shared structure of the two text formats; `md` picks Markdown syntax.
std::string render(const ReportInput& in, bool md) {
  auto heading = [&](int level, const std::string& s) {
    if (md) return std::string(static_cast<std::size_t>(level), '#') + " " + s + "\n\n";
    const char rule = level <= 2 ? '=' : '-';
    return s + "\n" + std::string(std::max<std::size_t>(s.size(), 3), rule) + "\n\n";
  };
  auto table = [&](const Table& t) { return (md ? t.markdown() : t.text()) + "\n"; };
  std::string out = heading(1, in.title);
  if (!in.context.empty()) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : in.context) parts.push_back(k + " = " + v);
    out += fmt::format("{}\n\n", fmt::join(parts, " · "));
  }
  if (!in.schedules.empty()) {
    out += heading(2, "Summary");
    out += table(summary(in, md));
    if (!md) {
      bool failed = false;
      for (const ScheduleReport& s : in.schedules) {
        if (s.ok()) continue;
        out += s.name + ": could not be built: " + s.error + "\n";
        failed = true;
      }
      if (failed) out += "\n";
    }
    out += md ? "★ best in its column. Bubble rate: zero-bubble convention; bubble (Megatron): "
                "idle over ideal time.\n\n"
              : "* best in its column. Bubble rate: zero-bubble convention; bubble (Megatron): "
                "idle over ideal time.\n\n";
    out += heading(2, "Timelines");
    for (const ScheduleReport& s : in.schedules) {
      out += heading(3, s.description.empty() ? s.name : s.name + " — " + s.description);
      if (!s.ok()) {
        out += "Could not be built: " + s.error + "\n\n";
        continue;
      }
      out += md ? "```text\n" : "";
      out += text_timeline(s.schedule, s.result.start, s.result.end, s.result.makespan, 120);
      out += md ? "```\n\n" : "\n";
      out += table(devices(s, in.memory_unit, in.memory_total));
    }
  }
  for (const Curve& c : in.curves) out += heading(2, c.title) + table(curve_table(c));
  if (!in.pareto.empty())
    out += heading(2, "Planner: iteration time vs memory") + table(pareto_table(in.pareto));
  if (in.measured) {
    const RunComparison& c = *in.measured;
    out += heading(2, "Predicted vs measured");
    out += fmt::format("{} on {} ({}). Error = (predicted - measured) / measured.\n\n", c.name,
                       c.device.empty() ? "unknown device" : c.device,
                       c.backend.empty() ? "backend n/a" : c.backend);
    out += table(measured_table(c));
  }
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n')
    out.pop_back();
  return out;
}

}  // namespace

std::string render_markdown(const ReportInput& input) { return render(input, true); }
std::string render_text(const ReportInput& input) { return render(input, false); }

}  // namespace pw
