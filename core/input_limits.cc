#include "core/input_limits.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <vector>

#include "core/error.h"

namespace pw {

void check_input_size(std::size_t bytes, const std::string& source) {
  if (bytes > kMaxInputBytes)
    throw ConfigError(
        source, "", fmt::format("{} bytes; expected at most {} MiB", bytes, kMaxInputBytes >> 20));
}

void check_utf8(const std::string& text, const std::string& source) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  int line = 1;
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c == '\n') ++line;
    int extra = 0;
    unsigned int cp = c;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07;
    } else {
      extra = -1;
    }
    bool ok = extra > 0;
    for (int k = 1; ok && k <= extra; ++k) {
      if (i + k >= n || (p[i + k] & 0xc0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
    if (ok && ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) ||
               (extra == 3 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
      ok = false;
    if (!ok)
      throw ConfigError(source, fmt::format("line {}", line),
                        fmt::format("byte 0x{:02x} is not UTF-8; expected UTF-8 text", c));
    i += static_cast<std::size_t>(extra) + 1;
  }
}

void check_yaml_limits(const YAML::Node& root, const std::string& source) {
  // Iterative walk (a deep document must not overflow the stack here either).
  struct Item {
    YAML::Node node;
    int depth;
  };
  std::vector<Item> stack{{root, 1}};
  std::size_t count = 0;
  while (!stack.empty()) {
    Item it = std::move(stack.back());
    stack.pop_back();
    if (++count > kMaxDocumentNodes)
      throw ConfigError(source, "",
                        fmt::format("more than {} nodes once aliases are expanded; expected a "
                                    "document without alias bombs",
                                    kMaxDocumentNodes));
    if (it.depth > kMaxDocumentDepth)
      throw ConfigError(source, "", fmt::format("nested deeper than {} levels", kMaxDocumentDepth));
    if (it.node.IsSequence()) {
      for (const YAML::Node& c : it.node) stack.push_back({c, it.depth + 1});
    } else if (it.node.IsMap()) {
      for (const auto& kv : it.node) {
        if (!kv.first.IsScalar())
          throw ConfigError(source, fmt::format("line {}", kv.first.Mark().line + 1),
                            "a map key must be a plain scalar, got a sequence or map");
        stack.push_back({kv.first, it.depth + 1});
        stack.push_back({kv.second, it.depth + 1});
      }
    }
  }
}

namespace {

template <class Json>
Json parse_limited(const std::string& text, const std::string& source) {
  check_input_size(text.size(), source);
  check_utf8(text, source);
  typename Json::parser_callback_t depth_guard = [&](int depth, nlohmann::json::parse_event_t,
                                                     Json&) {
    if (depth > kMaxDocumentDepth)
      throw ConfigError(source, "", fmt::format("nested deeper than {} levels", kMaxDocumentDepth));
    return true;
  };
  try {
    return Json::parse(text, depth_guard);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(source, "", fmt::format("JSON syntax error: {}", e.what()));
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number that does not fit a double (1e999).
    throw ConfigError(source, "", fmt::format("JSON error: {}", e.what()));
  }
}

}  // namespace

nlohmann::json parse_json_limited(const std::string& text, const std::string& source) {
  return parse_limited<nlohmann::json>(text, source);
}

nlohmann::ordered_json parse_ordered_json_limited(const std::string& text,
                                                  const std::string& source) {
  return parse_limited<nlohmann::ordered_json>(text, source);
}

}  // namespace pw
