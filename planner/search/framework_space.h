#pragma once
/// `plan --framework`: the search space cut to what the framework runs (internal to
/// search_space.cc's constrain_space; the per-configuration rules are frameworks.h's).
#include <set>

#include "core/plan.h"
#include "planner/search/search_space.h"

namespace pw::detail {

/// Keeps only the schedules, ZeRO stages, offload and FP8 forms `c.framework` runs (refusing,
/// naming the flags, a constraint set that leaves none); `ps` holds the pipeline degrees left.
void keep_framework(const SearchConstraints& c, const ModelShape& m, const std::set<int>& ps,
                    SearchSpace* s);

}  // namespace pw::detail
