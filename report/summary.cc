// Summary-table columns and text timelines shared by the HTML, Markdown and text renderers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/render_util.h"

namespace pw::report_detail {
namespace {

using Getter = std::optional<double> (*)(const ScheduleReport&);
using Formatter = std::string (*)(double);

std::optional<double> max_peak_activation(const ScheduleReport& s) {
  if (s.result.device.empty()) return std::nullopt;
  double m = 0;
  for (const DeviceStats& d : s.result.device) m = std::max(m, d.peak_memory);
  return m;
}

std::optional<double> max_peak_bytes(const ScheduleReport& s) {
  if (s.peak_memory_bytes.empty()) return std::nullopt;
  return *std::max_element(s.peak_memory_bytes.begin(), s.peak_memory_bytes.end());
}

std::string time_text(double ps) { return format_time_auto(static_cast<TimePs>(ps)); }

void mark_best(Column& c) {
  std::optional<double> best;
  for (const auto& v : c.value) {
    if (!v) continue;
    if (!best || (c.lower_is_better ? *v < *best : *v > *best)) best = *v;
  }
  c.best.assign(c.value.size(), false);
  if (!best) return;
  int holders = 0, present = 0;
  for (std::size_t i = 0; i < c.value.size(); ++i) {
    const auto& v = c.value[i];
    present += v ? 1 : 0;
    // Relative tolerance: values computed along different paths may differ in the last bits.
    if (v && std::fabs(*v - *best) <= 1e-9 * std::max(1.0, std::fabs(*best))) {
      c.best[i] = true;
      ++holders;
    }
  }
  // A column where every figure ties (or there is only one) marks nothing: there is no best.
  if (holders == present) c.best.assign(c.value.size(), false);
}

void add_column(std::vector<Column>& out, const ReportInput& in, std::string header,
                bool lower_is_better, Getter get, Formatter format) {
  Column c;
  c.header = std::move(header);
  c.lower_is_better = lower_is_better;
  bool any = false;
  for (const ScheduleReport& s : in.schedules) {
    std::optional<double> v = s.ok() ? get(s) : std::nullopt;
    any = any || v.has_value();
    c.value.push_back(v);
    c.text.push_back(v ? format(*v) : std::string(s.ok() ? "n/a" : "—"));
  }
  if (!any) return;
  mark_best(c);
  out.push_back(std::move(c));
}

}  // namespace

std::vector<Column> summary_columns(const ReportInput& in) {
  std::vector<Column> cols;
  add_column(
      cols, in, "iteration time", true,
      [](const ScheduleReport& s) -> std::optional<double> {
        return static_cast<double>(s.iteration());
      },
      time_text);
  add_column(
      cols, in, "tokens/s", false, [](const ScheduleReport& s) { return s.tokens_per_second; },
      [](double v) { return fmt::format("{:.0f}", v); });
  add_column(
      cols, in, "MFU", false, [](const ScheduleReport& s) { return s.mfu; }, format_percent);
  add_column(
      cols, in, "bubble rate", true,
      [](const ScheduleReport& s) -> std::optional<double> { return s.result.bubble_rate; },
      format_percent);
  add_column(
      cols, in, "bubble (Megatron)", true,
      [](const ScheduleReport& s) -> std::optional<double> { return s.result.bubble_fraction; },
      format_number);
  add_column(cols, in,
             (in.memory_total ? "peak per device (" : "peak activations (") + in.memory_unit + ")",
             true, max_peak_activation, format_number);
  // With everything a device holds in the column before, the bytes would say it again.
  if (!in.memory_total) add_column(cols, in, "peak memory", true, max_peak_bytes, format_bytes);
  add_column(
      cols, in, "exposed comm", true,
      [](const ScheduleReport& s) -> std::optional<double> {
        if (!s.exposed_comm) return std::nullopt;
        return static_cast<double>(*s.exposed_comm);
      },
      time_text);
  add_column(
      cols, in, "fits", false,
      [](const ScheduleReport& s) -> std::optional<double> {
        if (!s.fits) return std::nullopt;
        return *s.fits ? 1.0 : 0.0;
      },
      [](double v) { return std::string(v > 0 ? "yes" : "no"); });
  // "fits" is a verdict, not a figure to rank.
  if (!cols.empty() && cols.back().header == "fits")
    cols.back().best.assign(cols.back().value.size(), false);
  return cols;
}

std::string text_timeline(const Schedule& schedule, const std::vector<TimePs>& start,
                          const std::vector<TimePs>& end, TimePs span, int width) {
  const int D = schedule.placement.num_devices;
  if (span <= 0 || width <= 0 || D <= 0) return "";
  // One cell per shortest compute pass when that fits, else span / width.
  TimePs shortest = 0;
  std::size_t id = 0;
  for (const auto& list : schedule.actions) {
    for (const Action& a : list) {
      const TimePs d = end[id] - start[id];
      if (is_compute(a.kind) && d > 0 && (shortest == 0 || d < shortest)) shortest = d;
      ++id;
    }
  }
  double quantum = static_cast<double>(shortest);
  if (quantum <= 0 || span / quantum > width) quantum = static_cast<double>(span) / width;
  const int cells = static_cast<int>(std::ceil(span / quantum - 1e-9));
  const std::vector<int> chunk = chunk_of_stages(schedule.placement);
  const TimeUnit unit = pick_time_unit(span);

  std::string out = fmt::format("1 cell = {}; lower case = second chunk; ~ = communication\n",
                                format_time(static_cast<TimePs>(std::llround(quantum)), unit, 3));
  std::string ruler(static_cast<std::size_t>(cells), ' ');
  for (int c = 0; c < cells; c += 10) {
    const std::string mark = std::to_string(c);
    for (std::size_t k = 0; k < mark.size() && c + k < ruler.size(); ++k) ruler[c + k] = mark[k];
  }
  while (!ruler.empty() && ruler.back() == ' ') ruler.pop_back();
  out += fmt::format("{:>6} {}\n", "cell", ruler);
  id = 0;
  for (int d = 0; d < D; ++d) {
    std::string row(static_cast<std::size_t>(cells), '.');
    const std::size_t first = id;
    // Communication first, compute painted over it: the compute stream is what matters.
    for (int pass = 0; pass < 2; ++pass) {
      std::size_t k = first;
      for (const Action& a : schedule.actions[d]) {
        const bool compute = shade_of(a.kind) != Shade::kComm;
        const std::size_t aid = k++;
        if (compute != (pass == 1) || end[aid] <= start[aid] || start[aid] < 0) continue;
        const int c0 = static_cast<int>(std::floor(start[aid] / quantum + 0.5));
        const int c1 = static_cast<int>(std::floor(end[aid] / quantum + 0.5));
        char ch = shade_letter(shade_of(a.kind));
        const bool odd = a.stage >= 0 && static_cast<std::size_t>(a.stage) < chunk.size() &&
                         chunk[a.stage] % 2 == 1;
        if (odd && ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
        for (int c = std::max(c0, 0); c < std::min(std::max(c1, c0 + 1), cells); ++c) row[c] = ch;
      }
      id = k;
    }
    out += fmt::format("{:>6} {}\n", fmt::format("dev{}", d), row);
  }
  return out;
}

}  // namespace pw::report_detail
