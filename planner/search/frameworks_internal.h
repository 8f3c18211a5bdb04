#pragma once
/// Internal to planner/search/frameworks.cc and framework_export.cc: the tables and rules both
/// the framework checks and the exporters read.
#include <string>
#include <vector>

#include "core/plan.h"
#include "planner/search/frameworks.h"

namespace pw::detail {

// torchtitan defines models in code and selects one by (name, flavor); these are its flavors
// that are one of pipewright's presets (torchtitan/models/{llama3,qwen3}).
struct Flavor {
  const char* preset;
  const char* name;
  const char* flavor;
};
/// torchtitan's flavor (NeMo's recipe) of the model's shape, or null.
const Flavor* torchtitan_flavor(const ModelShape& m);
const Flavor* nemo_recipe(const ModelShape& m);
/// The framework's own name of generator `schedule` (null when it has none).
const char* native_name(Framework fw, const std::string& schedule);
/// Megatron's even split, or an even split after --decoder-first/last-pipeline-num-layers
/// (non-interleaved only). Sets *first / *last to 0 when not needed.
bool megatron_split(const std::vector<int>& layers, int p, int v, int* first, int* last);

}  // namespace pw::detail

// Both including files read these by their short names.
namespace pw {
using detail::Flavor;
using detail::megatron_split;
using detail::native_name;
using detail::nemo_recipe;
using detail::torchtitan_flavor;
}  // namespace pw
