#pragma once
/// Inline-SVG pictures of the HTML report (internal to report/): schedule timelines, per-device
/// memory strips, line charts and the Pareto scatter. Output is deterministic text.
#include <string>
#include <vector>

#include "core/schedule.h"
#include "core/units.h"
#include "report/render_util.h"
#include "report/report.h"
#include "sim/evaluator.h"

namespace pw::report_detail {

/// Horizontal geometry shared by a schedule's timeline and memory strips so their x axes align.
struct Frame {
  double width = 1040;  ///< total SVG width in px
  double left = 58;     ///< device-label gutter
  double right = 84;    ///< right gutter (memory peak labels)
  TimePs span = 1;      ///< time at the right edge of the plot
  TimeUnit unit;        ///< tick label unit
  double plot() const { return width - left - right; }
  double x(TimePs t) const {
    return left + plot() * static_cast<double>(t) / static_cast<double>(span);
  }
};

/// What one timeline draws. Times per action id (device-major); a negative start = not drawn.
struct TimelineSpec {
  std::string id;  ///< unique DOM id suffix (sanitised schedule name)
  const Schedule* schedule = nullptr;
  const std::vector<TimePs>* start = nullptr;
  const std::vector<TimePs>* end = nullptr;
  TimePs own_span = 0;  ///< this schedule's iteration end (marked with a line)
  Frame frame;
};

/// Timeline: one lane per device (plus a thin communication lane under devices that have
/// communication actions); compute passes are `<rect class="blk KIND cN">` with a `<title>`.
std::string timeline_svg(const TimelineSpec& spec);

/// Memory of each device over time (step areas on a shared scale `mem_max`), one strip per
/// device, aligned with `frame`; `limit` > 0 draws a dashed limit line.
std::string memory_svg(const std::string& id, const std::vector<std::vector<MemoryPoint>>& memory,
                       const std::vector<DeviceStats>& devices, double mem_max, double limit,
                       const std::string& unit, const Frame& frame);

/// A line chart of `curve` (markers with hover text and labels).
std::string curve_svg(const Curve& curve, int index);

/// Scatter of iteration time vs peak memory per GPU; the front is highlighted and joined.
std::string pareto_svg(const std::vector<ParetoPoint>& points);

/// A DOM-safe id fragment from a name ("zb-h1" stays, other characters become '_').
std::string dom_id(const std::string& name, int index);

}  // namespace pw::report_detail
