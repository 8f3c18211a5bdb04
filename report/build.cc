#include "report/build.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dependency.h"
#include "core/error.h"
#include "report/render_util.h"

namespace pw {

double KindError::error() const {
  if (measured <= 0) return 0.0;
  return static_cast<double>(predicted - measured) / static_cast<double>(measured);
}

CostTable layer_scaled_cost_table(const Placement& placement, const UniformCosts& costs) {
  CostTable t = make_uniform_cost_table(placement, costs);
  for (int s = 0; s < t.num_stages; ++s) {
    const double w = placement.activation_weight(s);
    for (int k = 0; k < kNumActionKinds; ++k) {
      const auto kind = static_cast<ActionKind>(k);
      if (!is_compute(kind)) continue;
      TimePs& d = t.time(s, kind);
      d = static_cast<TimePs>(std::llround(static_cast<double>(d) * w));
    }
  }
  return t;
}

ScheduleReport evaluate_for_report(const Schedule& schedule, const CostTable& costs,
                                   const std::string& description) {
  ScheduleReport r;
  r.name = schedule.name;
  r.description = description;
  try {
    Evaluator ev(schedule);
    r.result = ev.run(costs, /*memory_timeline=*/true);
    r.schedule = schedule;
  } catch (const ConfigError& e) {
    r.error = e.what();
  }
  return r;
}

std::vector<ScheduleReport> build_schedule_reports(const GeneratorRegistry& registry,
                                                   const std::vector<std::string>& names,
                                                   const GeneratorParams& params,
                                                   const CostModelFn& cost_model) {
  for (const std::string& n : names) registry.get(n, "--schedules");
  std::vector<ScheduleReport> out;
  out.reserve(names.size());
  for (const std::string& n : names) {
    const GeneratorInfo& info = registry.get(n, "--schedules");
    ScheduleReport entry;
    try {
      Schedule s = generate_schedule(registry, n, params);
      CostTable costs = cost_model(s.placement);
      // Cost-aware generators shape the schedule for the real per-stage costs; the placement
      // (and so the table) is only known after a first generation.
      GeneratorParams second = params;
      second.stage_costs = &costs;
      try {
        Schedule tuned = generate_schedule(registry, n, second);
        if (tuned.placement == s.placement) s = std::move(tuned);
      } catch (const ConfigError&) {
        // Keep the first schedule: it is valid, only shaped for the uniform costs.
      }
      entry = evaluate_for_report(s, costs, info.description);
    } catch (const ConfigError& e) {
      entry.error = e.what();
    } catch (const std::exception& e) {
      // A generator bug should not hide the other schedules; it is labelled as such.
      entry.error = std::string("internal error: ") + e.what();
    }
    entry.name = n;
    entry.description = info.description;
    out.push_back(std::move(entry));
  }
  return out;
}

namespace {

std::vector<std::int32_t> device_offsets(const Schedule& s) {
  std::vector<std::int32_t> begin(s.actions.size() + 1, 0);
  for (std::size_t d = 0; d < s.actions.size(); ++d)
    begin[d + 1] = begin[d] + static_cast<std::int32_t>(s.actions[d].size());
  return begin;
}

// Action id of (device, index), or -1 when outside the schedule.
std::int32_t action_id(const std::vector<std::int32_t>& begin, int device, int index) {
  if (device < 0 || device + 1 >= static_cast<int>(begin.size()) || index < 0) return -1;
  if (index >= begin[device + 1] - begin[device]) return -1;
  return begin[device] + index;
}

TimePs span_of(const std::vector<TimePs>& start, const std::vector<TimePs>& end) {
  TimePs lo = std::numeric_limits<TimePs>::max(), hi = 0;
  bool any = false;
  for (std::size_t i = 0; i < start.size(); ++i) {
    if (start[i] < 0) continue;
    any = true;
    lo = std::min(lo, start[i]);
    hi = std::max(hi, end[i]);
  }
  return any ? hi - lo : 0;
}

}  // namespace

RunComparison compare_run(const Plan& plan, const MeasuredRun& run, const std::string& source) {
  const Schedule& s = plan.schedule;
  const std::vector<std::int32_t> begin = device_offsets(s);
  const std::size_t n = static_cast<std::size_t>(begin.back());
  RunComparison c;
  c.name = s.name;
  c.schedule = s;
  c.backend = run.backend;
  c.device = run.device;
  if (plan.predicted.empty())
    throw ConfigError(source, "predicted",
                      "the plan has no predicted action times (write it with `pipewright plan`)");
  c.predicted_start.assign(n, -1);
  c.predicted_end.assign(n, -1);
  c.measured_start.assign(n, -1);
  c.measured_end.assign(n, -1);
  for (std::size_t i = 0; i < plan.predicted.size(); ++i) {
    const ActionTiming& t = plan.predicted[i];
    const std::int32_t id = action_id(begin, t.device, t.index);
    if (id < 0)
      throw ConfigError(
          source, fmt::format("predicted[{}]", i),
          fmt::format("device {} position {} is not in the schedule", t.device, t.index));
    c.predicted_start[id] = t.start;
    c.predicted_end[id] = t.end;
  }
  // Measured times are relative to rank 0's iteration start; other ranks may start earlier.
  TimePs shift = 0;
  for (const MeasuredAction& m : run.actions) shift = std::min(shift, m.start);
  for (std::size_t i = 0; i < run.actions.size(); ++i) {
    const MeasuredAction& m = run.actions[i];
    const std::int32_t id = action_id(begin, m.rank, m.index);
    const std::string key = fmt::format("actions[{}]", i);
    if (id < 0)
      throw ConfigError(source, key,
                        fmt::format("rank {} position {} is not in the plan's schedule (a run "
                                    "of another plan?)",
                                    m.rank, m.index));
    const Action& want = s.actions[m.rank][m.index];
    if (!(want == m.action))
      throw ConfigError(source, key,
                        fmt::format("rank {} position {} ran '{}' but the plan has '{}'", m.rank,
                                    m.index, describe_action(m.action), describe_action(want)));
    if (m.end < m.start) throw ConfigError(source, key, "end is before start");
    c.measured_start[id] = m.start - shift;
    c.measured_end[id] = m.end - shift;
  }

  for (const std::string& g : report_detail::kind_group_names()) {
    KindError e;
    e.kind = g;
    bool present = false;
    std::size_t id = 0;
    for (const auto& list : s.actions) {
      for (const Action& a : list) {
        const std::size_t aid = id++;
        if (report_detail::kind_group(a.kind) != g) continue;
        present = true;
        if (c.predicted_start[aid] < 0 || c.measured_start[aid] < 0) continue;
        ++e.count;
        e.predicted += c.predicted_end[aid] - c.predicted_start[aid];
        e.measured += c.measured_end[aid] - c.measured_start[aid];
      }
    }
    if (present) c.kinds.push_back(e);
  }
  c.iteration.kind = "iteration";
  c.iteration.count = 1;
  c.iteration.predicted = plan.predicted_iteration > 0
                              ? plan.predicted_iteration
                              : span_of(c.predicted_start, c.predicted_end);
  c.iteration.measured =
      run.iteration_time > 0 ? run.iteration_time : span_of(c.measured_start, c.measured_end);
  return c;
}

ScheduleReport simulated_iteration_report(const std::string& name, const std::string& description,
                                          const Schedule& schedule,
                                          const std::vector<ActionTiming>& timings,
                                          const IterationResult& result) {
  ScheduleReport r;
  r.name = name;
  r.description = description;
  r.schedule = schedule;
  const int devices = static_cast<int>(schedule.actions.size());
  std::vector<std::size_t> offset(devices + 1, 0);
  for (int d = 0; d < devices; ++d) offset[d + 1] = offset[d] + schedule.actions[d].size();
  EvalResult& e = r.result;
  e.start.assign(offset[devices], 0);
  e.end.assign(offset[devices], 0);
  for (const ActionTiming& t : timings) {
    if (t.device < 0 || t.device >= devices ||
        t.index >= static_cast<std::int32_t>(schedule.actions[t.device].size()))
      continue;
    e.start[offset[t.device] + t.index] = t.start;
    e.end[offset[t.device] + t.index] = t.end;
  }
  e.device.assign(devices, DeviceStats{});
  TimePs first = std::numeric_limits<TimePs>::max(), last = 0;
  for (int d = 0; d < devices; ++d) {
    DeviceStats& st = e.device[d];
    st.first_start = std::numeric_limits<TimePs>::max();
    for (std::size_t k = 0; k < schedule.actions[d].size(); ++k) {
      const std::size_t id = offset[d] + k;
      st.last_end = std::max(st.last_end, e.end[id]);
      if (!is_compute(schedule.actions[d][k].kind)) continue;
      st.first_start = std::min(st.first_start, e.start[id]);
      st.busy += e.end[id] - e.start[id];
    }
    if (st.first_start == std::numeric_limits<TimePs>::max()) st.first_start = 0;
    first = std::min(first, st.first_start);
    last = std::max(last, st.last_end);
    e.cost = std::max(e.cost, st.last_end - st.first_start);
    e.ideal = std::max(e.ideal, st.busy);
  }
  e.makespan = last > first ? last - first : 0;
  e.bubble_rate = e.cost > 0 ? static_cast<double>(e.cost - e.ideal) / e.cost : 0;
  e.bubble_fraction = e.ideal > 0 ? static_cast<double>(e.cost - e.ideal) / e.ideal : 0;
  r.iteration_time = result.iteration;
  r.tokens_per_second = result.tokens_per_sec;
  r.mfu = result.mfu;
  TimePs exposed = 0;
  for (int k = 0; k < kNumCommKinds; ++k) exposed += result.exposed[k];
  r.exposed_comm = exposed;
  r.fits = result.fits;
  // Per pipeline rank, the first simulated GPU of that rank (its representative) draws it.
  std::vector<int> gpu_of_rank(devices, -1), rank_of_gpu(result.memory.size(), -1);
  for (int g = 0; g < static_cast<int>(result.memory.size()); ++g) {
    const DeviceMemory& m = result.memory[g];
    r.peak_memory_bytes.push_back(m.peak);
    if (m.pipeline_rank < 0 || m.pipeline_rank >= devices) continue;
    // Peaks in GB (the report's memory unit for a simulated iteration): everything held.
    e.device[m.pipeline_rank].peak_memory =
        std::max(e.device[m.pipeline_rank].peak_memory, m.peak * 1e-9);
    if (gpu_of_rank[m.pipeline_rank] < 0) {
      gpu_of_rank[m.pipeline_rank] = g;
      rank_of_gpu[g] = m.pipeline_rank;
    }
  }
  // Memory over time from the simulation's memory counters (GB, one step function per GPU).
  if (!result.trace.counters.empty()) {
    e.memory.assign(devices, {});
    for (const TraceCounter& c : result.trace.counters)
      if (c.pid >= 0 && c.pid < static_cast<int>(rank_of_gpu.size()) && rank_of_gpu[c.pid] >= 0)
        e.memory[rank_of_gpu[c.pid]].push_back({c.time, c.value});
  }
  return r;
}

}  // namespace pw
