// JSON rendering for scripts: times in picoseconds, keys in a fixed order.
#include <nlohmann/json.hpp>

#include "report/render_util.h"
#include "report/report.h"

namespace pw {
namespace {

using nlohmann::ordered_json;
using namespace report_detail;

ordered_json actions_json(const Schedule& s, const std::vector<TimePs>& start,
                          const std::vector<TimePs>& end) {
  ordered_json out = ordered_json::array();
  std::size_t id = 0;
  for (std::size_t d = 0; d < s.actions.size(); ++d) {
    for (const Action& a : s.actions[d]) {
      const std::size_t aid = id++;
      ordered_json j;
      j["device"] = d;
      j["kind"] = std::string(action_kind_name(a.kind));
      j["stage"] = a.stage;
      j["microbatch"] = a.microbatch;
      if (a.kind == ActionKind::kOverlapFB) {
        j["stage2"] = a.stage2;
        j["microbatch2"] = a.microbatch2;
      }
      if (aid < start.size() && start[aid] >= 0) {
        j["start_ps"] = start[aid];
        j["end_ps"] = end[aid];
      } else {
        j["start_ps"] = nullptr;
        j["end_ps"] = nullptr;
      }
      out.push_back(std::move(j));
    }
  }
  return out;
}

ordered_json schedule_json(const ScheduleReport& s, const std::vector<Column>& cols, std::size_t i,
                           bool with_actions) {
  ordered_json j;
  j["name"] = s.name;
  j["description"] = s.description;
  j["ok"] = s.ok();
  if (!s.ok()) {
    j["error"] = s.error;
    return j;
  }
  j["iteration_time_ps"] = s.iteration();
  j["makespan_ps"] = s.result.makespan;
  j["bubble_rate"] = s.result.bubble_rate;
  j["bubble_fraction_megatron"] = s.result.bubble_fraction;
  if (s.tokens_per_second) j["tokens_per_second"] = *s.tokens_per_second;
  if (s.mfu) j["mfu"] = *s.mfu;
  if (s.exposed_comm) j["exposed_comm_ps"] = *s.exposed_comm;
  if (s.fits) j["fits"] = *s.fits;
  ordered_json best = ordered_json::array();
  for (const Column& c : cols)
    if (c.best[i]) best.push_back(c.header);
  j["best_in"] = best;
  ordered_json devs = ordered_json::array();
  for (std::size_t d = 0; d < s.result.device.size(); ++d) {
    const DeviceStats& ds = s.result.device[d];
    ordered_json dj;
    dj["device"] = d;
    dj["busy_ps"] = ds.busy;
    dj["first_start_ps"] = ds.first_start;
    dj["last_end_ps"] = ds.last_end;
    dj["peak_activation"] = ds.peak_memory;
    if (d < s.peak_memory_bytes.size()) dj["peak_memory_bytes"] = s.peak_memory_bytes[d];
    devs.push_back(std::move(dj));
  }
  j["devices"] = devs;
  if (with_actions) j["actions"] = actions_json(s.schedule, s.result.start, s.result.end);
  return j;
}

ordered_json measured_json(const RunComparison& c) {
  ordered_json j;
  j["name"] = c.name;
  j["backend"] = c.backend;
  j["device"] = c.device;
  auto kind = [](const KindError& k) {
    ordered_json kj;
    kj["kind"] = k.kind;
    kj["count"] = k.count;
    kj["predicted_ps"] = k.predicted;
    kj["measured_ps"] = k.measured;
    kj["error"] = k.error();
    return kj;
  };
  ordered_json kinds = ordered_json::array();
  for (const KindError& k : c.kinds) kinds.push_back(kind(k));
  j["kinds"] = kinds;
  j["iteration"] = kind(c.iteration);
  ordered_json pred = actions_json(c.schedule, c.predicted_start, c.predicted_end);
  ordered_json meas = actions_json(c.schedule, c.measured_start, c.measured_end);
  for (std::size_t i = 0; i < pred.size(); ++i) {
    pred[i]["measured_start_ps"] = meas[i]["start_ps"];
    pred[i]["measured_end_ps"] = meas[i]["end_ps"];
  }
  j["actions"] = pred;
  return j;
}

}  // namespace

std::string render_json(const ReportInput& in) {
  ordered_json j;
  j["title"] = in.title;
  ordered_json ctx = ordered_json::object();
  for (const auto& [k, v] : in.context) ctx[k] = v;
  j["context"] = ctx;
  j["memory_unit"] = in.memory_unit;
  if (in.memory_limit > 0) j["memory_limit"] = in.memory_limit;
  const std::vector<Column> cols = summary_columns(in);
  ordered_json scheds = ordered_json::array();
  for (std::size_t i = 0; i < in.schedules.size(); ++i)
    scheds.push_back(schedule_json(in.schedules[i], cols, i, true));
  j["schedules"] = scheds;
  ordered_json curves = ordered_json::array();
  for (const Curve& c : in.curves) {
    ordered_json cj;
    cj["title"] = c.title;
    cj["x_label"] = c.x_label;
    cj["y_label"] = c.y_label;
    ordered_json pts = ordered_json::array();
    for (const CurvePoint& p : c.points)
      pts.push_back({{"x", p.x}, {"y", p.y}, {"label", p.label}});
    cj["points"] = pts;
    curves.push_back(std::move(cj));
  }
  if (!in.curves.empty()) j["curves"] = curves;
  if (!in.pareto.empty()) {
    ordered_json pts = ordered_json::array();
    for (const ParetoPoint& p : in.pareto) {
      ordered_json pj;
      pj["label"] = p.label;
      pj["iteration_time_ps"] = p.iteration_time;
      pj["peak_memory_bytes"] = p.peak_memory_bytes;
      pj["on_front"] = p.on_front;
      if (p.tokens_per_second) pj["tokens_per_second"] = *p.tokens_per_second;
      pts.push_back(std::move(pj));
    }
    j["pareto"] = pts;
  }
  if (in.measured) j["measured"] = measured_json(*in.measured);
  return j.dump(2) + "\n";
}

}  // namespace pw
