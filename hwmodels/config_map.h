#pragma once
/// A validated view of one YAML mapping, used by the profile and scenario loaders: every read
/// names the file and the dotted key path, so a bad value becomes a one-line pw::ConfigError
/// ("FILE: KEY.PATH: expected ..."). Only loaders include this; the models see plain structs.
#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace pw::hw {

/// One YAML mapping with its file name and key path (empty path = document root).
class ConfigMap {
 public:
  /// Throws ConfigError if `node` is not a mapping (a missing node is an empty mapping only
  /// when `allow_missing`).
  ConfigMap(YAML::Node node, std::string file, std::string path, bool allow_missing = false);

  /// Throws ConfigError naming the first key not in `allowed` and the nearest allowed name.
  void check_keys(const std::vector<std::string>& allowed) const;
  bool has(const std::string& key) const;
  /// "path.key" (or "key" at the root).
  std::string key_path(const std::string& key) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  /// A required number > 0 (or >= 0 when `allow_zero`).
  double positive(const std::string& key, bool allow_zero = false) const;
  /// An optional number > 0 (>= 0 when `allow_zero`); `fallback` when absent.
  double positive_or(const std::string& key, double fallback, bool allow_zero = false) const;
  /// A required integer in [min, max] (max defaults to the int range every caller stores it in:
  /// a larger value is refused, never wrapped).
  long long integer(const std::string& key, long long min = 1,
                    long long max = std::numeric_limits<int>::max()) const;
  /// An optional integer in [min, max]; `fallback` when absent.
  long long integer_or(const std::string& key, long long fallback, long long min = 1,
                       long long max = std::numeric_limits<int>::max()) const;
  /// A required non-empty string.
  std::string text(const std::string& key) const;
  std::string text_or(const std::string& key, const std::string& fallback) const;
  /// A string that must be one of `choices`.
  std::string choice_or(const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& choices) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  /// A required sub-mapping (or an empty one when absent and `optional`).
  ConfigMap child(const std::string& key, bool optional = false) const;
  /// The raw node (undefined when absent).
  YAML::Node raw(const std::string& key) const;
  /// Throws ConfigError(file, key_path(key), message).
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  YAML::Node node_;
  std::string file_;
  std::string path_;
};

/// Parses YAML text; a syntax error becomes ConfigError(file, "", "YAML syntax error ...").
YAML::Node parse_yaml(const std::string& text, const std::string& file);

}  // namespace pw::hw
