// Line charts (trade-off curves) and the Pareto scatter as inline SVG.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/svg.h"

namespace pw::report_detail {
namespace {

constexpr double kW = 620, kH = 320;
constexpr double kL = 66, kR = 24, kT = 18, kB = 48;

struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
};

// Ticks on 1/2/2.5/5 x 10^k steps covering [lo, hi]; a degenerate range is widened.
Axis make_axis(double lo, double hi, int target) {
  if (!(hi > lo)) {
    const double pad = std::max(std::fabs(lo) * 0.1, 1e-9);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double k : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = k * mag;
    if (step >= raw) break;
  }
  Axis a;
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  for (int i = 0;; ++i) {
    const double t = a.lo + step * i;
    if (t > a.hi + step * 1e-6) break;
    a.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return a;
}

struct Plot {
  Axis x, y;
  double px(double v) const { return kL + (kW - kL - kR) * (v - x.lo) / (x.hi - x.lo); }
  double py(double v) const { return kH - kB - (kH - kT - kB) * (v - y.lo) / (y.hi - y.lo); }
};

using TickFormat = std::string (*)(double);

std::string frame(const Plot& p, const std::string& x_label, const std::string& y_label,
                  TickFormat fx, TickFormat fy) {
  std::string out;
  for (double t : p.y.ticks) {
    out += fmt::format(R"(<line class="grid" x1="{0}" y1="{2}" x2="{1}" y2="{2}"/>)", coord(kL),
                       coord(kW - kR), coord(p.py(t)));
    out += fmt::format(R"(<text class="tick ty" x="{}" y="{}">{}</text>)", coord(kL - 6),
                       coord(p.py(t) + 4), fy(t));
  }
  for (double t : p.x.ticks) {
    out += fmt::format(R"(<line class="grid" x1="{0}" y1="{1}" x2="{0}" y2="{2}"/>)",
                       coord(p.px(t)), coord(kT), coord(kH - kB + 4));
    out += fmt::format(R"(<text class="tick" x="{}" y="{}">{}</text>)", coord(p.px(t)),
                       coord(kH - kB + 18), fx(t));
  }
  out += fmt::format(R"(<rect class="axes" x="{}" y="{}" width="{}" height="{}"/>)", coord(kL),
                     coord(kT), coord(kW - kL - kR), coord(kH - kT - kB));
  out += fmt::format(R"(<text class="axl" x="{}" y="{}">{}</text>)", coord((kL + kW - kR) / 2),
                     coord(kH - 8), escape(x_label));
  out += fmt::format(R"~(<text class="axl" transform="translate(14 {}) rotate(-90)">{}</text>)~",
                     coord((kT + kH - kB) / 2), escape(y_label));
  return out;
}

std::string open_svg(const std::string& id, const std::string& label) {
  return fmt::format(
      R"(<svg class="chart" id="{0}" xmlns="http://www.w3.org/2000/svg" width="{1}" height="{2}" viewBox="0 0 {1} {2}" role="img" aria-label="{3}">)",
      id, coord(kW), coord(kH), escape(label));
}

std::string percent_tick(double v) { return fmt::format("{:.0f}%", v * 100); }

}  // namespace

std::string curve_svg(const Curve& curve, int index) {
  double x0 = 0, x1 = 0, y1 = 0;
  bool first = true;
  for (const CurvePoint& p : curve.points) {
    x0 = first ? p.x : std::min(x0, p.x);
    x1 = first ? p.x : std::max(x1, p.x);
    y1 = first ? p.y : std::max(y1, p.y);
    first = false;
  }
  Plot plot{make_axis(x0, x1, 6), make_axis(0, std::max(y1, 1e-9), 5)};
  TickFormat fy = curve.y_is_fraction ? percent_tick : format_number;
  std::string out = open_svg(fmt::format("curve-{}", index), curve.title);
  out += frame(plot, curve.x_label, curve.y_label, format_number, fy);
  std::string line;
  for (const CurvePoint& p : curve.points)
    line +=
        fmt::format("{}{},{}", line.empty() ? "" : " ", coord(plot.px(p.x)), coord(plot.py(p.y)));
  out += fmt::format(R"(<polyline class="cline" points="{}"/>)", line);
  const bool label_all = curve.points.size() <= 12;
  for (const CurvePoint& p : curve.points) {
    const std::string yv = curve.y_is_fraction ? format_percent(p.y) : format_number(p.y);
    std::string hover =
        fmt::format("{} = {}, {} = {}", curve.x_label, format_number(p.x), curve.y_label, yv);
    if (!p.label.empty()) hover = p.label + "\n" + hover;
    out += fmt::format(R"(<circle class="pt" cx="{}" cy="{}" r="4.5"><title>{}</title></circle>)",
                       coord(plot.px(p.x)), coord(plot.py(p.y)), escape(hover));
    if (label_all)
      out += fmt::format(R"(<text class="ptl" x="{}" y="{}">{}</text>)", coord(plot.px(p.x)),
                         coord(plot.py(p.y) - 9), escape(p.label.empty() ? yv : p.label));
  }
  out += "</svg>";
  return out;
}

namespace {

// A front point's number: its box (top-left x, y, width, height, viewBox units) once placed.
struct LabelBox {
  double px = 0, py = 0;  // the point
  double x = 0, y = 0, w = 0, h = 0;
  bool placed = false;
};

constexpr double kNumberHeight = 11, kNumberAscent = 8.5, kDigitWidth = 6.5, kPointRadius = 5;

template <typename Tv>
std::vector<LabelBox> plot_boxes(const std::vector<const ParetoPoint*>& front, const Plot& plot,
                                 const Tv& tv) {
  std::vector<LabelBox> b(front.size());
  for (std::size_t i = 0; i < front.size(); ++i) {
    b[i].px = plot.px(front[i]->peak_memory_bytes / kGiB);
    b[i].py = plot.py(tv(front[i]->iteration_time));
    b[i].w = kDigitWidth * static_cast<double>(std::to_string(i + 1).size()) + 2;
    b[i].h = kNumberHeight;
  }
  return b;
}

bool boxes_overlap(double ax, double ay, double aw, double ah, double bx, double by, double bw,
                   double bh) {
  return ax < bx + bw && bx < ax + aw && ay < by + bh && by < ay + ah;
}

std::vector<LabelBox> place_front_numbers(std::vector<LabelBox> b) {
  const double gap = kPointRadius + 2;
  for (std::size_t i = 0; i < b.size(); ++i) {
    LabelBox& l = b[i];
    const double spots[8][2] = {
        {gap, -gap - l.h},      {gap, gap},      {-gap - l.w, -gap - l.h}, {-gap - l.w, gap},
        {-l.w / 2, -gap - l.h}, {-l.w / 2, gap}, {gap, -l.h / 2},          {-gap - l.w, -l.h / 2}};
    for (const auto& s : spots) {
      const double x = l.px + s[0], y = l.py + s[1];
      if (x < kL || x + l.w > kW - kR || y < kT || y + l.h > kH - kB) continue;
      bool clear = true;
      for (std::size_t j = 0; j < b.size() && clear; ++j) {
        const double r = kPointRadius;
        if (boxes_overlap(x, y, l.w, l.h, b[j].px - r, b[j].py - r, 2 * r, 2 * r)) clear = false;
        if (j < i && b[j].placed && boxes_overlap(x, y, l.w, l.h, b[j].x, b[j].y, b[j].w, b[j].h))
          clear = false;
      }
      if (!clear) continue;
      l.x = x;
      l.y = y;
      l.placed = true;
      break;
    }
  }
  return b;
}

}  // namespace

std::string pareto_svg(const std::vector<ParetoPoint>& points) {
  if (points.empty()) return "";
  TimePs tmax = 1;
  double mlo = points.front().peak_memory_bytes, mhi = mlo;
  for (const ParetoPoint& p : points) {
    tmax = std::max(tmax, p.iteration_time);
    mlo = std::min(mlo, p.peak_memory_bytes);
    mhi = std::max(mhi, p.peak_memory_bytes);
  }
  const TimeUnit u = pick_time_unit(tmax);
  auto tv = [&](TimePs t) { return static_cast<double>(t) / u.ps_per_unit; };
  double tlo = tv(tmax), thi = 0;
  for (const ParetoPoint& p : points) {
    tlo = std::min(tlo, tv(p.iteration_time));
    thi = std::max(thi, tv(p.iteration_time));
  }
  Plot plot{make_axis(mlo / kGiB, mhi / kGiB, 6), make_axis(tlo, thi, 5)};
  std::string out = open_svg("pareto", "iteration time vs peak memory");
  out += frame(plot, "peak memory per GPU (GiB)", fmt::format("iteration time ({})", u.symbol),
               format_number, format_number);
  // Front points in memory order, joined by a staircase (time only improves with memory).
  std::vector<const ParetoPoint*> front;
  for (const ParetoPoint& p : points)
    if (p.on_front) front.push_back(&p);
  std::stable_sort(front.begin(), front.end(), [](const ParetoPoint* a, const ParetoPoint* b) {
    return a->peak_memory_bytes < b->peak_memory_bytes;
  });
  std::string stair;
  for (std::size_t i = 0; i < front.size(); ++i) {
    const double x = plot.px(front[i]->peak_memory_bytes / kGiB);
    const double y = plot.py(tv(front[i]->iteration_time));
    stair += i == 0 ? fmt::format("M{},{}", coord(x), coord(y))
                    : fmt::format("H{}V{}", coord(x), coord(y));
  }
  if (!stair.empty()) out += fmt::format(R"(<path class="stair" d="{}"/>)", stair);
  // Front points are numbered in memory order (the legend under the chart names them); each
  // number goes to the first of eight spots around its point whose box overlaps no number
  // placed before it, no front point and stays inside the plot, else it is left out (the
  // point's tooltip and the legend still name it).
  const std::vector<LabelBox> boxes = place_front_numbers(plot_boxes(front, plot, tv));
  for (int pass = 0; pass < 2; ++pass) {
    for (const ParetoPoint& p : points) {
      if (p.on_front != (pass == 1)) continue;
      std::string hover =
          fmt::format("{}\niteration {}, peak {}", p.label, format_time_auto(p.iteration_time),
                      format_bytes(p.peak_memory_bytes));
      if (p.tokens_per_second) hover += fmt::format(", {:.0f} tokens/s", *p.tokens_per_second);
      const double x = plot.px(p.peak_memory_bytes / kGiB), y = plot.py(tv(p.iteration_time));
      out += fmt::format(R"(<circle class="{}" cx="{}" cy="{}" r="{}"><title>{}</title></circle>)",
                         p.on_front ? "pf" : "pd", coord(x), coord(y), p.on_front ? "5" : "3.5",
                         escape(hover));
    }
  }
  for (std::size_t i = 0; i < boxes.size(); ++i)
    if (boxes[i].placed)
      out +=
          fmt::format(R"(<text class="ptl n" x="{}" y="{}">{}</text>)",
                      coord(boxes[i].x + boxes[i].w / 2), coord(boxes[i].y + kNumberAscent), i + 1);
  out += "</svg>";
  return out;
}

}  // namespace pw::report_detail
