#pragma once
/// Input limits, as one policy for every reader: a file is at most kMaxInputBytes, a YAML or JSON
/// document nests at most kMaxDocumentDepth levels and holds at most kMaxDocumentNodes nodes
/// after YAML aliases are expanded (a "billion laughs" document is refused instead of growing
/// the process), and JSON numbers are finite. Each violation is a ConfigError naming the file.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace YAML {
class Node;
}

namespace pw {

inline constexpr std::size_t kMaxInputBytes = std::size_t{256} << 20;  ///< 256 MiB
inline constexpr int kMaxDocumentDepth = 256;
inline constexpr std::size_t kMaxDocumentNodes = std::size_t{1} << 24;  ///< ~16.8 million

/// Throws ConfigError(source, "", ...) when `bytes` exceeds kMaxInputBytes.
void check_input_size(std::size_t bytes, const std::string& source);

/// Throws ConfigError(source, "line L", ...) at the first byte sequence that is not UTF-8 (YAML and
/// JSON are UTF-8; a stray byte would otherwise surface later, far from its line).
void check_utf8(const std::string& text, const std::string& source);

/// Throws ConfigError when `root` (aliases followed) is deeper than kMaxDocumentDepth or counts
/// more than kMaxDocumentNodes nodes; stops counting at the limit, so it costs at most that.
void check_yaml_limits(const YAML::Node& root, const std::string& source);

/// nlohmann::json::parse with the limits: depth, size, and every syntax or number error (an
/// overflowing 1e999 included) as one ConfigError line naming `source`.
nlohmann::json parse_json_limited(const std::string& text, const std::string& source);
nlohmann::ordered_json parse_ordered_json_limited(const std::string& text,
                                                  const std::string& source);

}  // namespace pw
