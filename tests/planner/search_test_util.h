#pragma once
// Helpers shared by the search tests.
#include <gtest/gtest.h>

#include <string>

#include "hwmodels/profile.h"
#include "planner/search/search.h"

namespace pw::testing {

/// A preset model on `gpus` DGX A100 80GB GPUs, with a memory limit in GB (0: the profile's).
inline PlanProblem problem(const std::string& model, int gpus, double limit_gb = 0) {
  PlanProblem pr;
  EXPECT_TRUE(model_preset(model, &pr.model));
  pr.profile = hw::resolve_profile("dgx-a100-80gb", "", "", "");
  pr.num_gpus = gpus;
  pr.memory_limit = limit_gb * 1e9;
  return pr;
}

}  // namespace pw::testing
