#pragma once
// A report input exercising every section, shared by the report tests.
#include <string>

#include "report/build.h"
#include "report/report.h"

namespace pw::testing {

/// 1F1B with every full backward split into B then W on the same device (legal, 3 passes).
Schedule split_one_f_one_b(int p, int m);

/// gpipe, 1f1b, the split 1F1B above (+ an OPT per device) and one entry that failed, at
/// p=4, m=8, F=B=W=1 ms; plus a curve, a Pareto front and a measured comparison.
ReportInput full_report_input();

/// A crowded Pareto front as the planner hands it to the report: 14 points, some nearly on top of
/// each other (the default GPT-3 plan's front has 12).
std::vector<ParetoPoint> crowded_pareto();

}  // namespace pw::testing
