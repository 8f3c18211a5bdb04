#pragma once
/// The report renderer: evaluated schedules (and optionally trade-off curves, a planner Pareto
/// front and a predicted-vs-measured comparison) in, one self-contained HTML page, Markdown, a
/// plain-text table or JSON out. Every renderer is a pure function of its input: the same
/// ReportInput gives byte-identical output (no clock, no locale, no hash-map iteration).
///
/// Producers fill what they know: the fixed-cost evaluator gives times and activation memory;
/// the discrete-event simulator and the planner can add tokens/s, MFU, exposed communication,
/// bytes and fit; absent optional figures simply leave their column out.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/plan.h"
#include "core/schedule.h"
#include "core/units.h"
#include "sim/evaluator.h"

namespace pw {

/// One schedule (or configuration) in the comparison.
struct ScheduleReport {
  std::string name;         ///< label, e.g. "zb-h1" or "t8 p8 interleaved"
  std::string description;  ///< one line under the name (may be empty)
  /// Non-empty when the schedule could not be built or evaluated: the report shows the name and
  /// this reason in place of its figures (`schedule` and `result` are then ignored).
  std::string error;
  Schedule schedule;
  /// Start/end of every action (DependencyGraph numbering, device-major) and per-device stats;
  /// `result.memory` (the memory timeline) is drawn under the timeline when present.
  EvalResult result;
  /// Whole iteration (pipeline plus exposed data-parallel and optimizer time); defaults to
  /// result.makespan. Timelines mark result.makespan, the summary shows this.
  std::optional<TimePs> iteration_time;
  std::optional<double> tokens_per_second;
  std::optional<double> mfu;           ///< model FLOPs utilisation, 0..1
  std::optional<TimePs> exposed_comm;  ///< communication time not hidden behind compute
  std::optional<bool> fits;            ///< fits in device memory
  /// Peak memory per device in bytes (weights + optimizer + activations); empty = only the
  /// evaluator's activation peaks (in ReportInput::memory_unit) are shown.
  std::vector<double> peak_memory_bytes;

  bool ok() const { return error.empty(); }
  TimePs iteration() const { return iteration_time ? *iteration_time : result.makespan; }
};

/// One point of a trade-off curve, e.g. the adaptive scheduler's (memory limit, bubble).
struct CurvePoint {
  double x = 0;
  double y = 0;
  std::string label;  ///< shown beside the marker and in hover text (may be empty)
};

/// A generic x/y curve drawn as a line chart (points in the order given, usually sorted by x).
struct Curve {
  std::string title;           ///< e.g. "Adaptive schedule: memory limit vs bubble (p=4, m=8)"
  std::string x_label;         ///< e.g. "activation memory limit (microbatches)"
  std::string y_label;         ///< e.g. "bubble rate"
  bool y_is_fraction = false;  ///< format y as a percentage
  std::vector<CurvePoint> points;
};

/// One configuration the planner scored: iteration time against peak memory per GPU.
struct ParetoPoint {
  std::string label;
  TimePs iteration_time = 0;
  double peak_memory_bytes = 0;
  bool on_front = false;  ///< not dominated in (time, memory)
  std::optional<double> tokens_per_second;
};

/// Predicted vs measured figure of one action kind group (F, B, W, BW, R, sends, collectives,
/// optimizer, overlap) or of the whole iteration.
struct KindError {
  std::string kind;      ///< "F", "B", "W", "BW", "R", "sends", "collectives", "optimizer", ...
  int count = 0;         ///< matched actions
  TimePs predicted = 0;  ///< summed durations (whole iteration: the iteration time)
  TimePs measured = 0;
  /// (predicted - measured) / measured; 0 when nothing was measured.
  double error() const;
};

/// A plan lined up against a measured run of it.
struct RunComparison {
  std::string name;  ///< schedule name
  Schedule schedule;
  std::vector<TimePs> predicted_start, predicted_end;  ///< per action id (device-major)
  std::vector<TimePs> measured_start, measured_end;    ///< per action id; -1 = not measured
  std::vector<KindError> kinds;  ///< groups present in the plan, in the order listed above
  KindError iteration;           ///< kind "iteration"
  std::string backend;           ///< from the measured run
  std::string device;
};

/// Everything one report shows. Sections without data are left out.
/// A titled table of preformatted cells (e.g. the planner's ranking, with the CLI's columns).
struct TableSection {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct ReportInput {
  std::string title = "pipewright schedule comparison";
  /// Key/value facts shown under the title (scenario, p, m, costs, ...), in this order.
  std::vector<std::pair<std::string, std::string>> context;
  /// Unit of the evaluator's memory figures (EvalResult peaks and timeline).
  std::string memory_unit = "activations";
  /// Optional per-device activation memory limit in memory_unit (drawn as a line; 0 = none).
  double memory_limit = 0;
  /// The per-device memory figures (peaks, timelines) hold everything the device holds (model
  /// state, activations, buffers: a simulated iteration), not activations alone.
  bool memory_total = false;
  std::vector<ScheduleReport> schedules;
  std::vector<Curve> curves;         ///< e.g. the adaptive scheduler's trade-off curve
  std::vector<TableSection> tables;  ///< drawn before the timelines (HTML)
  std::vector<ParetoPoint> pareto;   ///< the planner's candidates; empty = no section
  std::optional<RunComparison> measured;
};

/// A self-contained HTML page (inline CSS and SVG, no scripts, no network).
std::string render_html(const ReportInput& input);
/// Markdown: tables plus text timelines in fenced blocks (for terminals and pull requests).
std::string render_markdown(const ReportInput& input);
/// Plain aligned text (the CLI's `--format table`).
std::string render_text(const ReportInput& input);
/// JSON for scripts: the same figures, times in picoseconds, plus per-action timelines.
std::string render_json(const ReportInput& input);

/// Renders `input` in `format` ("html", "markdown", "table" or "json"); throws ConfigError naming
/// `key` for any other format.
std::string render_report(const ReportInput& input, const std::string& format,
                          const std::string& key = "--format");

}  // namespace pw
