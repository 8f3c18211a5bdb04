#pragma once
/// Input limits, as one policy for every reader: a file is at most kMaxInputBytes, a YAML or JSON
/// document nests at most kMaxDocumentDepth levels and holds at most kMaxDocumentNodes nodes
/// after YAML aliases are expanded, of which aliases may add at most kMaxAliasNodes (a "billion
/// laughs" document is refused from the parser's events, before any node is built), text and
/// YAML scalars are UTF-8, and JSON numbers are finite. Each violation is a ConfigError naming
/// the file.
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
/// Nodes that YAML aliases may add once expanded (configurations use a few small anchors).
inline constexpr std::size_t kMaxAliasNodes = std::size_t{1} << 20;

/// Throws ConfigError(source, "", ...) when `bytes` exceeds kMaxInputBytes.
void check_input_size(std::size_t bytes, const std::string& source);

/// Throws ConfigError(source, "line L", ...) at the first byte sequence that is not UTF-8 (YAML and
/// JSON are UTF-8; a stray byte would otherwise surface later, far from its line).
void check_utf8(const std::string& text, const std::string& source);

/// YAML::Load of the first document of `text` within the limits: size and UTF-8 first, then the
/// parser's events are counted as the document would expand (depth, nodes, nodes added by
/// aliases, an alias inside the node it names) before the tree is built, then every map key
/// must be a scalar and every scalar UTF-8 (escapes can produce bytes that are not). Throws
/// ConfigError naming `source` (and the line where known); YAML syntax errors propagate as
/// YAML::ParserException for the caller to word.
YAML::Node load_yaml_limited(const std::string& text, const std::string& source);

/// nlohmann::json::parse with the limits: depth, size, and every syntax or number error (an
/// overflowing 1e999 included) as one ConfigError line naming `source`.
nlohmann::json parse_json_limited(const std::string& text, const std::string& source);
nlohmann::ordered_json parse_ordered_json_limited(const std::string& text,
                                                  const std::string& source);

}  // namespace pw
