#pragma once
/// A base hardware profile's YAML, as the calibration writers that rewrite one read it (the CUDA
/// profile, the nccl-tests fit, the host's Adam). Internal to calibration/ (yaml-cpp is private).
#include <yaml-cpp/yaml.h>

#include <string>

namespace pw::calibration {

/// `text` (read from `file`) parsed: a map with a node section (and a gpu section when
/// `needs_gpu`); a ConfigError naming the file otherwise.
YAML::Node load_base_profile(const std::string& text, const std::string& file, bool needs_gpu);

}  // namespace pw::calibration
