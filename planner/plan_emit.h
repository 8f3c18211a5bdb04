#pragma once
/// From a chosen configuration to an executable plan (core/plan.h): the generated schedule with
/// its layer split, communication made explicit (core/lowering.h), predicted per-action times
/// from the evaluator, the rank-to-GPU map and provenance. Also the PyTorch pipelining CSV.
#include <string>

#include "core/plan.h"
#include "planner/generator.h"
#include "planner/screen.h"

namespace pw {

/// Finds `pc` (a scenario's `parallel:` section) in `space`: schedule by name (and v for
/// interleaved-style generators). Returns false with `why` when the space cannot express it.
bool config_from_parallel(const SearchSpace& space, const ParallelConfig& pc, SearchConfig* out,
                          std::string* why);

/// The inverse: the core ParallelConfig of a search configuration.
ParallelConfig parallel_from_config(const SearchSpace& space, const SearchConfig& c);

/// Builds the plan of `c`: throws ConfigError when the generator refuses it. Megatron rank
/// order (tensor innermost, then data, then pipeline): pipeline rank r runs on GPU r * t * d.
Plan build_plan(const CostModel& model, const GeneratorRegistry& registry, const SearchConfig& c,
                const std::string& cluster, const Provenance& provenance);

}  // namespace pw
