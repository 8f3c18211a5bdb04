#pragma once
/// The screen's stage costs against a generated schedule: the evaluator's cost table, and the
/// ZeRO-3-by-stage figures that depend on the schedule's sweeps (each device's runs of
/// consecutive passes of one stage).
#include <vector>

#include "core/cost_table.h"
#include "core/schedule.h"
#include "planner/search/screen.h"

namespace pw {

/// Converts stage costs into the evaluator's cost table (picoseconds, memory deltas in bytes).
/// `explicit_recompute`: the schedule has R actions, which then carry the recomputation time and
/// memory that are otherwise folded into B.
/// OVERLAP_F_B is priced as the DES runs it: its stage's F plus its paired stage's B + W
/// (CostTable::overlap_pairs).
CostTable to_cost_table(const StageCosts& sc, int num_stages_total,
                        const std::vector<int>& stage_of, bool explicit_recompute = false);

/// Exposed ZeRO-3 gather time of `schedule` (stage costs by placement index): per device the
/// first sweep's gather plus what its later sweeps' gathers exceed its compute by; the maximum
/// over devices. 0 without ZeRO-3. `busy` = per-device compute time (seconds).
double exposed_gather(const StageCosts& sc, const Schedule& schedule,
                      const std::vector<double>& busy);

/// ZeRO-3 by stage: a time no device's iteration can beat for the bytes it sends off its node:
/// a gather per sweep of `schedule` (two of them may run before the clock starts), then its
/// reduce-scatters and optimizer step (StageCosts::reduce_link); the maximum over devices.
double gather_link_bound(const StageCosts& sc, const Schedule& schedule);

}  // namespace pw
