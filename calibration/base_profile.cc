#include "calibration/base_profile.h"

#include "core/error.h"

namespace pw::calibration {

YAML::Node load_base_profile(const std::string& text, const std::string& file, bool needs_gpu) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(file, "", std::string("YAML syntax error: ") + e.what());
  }
  if (!doc.IsMap() || !doc["node"].IsMap() || (needs_gpu && !doc["gpu"].IsMap()))
    throw ConfigError(file, needs_gpu ? "gpu" : "node",
                      needs_gpu ? "expected a hardware profile with gpu and node sections"
                                : "expected a hardware profile with a node section");
  return doc;
}

}  // namespace pw::calibration
