#pragma once
/// Comparing schedules on a scenario: each schedule is generated for the scenario's parallel
/// configuration (its p, microbatches, recompute, ZeRO, ...; the scenario's own uneven split for
/// the schedules with its stage count) as `plan` generates it, and simulated by the
/// discrete-event simulator as `plan` ranks its rows and `simulate SCENARIO` runs the scenario's
/// own schedule, so the report carries iteration time, tokens/s, MFU, exposed communication,
/// memory per GPU and fit, and the simulated timeline.
#include <string>
#include <vector>

#include "hwmodels/scenario.h"
#include "report/report.h"

namespace pw {

/// Builds the report entries for `names` on scenario `sc` (which must have a `parallel:`
/// section; ConfigError naming sc.file otherwise). Unknown names throw ConfigError listing the
/// valid ones; a schedule that cannot be generated for the configuration becomes an entry with
/// its reason. `memory_limit_bytes` <= 0 uses the GPU's usable memory. Memory figures are
/// everything a GPU holds, in GB (ReportInput::memory_unit "GB", memory_total).
ReportInput compare_on_scenario(const hw::Scenario& sc, const std::vector<std::string>& names,
                                double memory_limit_bytes = 0);

}  // namespace pw
