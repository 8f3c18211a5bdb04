#pragma once
/// Comparing schedules on a scenario: each schedule is generated for the scenario's parallel
/// configuration (its p, microbatches, recompute, ZeRO, ...) and scored with the planner's cost
/// model (planner/search/screen.h: per-stage pass times, activation bytes, static memory per GPU),
/// so the report carries iteration time, tokens/s, MFU, exposed communication, peak bytes and fit.
#include <string>
#include <vector>

#include "hwmodels/scenario.h"
#include "report/report.h"

namespace pw {

/// Builds the report entries for `names` on scenario `sc` (which must have a `parallel:`
/// section; ConfigError naming sc.file otherwise). Unknown names throw ConfigError listing the
/// valid ones; a schedule that cannot be generated for the configuration becomes an entry with
/// its reason. `memory_limit_bytes` <= 0 uses the GPU's capacity. Memory figures are in GiB
/// (ReportInput::memory_unit "GiB act.").
ReportInput compare_on_scenario(const hw::Scenario& sc, const std::vector<std::string>& names,
                                double memory_limit_bytes = 0);

}  // namespace pw
