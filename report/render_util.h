#pragma once
/// Helpers shared by the report renderers (internal to report/): escaping, deterministic number
/// and time formatting, axis ticks, the kind palette and summary-table columns.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/schedule.h"
#include "core/units.h"
#include "report/report.h"

namespace pw::report_detail {

/// Escapes &, <, >, " and ' for HTML/SVG text and attributes.
std::string escape(std::string_view s);

/// A display unit for times: picoseconds per unit and its symbol.
struct TimeUnit {
  double ps_per_unit = 1;
  const char* symbol = "ps";
};
/// The largest of s, ms, us, ns, ps in which `span` is at least 1 (ps for span <= 0).
TimeUnit pick_time_unit(TimePs span);
/// `t` in `unit` with up to `decimals` decimals, trailing zeros kept (e.g. "12.500 ms").
std::string format_time(TimePs t, TimeUnit unit, int decimals = 3);
/// `t` in its own best unit with 4 significant-ish digits, e.g. "33 ms", "1.25 s".
std::string format_time_auto(TimePs t);
/// Compact number: up to 3 decimals, trailing zeros and point dropped ("4", "2.5", "0.125").
std::string format_number(double v);
/// Coordinate for SVG (one decimal, "-0" avoided).
std::string coord(double v);
/// Bytes as GiB with 2 decimals ("71.25 GiB").
std::string format_bytes(double bytes);
/// Fraction as percent with 1 decimal ("27.3%").
std::string format_percent(double f);

/// "Nice" tick positions (1, 2, 5 x 10^k steps) covering [0, max]; at most about `target` ticks.
std::vector<double> nice_ticks(double max, int target);

/// Kind families drawn in distinct colours.
enum class Shade { kF, kB, kW, kBW, kR, kComm, kOpt, kOverlap };
Shade shade_of(ActionKind k);
/// CSS class of a family: "F", "B", "W", "BW", "R", "C" (communication), "O" (optimizer), "FB".
const char* shade_class(Shade s);
/// Letter used in text timelines for chunk 0 (upper case) of each family.
char shade_letter(Shade s);

/// Index of `stage` among the stages of its device (chunk number: 0 for 1F1B; 0/1 for V).
std::vector<int> chunk_of_stages(const Placement& placement);

/// A column of the summary table.
struct Column {
  std::string header;
  bool lower_is_better = true;
  /// Per schedule (same order as the input): the value compared for "best" (absent = "n/a").
  std::vector<std::optional<double>> value;
  std::vector<std::string> text;  ///< formatted cell (same order)
  std::vector<bool> best;         ///< value equals the column's best
};
/// Summary columns present in `input` (a column appears when any schedule has its figure).
std::vector<Column> summary_columns(const ReportInput& input);

/// Largest evaluator memory value over every ok schedule's devices (peaks and limit), >= 1e-9.
double memory_scale(const ReportInput& input);
/// Largest pipeline makespan over ok schedules (>= 1): the shared timeline axis.
TimePs time_scale(const ReportInput& input);

/// Kind groups compared by compare_run, in display order.
const std::vector<std::string>& kind_group_names();
/// Group name of an action kind ("F", "B", "W", "BW", "R", "sends", "collectives", "optimizer",
/// "overlap").
const std::string& kind_group(ActionKind k);

/// Character timeline (one row per device, kind letters, lower case for odd chunks, '.' idle,
/// '~' communication), `width` cells wide at most; with a header row of time marks.
std::string text_timeline(const Schedule& schedule, const std::vector<TimePs>& start,
                          const std::vector<TimePs>& end, TimePs span, int width);

}  // namespace pw::report_detail
