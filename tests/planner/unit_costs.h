#pragma once
// Test helpers shared by the memory-controllable schedule tests: unit pass costs and the largest
// device peak of an evaluation.
#include <algorithm>

#include "core/cost_table.h"
#include "planner/schedules/generator.h"
#include "sim/evaluator.h"

namespace pw::testing {

/// F = B = W = 1 slot, no communication. `mw` = M_W / M_B: 1 keeps a chunk's activation until its
/// W (the accounting under which the published V-Min / V-Half peaks hold), 0 frees it at B.
inline UniformCosts unit(double mw) {
  UniformCosts c{1, 1, 1, 0, 0};
  c.mw_over_mb = mw;
  return c;
}

/// Generator parameters with p devices, m microbatches and unit costs.
inline GeneratorParams params(int p, int m, double mw) {
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  gp.costs = unit(mw);
  return gp;
}

/// Largest per-device peak memory of an evaluation.
inline double max_peak(const EvalResult& r) {
  double pk = 0;
  for (const DeviceStats& d : r.device) pk = std::max(pk, d.peak_memory);
  return pk;
}

}  // namespace pw::testing
