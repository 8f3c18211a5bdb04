// The self-contained HTML page: inline CSS, inline SVG, no scripts, no network.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "report/render_util.h"
#include "report/report.h"
#include "report/svg.h"

namespace pw {
namespace {

using namespace report_detail;

struct Swatch {
  Shade shade;
  const char* base;
  const char* light;  // odd chunks (second model chunk on a device)
  const char* label;
};

constexpr std::array<Swatch, 8> kPalette = {{
    {Shade::kF, "#3b6fb6", "#8db3e2", "F forward"},
    {Shade::kB, "#3e9651", "#9bd3a4", "B backward (input grad)"},
    {Shade::kW, "#ec8a2d", "#f7c48f", "W backward (weight grad)"},
    {Shade::kBW, "#2a7f62", "#86c9b2", "BW full backward"},
    {Shade::kR, "#8c8c8c", "#c4c4c4", "R recompute"},
    {Shade::kOverlap, "#3b6fb6", "#3e9651", "F&B overlapped"},
    {Shade::kComm, "#8e63b5", "#c3a6de", "communication"},
    {Shade::kOpt, "#5a6372", "#9aa1ad", "optimizer"},
}};

constexpr const char* kCss = R"(:root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb}
*{box-sizing:border-box}
body{margin:0;background:#f4f5f7;color:var(--fg);font:14px/1.45 "Inter","Segoe UI","Helvetica Neue",Arial,"DejaVu Sans",sans-serif}
main{max-width:1140px;margin:0 auto;padding:28px 24px 40px}
h1{font-size:24px;margin:0 0 2px;font-weight:650;letter-spacing:-.01em}
h2{font-size:17px;margin:28px 0 8px;font-weight:620}
h3{font-size:15px;margin:0;font-weight:640}
.sub{color:var(--muted);margin:0}
.ctx{display:flex;flex-wrap:wrap;gap:6px;margin:12px 0 0;padding:0;list-style:none}
.ctx li{background:#fff;border:1px solid var(--line);border-radius:999px;padding:2px 11px;font-size:12.5px}
.ctx b{font-weight:600;color:var(--muted);margin-right:4px}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:14px 18px;margin:12px 0;box-shadow:0 1px 2px rgba(16,24,40,.05);overflow-x:auto}
.head{display:flex;flex-wrap:wrap;align-items:baseline;gap:4px 14px;margin-bottom:8px}
.desc{color:var(--muted);font-size:12.5px}
.chips{display:flex;gap:6px;margin-left:auto;flex-wrap:wrap}
.chip{background:#f2f4f7;border-radius:6px;padding:1px 8px;font-size:12px;font-variant-numeric:tabular-nums}
.chip b{font-weight:600;color:var(--muted);margin-right:3px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{font-size:11.5px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);font-weight:600}
td:first-child,th:first-child{text-align:left}
td.name{font-weight:620}
td.best{background:#ecfdf3;color:#05603a;font-weight:650}
td.best::after{content:" \2605";color:#12b76a}
td.bad{color:#b42318}
tr.failed td{color:#b42318}
td.why{text-align:left;white-space:normal;font-size:12.5px}
.err{color:#b42318;background:#fef3f2;border:1px solid #fecdca;border-radius:8px;padding:8px 12px;margin:4px 0 0}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;font-size:12.5px;color:#374151;margin:6px 0 0}
.sw{display:inline-block;width:14px;height:14px;border-radius:3px;vertical-align:-2px;margin-right:5px;box-shadow:inset 0 0 0 1px rgba(0,0,0,.08)}
.sw.FB{background:linear-gradient(#3b6fb6 50%,#3e9651 50%)}
.cap{color:var(--muted);font-size:12px;margin:6px 0 0}
.note{color:var(--muted);font-size:12.5px;margin:8px 0 0}
svg{display:block}
svg text{font-family:inherit}
.lane{fill:#f2f4f7}.lane.cl{fill:#f7f7fb}
.grid{stroke:#e5e7eb;stroke-width:1}
.tick{font-size:10.5px;fill:#6b7280;text-anchor:middle}.tick.ty{text-anchor:end}
.unit{font-size:10.5px;fill:#6b7280;text-anchor:end}
.dev{font-size:11.5px;fill:#374151;text-anchor:end;font-weight:550}
.blk,.xblk{stroke:#fff;stroke-width:.7}
.blk:hover,.xblk:hover{stroke:#111827;stroke-width:1.6}
.lbl{font-size:10px;fill:#fff;text-anchor:middle;pointer-events:none;font-weight:600}
.lbl.dk{fill:#1f2937}
.end{stroke:#111827;stroke-width:1;stroke-dasharray:3 3}
.endl{font-size:11px;font-weight:650;fill:#111827}.endl.r{text-anchor:end}
.strip{fill:#f7f8fa}
.area{fill:#b4cbee;stroke:#3b6fb6;stroke-width:1.2}
.limit{stroke:#d92d20;stroke-width:1;stroke-dasharray:4 3}
.peak{font-size:11px;fill:#374151}
.axes{fill:none;stroke:#d0d5dd}
.axl{font-size:12px;fill:#374151;text-anchor:middle}
.cline{fill:none;stroke:#3b6fb6;stroke-width:2}
.pt{fill:#fff;stroke:#3b6fb6;stroke-width:2}
.ptl{font-size:10.5px;fill:#374151;text-anchor:middle}.ptl.l{text-anchor:start}.ptl.n{font-weight:600}
.stair{fill:none;stroke:#3e9651;stroke-width:2}
.pf{fill:#3e9651}.pd{fill:#c4c4c4}
.spark rect{fill:#8db3e2}.spark rect.mx{fill:#3b6fb6}
.rel rect{fill:#d0d5dd}.rel rect.b{fill:#12b76a}
footer{color:var(--muted);font-size:12px;margin-top:28px}
)";

std::string palette_css() {
  std::string out;
  for (const Swatch& s : kPalette) {
    if (s.shade == Shade::kOverlap) continue;
    const char* c = shade_class(s.shade);
    out += fmt::format(".{0}{{fill:{1}}}.{0}.c1{{fill:{2}}}.sw.{0}{{background:{1}}}\n", c, s.base,
                       s.light);
  }
  return out;
}

std::string legend(const ReportInput& in) {
  std::array<bool, 8> used{};
  bool chunks = false;
  for (const ScheduleReport& s : in.schedules) {
    if (!s.ok()) continue;
    chunks = chunks || s.schedule.placement.num_stages() > s.schedule.placement.num_devices;
    for (const auto& list : s.schedule.actions)
      for (const Action& a : list) used[static_cast<int>(shade_of(a.kind))] = true;
  }
  std::string out = R"(<div class="legend">)";
  for (const Swatch& s : kPalette)
    if (used[static_cast<int>(s.shade)])
      out += fmt::format(R"(<span><i class="sw {}"></i>{}</span>)", shade_class(s.shade), s.label);
  if (chunks)
    out += R"(<span><i class="sw F"></i><i class="sw F c1" style="background:#8db3e2"></i>)"
           "darker / lighter = first / second chunk on a device</span>";
  out += R"(<span><i class="sw" style="background:#f2f4f7"></i>idle</span></div>)";
  return out;
}

std::string spark(const ScheduleReport& s, double mem_max, const std::string& unit) {
  const int D = static_cast<int>(s.result.device.size());
  if (D == 0) return "";
  const double w = std::max(3.0, std::min(10.0, 96.0 / D)), h = 18;
  double top = 0;
  for (const DeviceStats& d : s.result.device) top = std::max(top, d.peak_memory);
  std::string bars, title = "peak per device (" + unit + "):";
  for (int d = 0; d < D; ++d) {
    const double v = s.result.device[d].peak_memory;
    const double bh = std::max(1.0, h * v / mem_max);
    bars += fmt::format(R"(<rect{} x="{}" y="{}" width="{}" height="{}"/>)",
                        v >= top - 1e-12 ? R"( class="mx")" : "", coord(d * w), coord(h - bh),
                        coord(w - 1), coord(bh));
    title += fmt::format(" {}", format_number(v));
  }
  return fmt::format(
      R"(<svg class="spark" width="{0}" height="{1}" viewBox="0 0 {0} {1}" style="display:inline-block;vertical-align:middle"><title>{2}</title>{3}</svg>)",
      coord(D * w), coord(h), escape(title), bars);
}

std::string rel_bar(double ratio, bool best) {
  const double w = 60 * std::clamp(1.0 / std::max(ratio, 1e-9), 0.0, 1.0);
  return fmt::format(
      R"(<svg class="rel" width="62" height="10" style="display:inline-block;margin-left:6px"><rect{} x="0" y="1" width="{}" height="8" rx="2"/></svg>)",
      best ? R"( class="b")" : "", coord(w));
}

std::string summary_table(const ReportInput& in) {
  const std::vector<Column> cols = summary_columns(in);
  const double mem_max = memory_scale(in);
  TimePs best_time = 0;
  for (const ScheduleReport& s : in.schedules)
    if (s.ok() && (best_time == 0 || s.iteration() < best_time)) best_time = s.iteration();
  std::string out = "<table><thead><tr><th>schedule</th>";
  for (const Column& c : cols) out += fmt::format("<th>{}</th>", escape(c.header));
  out += "<th>speed vs best</th><th>peak per device</th></tr></thead><tbody>";
  for (std::size_t i = 0; i < in.schedules.size(); ++i) {
    const ScheduleReport& s = in.schedules[i];
    const std::string anchor = dom_id(s.name, static_cast<int>(i));
    if (!s.ok()) {
      out += fmt::format(
          R"(<tr class="failed"><td class="name"><a href="#{}">{}</a></td><td class="why" colspan="{}">could not be built: {}</td></tr>)",
          anchor, escape(s.name), cols.size() + 2, escape(s.error));
      continue;
    }
    out += fmt::format(R"(<tr><td class="name"><a href="#{}">{}</a></td>)", anchor, escape(s.name));
    for (const Column& c : cols) {
      const bool bad = c.header == "fits" && c.value[i] && *c.value[i] == 0;
      out += fmt::format("<td{}>{}</td>",
                         c.best[i] ? R"( class="best")" : (bad ? R"( class="bad")" : ""),
                         escape(c.text[i]));
    }
    const double ratio =
        best_time > 0 ? static_cast<double>(s.iteration()) / static_cast<double>(best_time) : 1;
    out +=
        fmt::format("<td>{:.2f}×{}</td><td>{}</td></tr>", ratio,
                    rel_bar(ratio, s.iteration() == best_time), spark(s, mem_max, in.memory_unit));
  }
  out += "</tbody></table>";
  out +=
      R"(<p class="note">&#9733; best in its column. Bubble rate: zero-bubble papers' convention )"
      "(idle share of the longest device span); bubble (Megatron): idle time over ideal time. "
      "Speed vs best: best iteration time over this one.</p>";
  return out;
}

std::string chip(const std::string& k, const std::string& v) {
  return fmt::format(R"(<span class="chip"><b>{}</b>{}</span>)", escape(k), escape(v));
}

std::string schedule_card(const ReportInput& in, std::size_t i, const Frame& frame,
                          double mem_max) {
  const ScheduleReport& s = in.schedules[i];
  const std::string id = dom_id(s.name, static_cast<int>(i));
  std::string out = fmt::format(
      R"(<article class="card sched" id="{}"><div class="head"><h3>{}</h3>)", id, escape(s.name));
  if (!s.description.empty())
    out += fmt::format(R"(<span class="desc">{}</span>)", escape(s.description));
  if (!s.ok()) {
    out += fmt::format(R"(</div><p class="err">Could not be built: {}</p></article>)",
                       escape(s.error));
    return out;
  }
  double peak = 0;
  for (const DeviceStats& d : s.result.device) peak = std::max(peak, d.peak_memory);
  out += R"(<span class="chips">)" + chip("iteration", format_time_auto(s.iteration())) +
         chip("bubble", format_percent(s.result.bubble_rate)) +
         chip("peak", format_number(peak) + " " + in.memory_unit) +
         chip("actions", std::to_string(s.schedule.total_actions())) + "</span></div>";
  TimelineSpec spec;
  spec.id = id;
  spec.schedule = &s.schedule;
  spec.start = &s.result.start;
  spec.end = &s.result.end;
  spec.own_span = s.result.makespan;
  spec.frame = frame;
  out += timeline_svg(spec);
  if (!s.result.memory.empty()) {
    out += fmt::format(
        R"(<p class="cap">{} per device over time ({}; same scale for every schedule, full height = {}))",
        in.memory_total ? "Memory (model state, activations, buffers)" : "Activation memory",
        escape(in.memory_unit), format_number(mem_max));
    if (in.memory_limit > 0)
      out += fmt::format("; dashed red line: limit {}", format_number(in.memory_limit));
    out += "</p>";
    out += memory_svg(id, s.result.memory, s.result.device, mem_max, in.memory_limit,
                      in.memory_unit, frame);
  }
  return out + "</article>";
}

std::string signed_percent(double e) { return fmt::format("{:+.1f}%", e * 100); }

std::string measured_section(const RunComparison& c) {
  std::string out = R"(<section id="measured"><h2>Predicted vs measured</h2><div class="card">)";
  out +=
      fmt::format(R"(<p class="sub">{} on {} ({}). Error = (predicted − measured) / measured.</p>)",
                  escape(c.name), escape(c.device.empty() ? "unknown device" : c.device),
                  escape(c.backend.empty() ? "backend n/a" : c.backend));
  out +=
      "<table><thead><tr><th>kind</th><th>actions</th><th>predicted</th><th>measured</th>"
      "<th>error</th></tr></thead><tbody>";
  std::vector<KindError> rows = c.kinds;
  rows.push_back(c.iteration);
  for (const KindError& k : rows) {
    const double e = k.error();
    out += fmt::format(
        R"(<tr><td class="name">{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td></tr>)",
        escape(k.kind), k.count, format_time_auto(k.predicted), format_time_auto(k.measured),
        std::abs(e) > 0.15 ? R"( class="bad")" : "", k.measured > 0 ? signed_percent(e) : "n/a");
  }
  out += "</tbody></table>";
  Frame f;
  f.right = 24;
  f.span = std::max<TimePs>({1, c.iteration.predicted, c.iteration.measured});
  for (TimePs t : c.predicted_end) f.span = std::max(f.span, t);
  for (TimePs t : c.measured_end) f.span = std::max(f.span, t);
  f.unit = pick_time_unit(f.span);
  const std::string id = dom_id(c.name, 0);
  for (int which = 0; which < 2; ++which) {
    TimelineSpec spec;
    spec.id = (which == 0 ? "pred-" : "meas-") + id;
    spec.schedule = &c.schedule;
    spec.start = which == 0 ? &c.predicted_start : &c.measured_start;
    spec.end = which == 0 ? &c.predicted_end : &c.measured_end;
    spec.own_span = which == 0 ? c.iteration.predicted : c.iteration.measured;
    spec.frame = f;
    out += fmt::format(R"(<p class="cap">{}</p>)", which == 0 ? "Predicted" : "Measured");
    out += timeline_svg(spec);
  }
  return out + "</div></section>";
}

std::string pareto_section(const std::vector<ParetoPoint>& pts) {
  std::string out =
      R"(<section id="pareto"><h2>Planner: iteration time vs memory</h2><div class="card">)";
  out += pareto_svg(pts);
  out +=
      R"(<p class="note">Green: the Pareto front (no configuration is both faster and smaller), numbered by memory as in the table; grey: dominated.</p>)";
  // The legend: the front in memory order, the numbers the chart shows.
  std::vector<const ParetoPoint*> front;
  for (const ParetoPoint& p : pts)
    if (p.on_front) front.push_back(&p);
  std::stable_sort(front.begin(), front.end(), [](const ParetoPoint* a, const ParetoPoint* b) {
    return a->peak_memory_bytes < b->peak_memory_bytes;
  });
  if (!front.empty()) {
    out += R"(<table class="pareto-legend"><thead><tr><th>#</th><th>configuration</th>)"
           R"(<th>iteration</th><th>peak memory per GPU</th><th>tokens/s</th></tr></thead><tbody>)";
    for (std::size_t i = 0; i < front.size(); ++i) {
      const ParetoPoint& p = *front[i];
      out += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", i + 1,
          escape(p.label), format_time_auto(p.iteration_time), format_bytes(p.peak_memory_bytes),
          p.tokens_per_second ? fmt::format("{:.0f}", *p.tokens_per_second) : std::string("-"));
    }
    out += "</tbody></table>";
  }
  return out + "</div></section>";
}

}  // namespace

std::string render_html(const ReportInput& in) {
  std::string out = R"(<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">)"
                    R"(<meta name="viewport" content="width=device-width, initial-scale=1">)";
  out += fmt::format("<title>{}</title><style>{}{}</style></head><body><main>", escape(in.title),
                     kCss, palette_css());
  out += fmt::format("<header><h1>{}</h1>", escape(in.title));
  out += fmt::format(R"(<p class="sub">{} schedule{} compared)", in.schedules.size(),
                     in.schedules.size() == 1 ? "" : "s");
  out += "</p>";
  if (!in.context.empty()) {
    out += R"(<ul class="ctx">)";
    for (const auto& [k, v] : in.context)
      out += fmt::format("<li><b>{}</b>{}</li>", escape(k), escape(v));
    out += "</ul>";
  }
  out += "</header>";
  for (const TableSection& t : in.tables) {
    out += fmt::format(R"(<section class="table"><h2>{}</h2><div class="card"><table><thead><tr>)",
                       escape(t.title));
    for (const std::string& h : t.header) out += "<th>" + escape(h) + "</th>";
    out += "</tr></thead><tbody>";
    for (const auto& r : t.rows) {
      out += "<tr>";
      for (const std::string& c : r) out += "<td>" + escape(c) + "</td>";
      out += "</tr>";
    }
    out += "</tbody></table></div></section>";
  }
  if (!in.schedules.empty()) {
    out += R"(<section id="summary"><h2>Summary</h2><div class="card">)" + summary_table(in) +
           "</div></section>";
    out += R"(<section id="schedules"><h2>Timelines</h2>)" + legend(in);
    Frame frame;
    frame.span = time_scale(in);
    frame.unit = pick_time_unit(frame.span);
    const double mem_max = memory_scale(in);
    for (std::size_t i = 0; i < in.schedules.size(); ++i)
      out += schedule_card(in, i, frame, mem_max);
    out +=
        R"(<p class="note">Every timeline shares one time axis, so shorter schedules end further left. Hover a block for its exact times.</p></section>)";
  }
  if (!in.curves.empty()) {
    out += R"(<section id="curves"><h2>Trade-offs</h2>)";
    for (std::size_t i = 0; i < in.curves.size(); ++i)
      out += fmt::format(R"(<div class="card"><h3>{}</h3>{}</div>)", escape(in.curves[i].title),
                         curve_svg(in.curves[i], static_cast<int>(i)));
    out += "</section>";
  }
  if (!in.pareto.empty()) out += pareto_section(in.pareto);
  if (in.measured) out += measured_section(*in.measured);
  out += "<footer>Generated by pipewright. Self-contained: no scripts, no network.</footer>";
  out += "</main></body></html>\n";
  return out;
}

std::string render_report(const ReportInput& input, const std::string& format,
                          const std::string& key) {
  if (format == "html") return render_html(input);
  if (format == "markdown" || format == "md") return render_markdown(input);
  if (format == "table" || format == "text") return render_text(input);
  if (format == "json") return render_json(input);
  throw ConfigError(
      "", key, fmt::format("unknown format '{}'; expected html, markdown, table or json", format));
}

}  // namespace pw
