#pragma once
/// Named model shapes (GPT-style, Megatron names). See docs/hwmodels.md for sources.
#include <string>
#include <vector>

#include "core/plan.h"

namespace pw::hw {

/// A preset and where its shape comes from.
struct ModelPreset {
  ModelShape shape;
  std::string source;
};

/// All presets, in a fixed order.
const std::vector<ModelPreset>& model_presets();
/// The preset called `name`, or nullptr.
const ModelPreset* find_model_preset(const std::string& name);
/// Preset names, in order (for error messages).
std::vector<std::string> model_preset_names();

}  // namespace pw::hw
