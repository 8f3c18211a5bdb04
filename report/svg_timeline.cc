// Schedule timelines and per-device memory strips as inline SVG.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/svg.h"

namespace pw::report_detail {
namespace {

constexpr double kLaneH = 22;     // compute lane height
constexpr double kCommH = 9;      // communication lane height
constexpr double kDeviceGap = 5;  // between devices
constexpr double kTop = 6;
constexpr double kAxisH = 22;
constexpr double kStripH = 30;  // memory strip height
constexpr double kStripGap = 4;

std::string kind_text(ActionKind k, int stage, int mb) {
  std::string s(action_kind_name(k));
  if (stage >= 0) s += fmt::format(" · stage {}", stage);
  if (mb >= 0) s += fmt::format(" · microbatch {}", mb);
  return s;
}

std::string action_title(const Action& a, TimePs t0, TimePs t1, TimeUnit u, int device) {
  std::string what;
  if (a.kind == ActionKind::kOverlapFB) {
    what = fmt::format("F · stage {} · microbatch {} overlapped with B · stage {} · microbatch {}",
                       a.stage, a.microbatch, a.stage2, a.microbatch2);
  } else {
    what = kind_text(a.kind, a.stage, a.microbatch);
  }
  return escape(fmt::format("{} on dev {}\n{} – {} ({})", what, device, format_time(t0, u),
                            format_time(t1, u), format_time(t1 - t0, u)));
}

std::string block_label(const Action& a) {
  if (a.kind == ActionKind::kOverlapFB) return fmt::format("{}|{}", a.microbatch, a.microbatch2);
  if (a.microbatch < 0) return "";
  return std::to_string(a.microbatch);
}

void axis(std::string& out, const Frame& f, double y_top, double y_bottom) {
  const double span_units = static_cast<double>(f.span) / f.unit.ps_per_unit;
  for (double t : nice_ticks(span_units, 10)) {
    const double x = f.x(static_cast<TimePs>(std::llround(t * f.unit.ps_per_unit)));
    out += fmt::format(R"(<line class="grid" x1="{0}" y1="{1}" x2="{0}" y2="{2}"/>)", coord(x),
                       coord(y_top), coord(y_bottom + 4));
    out += fmt::format(R"(<text class="tick" x="{}" y="{}">{}</text>)", coord(x),
                       coord(y_bottom + 16), format_number(t));
  }
  out += fmt::format(R"(<text class="unit" x="{}" y="{}">{}</text>)", coord(f.width - 4),
                     coord(y_bottom + 16), f.unit.symbol);
}

}  // namespace

std::string dom_id(const std::string& name, int index) {
  std::string out = fmt::format("s{}-", index);
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    out += ok ? c : '_';
  }
  return out;
}

