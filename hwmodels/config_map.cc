#include "hwmodels/config_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/input_limits.h"

namespace pw::hw {
namespace {

std::string join_choices(const std::vector<std::string>& choices) {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) out += (i ? ", " : "") + choices[i];
  return out;
}

// A value as the error names it: its text, or the kind of node written where one was expected.
std::string written(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return fmt::format("'{}'", n.Scalar());
}

}  // namespace

ConfigMap::ConfigMap(YAML::Node node, std::string file, std::string path, bool allow_missing)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.IsDefined() || node_.IsNull()) {
    if (allow_missing) {
      node_ = YAML::Node(YAML::NodeType::Map);
      return;
    }
    throw ConfigError(file_, path_.empty() ? "(document)" : path_, "missing; expected a mapping");
  }
  if (!node_.IsMap()) {
    throw ConfigError(file_, path_.empty() ? "(document)" : path_, "expected a mapping");
  }
}

void ConfigMap::check_keys(const std::vector<std::string>& allowed) const {
  std::vector<std::string> seen;
  for (const auto& kv : node_) {
    std::string key = kv.first.as<std::string>();
    // YAML parsers keep one of two equal keys silently; a second value is never meant.
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      fail(key, "given twice; expected each key once");
    seen.push_back(key);
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == key;
    if (!ok) {
      fail(key, fmt::format("unknown key; did you mean '{}'? (valid: {})",
                            nearest_name(key, allowed), join_choices(allowed)));
    }
  }
}

bool ConfigMap::has(const std::string& key) const {
  YAML::Node n = node_[key];
  return n.IsDefined() && !n.IsNull();
}

std::string ConfigMap::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void ConfigMap::fail(const std::string& key, const std::string& message) const {
  throw ConfigError(file_, key_path(key), message);
}

YAML::Node ConfigMap::raw(const std::string& key) const { return node_[key]; }

double ConfigMap::positive(const std::string& key, bool allow_zero) const {
  const char* expected = allow_zero ? "a number >= 0" : "a number > 0";
  if (!has(key)) fail(key, fmt::format("missing; expected {}", expected));
  double v = 0;
  try {
    v = node_[key].as<double>();
  } catch (const YAML::Exception&) {
    fail(key, fmt::format("{} is not a number; expected {}", written(node_[key]), expected));
  }
  if (!std::isfinite(v) || v < 0 || (!allow_zero && v == 0)) {
    fail(key, fmt::format("{} is out of range; expected {}", node_[key].Scalar(), expected));
  }
  return v;
}

double ConfigMap::positive_or(const std::string& key, double fallback, bool allow_zero) const {
  return has(key) ? positive(key, allow_zero) : fallback;
}

long long ConfigMap::integer(const std::string& key, long long min, long long max) const {
  std::string expected = max == std::numeric_limits<int>::max()
                             ? fmt::format("an integer >= {}", min)
                             : fmt::format("an integer in [{}, {}]", min, max);
  if (!has(key)) fail(key, "missing; expected " + expected);
  long long v = 0;
  try {
    v = node_[key].as<long long>();
  } catch (const YAML::Exception&) {
    fail(key, fmt::format("{} is not an integer; expected {}", written(node_[key]), expected));
  }
  if (v < min) fail(key, fmt::format("{} is out of range; expected {}", v, expected));
  if (v > max) fail(key, fmt::format("{} is out of range; expected at most {}", v, max));
  return v;
}

long long ConfigMap::integer_or(const std::string& key, long long fallback, long long min,
                                long long max) const {
  return has(key) ? integer(key, min, max) : fallback;
}

std::string ConfigMap::text(const std::string& key) const {
  if (!has(key)) fail(key, "missing; expected a string");
  if (!node_[key].IsScalar()) fail(key, written(node_[key]) + "; expected a string");
  std::string v = node_[key].Scalar();
  if (v.empty()) fail(key, "empty; expected a non-empty string");
  return v;
}

std::string ConfigMap::text_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? text(key) : fallback;
}

std::string ConfigMap::choice_or(const std::string& key, const std::string& fallback,
                                 const std::vector<std::string>& choices) const {
  if (!has(key)) return fallback;
  std::string v = text(key);
  for (const auto& c : choices) {
    if (c == v) return v;
  }
  fail(key, fmt::format("unknown value '{}'; expected one of {} (did you mean '{}'?)", v,
                        join_choices(choices), nearest_name(v, choices)));
}

bool ConfigMap::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  try {
    return node_[key].as<bool>();
  } catch (const YAML::Exception&) {
    fail(key, fmt::format("{} is not a boolean; expected true or false", written(node_[key])));
  }
}

ConfigMap ConfigMap::child(const std::string& key, bool optional) const {
  return ConfigMap(node_[key], file_, key_path(key), optional);
}

YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  try {
    return load_yaml_limited(text, file);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(file, "",
                      fmt::format("YAML syntax error at line {}: {}", e.mark.line + 1, e.msg));
  }
}

}  // namespace pw::hw
