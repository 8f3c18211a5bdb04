#include "tests/report/test_input.h"

#include "planner/schedules/generator.h"

namespace pw::testing {

Schedule split_one_f_one_b(int p, int m) {
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  Schedule s = generate_schedule(default_registry(), "1f1b", gp);
  s.name = "1f1b-split";
  for (auto& list : s.actions) {
    std::vector<Action> out;
    for (const Action& a : list) {
      if (a.kind != ActionKind::kBW) {
        out.push_back(a);
        continue;
      }
      Action b = a, w = a;
      b.kind = ActionKind::kB;
      w.kind = ActionKind::kW;
      out.push_back(b);
      out.push_back(w);
    }
    list = std::move(out);
  }
  return s;
}

ReportInput full_report_input() {
  ReportInput in;
  in.title = "test report";
  in.context = {{"p", "4"}, {"m", "8"}, {"costs", "F=B=W=1 ms"}};
  in.memory_unit = "microbatches";
  GeneratorParams gp;
  gp.p = 4;
  gp.m = 8;
  const UniformCosts uc{millis_to_ps(1), millis_to_ps(1), millis_to_ps(1), 0, 0};
  in.schedules =
      build_schedule_reports(default_registry(), {"gpipe", "1f1b"}, gp,
                             [&](const Placement& pl) { return layer_scaled_cost_table(pl, uc); });
  Schedule split = split_one_f_one_b(4, 8);
  for (auto& list : split.actions) list.push_back(Action{ActionKind::kOptStep, -1, -1});
  in.schedules.push_back(
      evaluate_for_report(split, layer_scaled_cost_table(split.placement, uc), "split backward"));
  ScheduleReport failed;
  failed.name = "v-min";
  failed.error = "m must be at least 2p";
  in.schedules.push_back(failed);
  in.memory_limit = 6;

  Curve c;
  c.title = "Adaptive: memory limit vs makespan";
  c.x_label = "memory limit";
  c.y_label = "makespan";
  for (auto [x, y] : {std::pair{4, 59}, {5, 56}, {6, 53}, {7, 51}, {8, 48}})
    c.points.push_back({static_cast<double>(x), static_cast<double>(y), ""});
  in.curves.push_back(c);

  in.pareto = {{"t1 p4 1f1b", millis_to_ps(33), 40 * kGiB, true, 1000.0},
               {"t1 p4 gpipe", millis_to_ps(33), 60 * kGiB, false, std::nullopt},
               {"t2 p2 1f1b", millis_to_ps(30), 70 * kGiB, true, 1100.0}};

  Plan plan;
  plan.schedule = in.schedules[1].schedule;
  const EvalResult& r = in.schedules[1].result;
  std::size_t id = 0;
  MeasuredRun run;
  run.backend = "cpu";
  run.device = "test machine";
  for (int d = 0; d < 4; ++d) {
    for (int k = 0; k < static_cast<int>(plan.schedule.actions[d].size()); ++k, ++id) {
      plan.predicted.push_back({d, k, r.start[id], r.end[id]});
      // Measured: every action 10% longer, placed at 1.1x the predicted start.
      run.actions.push_back(
          {d, k, plan.schedule.actions[d][k], r.start[id] * 11 / 10, r.end[id] * 11 / 10});
    }
  }
  plan.predicted_iteration = r.makespan;
  run.iteration_time = r.makespan * 11 / 10;
  in.measured = compare_run(plan, run, "run.json");
  return in;
}

std::vector<ParetoPoint> crowded_pareto() {
  std::vector<ParetoPoint> front;
  for (int i = 0; i < 14; ++i) {
    const double mem = (19.3 + (i < 6 ? 0.7 * i : 4.0 * i)) * 1e9;
    const double secs = 23.5 - 0.35 * i - (i > 9 ? 0.4 : 0.0);
    front.push_back({"config " + std::to_string(i), seconds_to_ps(secs), mem, true, 1e5 + i});
  }
  return front;
}

}  // namespace pw::testing