std::string timeline_svg(const TimelineSpec& spec) {
  const Schedule& s = *spec.schedule;
  const Frame& f = spec.frame;
  const int D = static_cast<int>(s.actions.size());
  const std::vector<int> chunk = chunk_of_stages(s.placement);
  // Lane positions: devices with communication actions get a thin second lane.
  std::vector<double> lane_y(D), comm_y(D, -1);
  double y = kTop;
  for (int d = 0; d < D; ++d) {
    lane_y[d] = y;
    y += kLaneH;
    const bool comm = std::any_of(s.actions[d].begin(), s.actions[d].end(),
                                  [](const Action& a) { return shade_of(a.kind) == Shade::kComm; });
    if (comm) {
      comm_y[d] = y + 1;
      y += kCommH + 1;
    }
    y += kDeviceGap;
  }
  const double bottom = y - kDeviceGap;
  const double height = bottom + kAxisH;

  std::string out = fmt::format(
      R"(<svg class="tl" id="tl-{0}" xmlns="http://www.w3.org/2000/svg" width="{1}" height="{2}" viewBox="0 0 {1} {2}" role="img" aria-label="timeline of {3}">)",
      spec.id, coord(f.width), coord(height), escape(s.name));
  out += fmt::format(
      R"(<defs><linearGradient id="fb-{}" x1="0" y1="0" x2="0" y2="1"><stop offset="50%" stop-color="#3b6fb6"/><stop offset="50%" stop-color="#3e9651"/></linearGradient></defs>)",
      spec.id);
  const double x_end = f.x(spec.own_span);
  for (int d = 0; d < D; ++d) {
    out += fmt::format(R"(<text class="dev" x="{}" y="{}">dev {}</text>)", coord(f.left - 8),
                       coord(lane_y[d] + kLaneH / 2 + 4), d);
    out += fmt::format(R"(<rect class="lane" x="{}" y="{}" width="{}" height="{}"/>)",
                       coord(f.left), coord(lane_y[d]), coord(x_end - f.left), coord(kLaneH));
    if (comm_y[d] >= 0)
      out += fmt::format(R"(<rect class="lane cl" x="{}" y="{}" width="{}" height="{}"/>)",
                         coord(f.left), coord(comm_y[d]), coord(x_end - f.left), coord(kCommH));
  }
  axis(out, f, kTop - 2, bottom);

  std::string labels;
  std::size_t id = 0;
  for (int d = 0; d < D; ++d) {
    for (const Action& a : s.actions[d]) {
      const std::size_t aid = id++;
      const TimePs t0 = (*spec.start)[aid], t1 = (*spec.end)[aid];
      if (t0 < 0 || t1 < t0) continue;
      const double x0 = f.x(t0);
      const double w = std::max(f.x(t1) - x0, 0.5);
      const Shade sh = shade_of(a.kind);
      const int c =
          a.stage >= 0 && static_cast<std::size_t>(a.stage) < chunk.size() ? chunk[a.stage] % 2 : 0;
      const std::string title = action_title(a, t0, t1, f.unit, d);
      if (sh == Shade::kComm) {
        const double yy = comm_y[d] >= 0 ? comm_y[d] : lane_y[d];
        out += fmt::format(
            R"(<rect class="xblk C" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>)",
            coord(x0), coord(yy), coord(w), coord(kCommH), title);
        continue;
      }
      const bool compute = sh != Shade::kOpt;
      const std::string fill =
          sh == Shade::kOverlap ? fmt::format(R"~( fill="url(#fb-{})")~", spec.id) : "";
      out += fmt::format(
          R"(<rect class="{} {} c{}" x="{}" y="{}" width="{}" height="{}" rx="2"{}><title>{}</title></rect>)",
          compute ? "blk" : "xblk", shade_class(sh), c, coord(x0), coord(lane_y[d]), coord(w),
          coord(kLaneH), fill, title);
      const std::string text = block_label(a);
      if (!text.empty() && w >= 6.0 * static_cast<double>(text.size()) + 3)
        labels += fmt::format(R"(<text class="lbl{}" x="{}" y="{}">{}</text>)", c == 1 ? " dk" : "",
                              coord(x0 + w / 2), coord(lane_y[d] + kLaneH / 2 + 3.5), text);
    }
  }
  out += labels;
  const std::string end_text = format_time_auto(spec.own_span);
  const bool room_right = x_end + 8 + 7.0 * end_text.size() < f.width;
  out += fmt::format(R"(<line class="end" x1="{0}" y1="{1}" x2="{0}" y2="{2}"/>)", coord(x_end),
                     coord(kTop - 4), coord(bottom + 2));
  out += fmt::format(R"(<text class="endl{}" x="{}" y="{}">{}</text>)", room_right ? "" : " r",
                     coord(room_right ? x_end + 4 : x_end - 4), coord(kTop + 9), end_text);
  out += "</svg>";
  return out;
}

std::string memory_svg(const std::string& id, const std::vector<std::vector<MemoryPoint>>& memory,
                       const std::vector<DeviceStats>& devices, double mem_max, double limit,
                       const std::string& unit, const Frame& f) {
  const int D = static_cast<int>(memory.size());
  const double height = kStripGap + D * (kStripH + kStripGap);
  std::string out = fmt::format(
      R"(<svg class="mem" id="mem-{0}" xmlns="http://www.w3.org/2000/svg" width="{1}" height="{2}" viewBox="0 0 {1} {2}" role="img" aria-label="activation memory per device">)",
      id, coord(f.width), coord(height));
  const double scale = mem_max > 0 ? mem_max : 1;
  for (int d = 0; d < D; ++d) {
    const double top = kStripGap + d * (kStripH + kStripGap);
    const double base = top + kStripH;
    auto yv = [&](double v) { return base - kStripH * std::clamp(v / scale, 0.0, 1.0); };
    const TimePs last = d < static_cast<int>(devices.size()) ? devices[d].last_end : f.span;
    const double peak = d < static_cast<int>(devices.size()) ? devices[d].peak_memory : 0;
    out += fmt::format(R"(<text class="dev" x="{}" y="{}">dev {}</text>)", coord(f.left - 8),
                       coord(top + kStripH / 2 + 4), d);
    out += fmt::format(R"(<rect class="strip" x="{}" y="{}" width="{}" height="{}"/>)",
                       coord(f.left), coord(top), coord(f.plot()), coord(kStripH));
    std::string path = fmt::format("M{},{}", coord(f.left), coord(base));
    TimePs peak_t = 0;
    bool reached = false;
    const std::vector<MemoryPoint>& series = memory[d];
    for (std::size_t k = 0; k < series.size(); ++k) {
      const MemoryPoint& p = series[k];
      // A release and an allocation at the same instant are one step, not a spike.
      if (!reached && p.value >= peak - 1e-12) {
        peak_t = p.time;
        reached = true;
      }
      if (k + 1 < series.size() && series[k + 1].time == p.time) continue;
      path += fmt::format("H{}V{}", coord(f.x(std::min(p.time, f.span))), coord(yv(p.value)));
    }
    path += fmt::format("H{}V{}Z", coord(f.x(std::min(std::max(last, TimePs{0}), f.span))),
                        coord(base));
    out += fmt::format(R"(<path class="area" d="{}"><title>{}</title></path>)", path,
                       escape(fmt::format("dev {}: peak {} {} (first reached at {})", d,
                                          format_number(peak), unit, format_time(peak_t, f.unit))));
    if (limit > 0)
      out += fmt::format(R"(<line class="limit" x1="{0}" y1="{2}" x2="{1}" y2="{2}"/>)",
                         coord(f.left), coord(f.left + f.plot()), coord(yv(limit)));
    out += fmt::format(R"(<text class="peak" x="{}" y="{}">peak {}</text>)",
                       coord(f.left + f.plot() + 6), coord(top + kStripH / 2 + 4),
                       format_number(peak));
  }
  out += "</svg>";
  return out;
}

}  // namespace pw::report_detail
