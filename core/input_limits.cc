#include "core/input_limits.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace pw {

void check_input_size(std::size_t bytes, const std::string& source) {
  if (bytes > kMaxInputBytes)
    throw ConfigError(
        source, "", fmt::format("{} bytes; expected at most {} MiB", bytes, kMaxInputBytes >> 20));
}

namespace {

struct BadByte {
  int line;  ///< 1-based line of `text` holding it
  unsigned char byte;
};

// The first byte sequence of `text` that is not UTF-8, if any.
std::optional<BadByte> first_non_utf8(const std::string& text) {
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
    if (!ok) return BadByte{line, c};
    i += static_cast<std::size_t>(extra) + 1;
  }
  return std::nullopt;
}

std::string line_of(const YAML::Mark& m) { return fmt::format("line {}", m.line + 1); }

// Counts a YAML document as it would be once aliases are expanded, from the parser's events:
// every node once, an alias as the size of the node it names. Nothing is built, so an alias
// bomb costs its text, not its expansion.
class ExpansionCounter final : public YAML::EventHandler {
 public:
  explicit ExpansionCounter(const std::string& source) : source_(source) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t a) override { leaf(m, a); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                const std::string&) override {
    leaf(m, a);
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t a) override {
    if (a >= named_.size() || named_[a].nodes == 0)
      throw ConfigError(source_, line_of(m),
                        "an alias inside the node it names (a cycle); expected a tree");
    aliased_ += named_[a].nodes;
    if (aliased_ > kMaxAliasNodes)
      throw ConfigError(source_, line_of(m),
                        fmt::format("aliases expand to more than {} nodes; expected a document "
                                    "without alias bombs",
                                    kMaxAliasNodes));
    add(m, named_[a]);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                       YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                  YAML::EmitterStyle::value) override {
    open(m, a);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Size {
    std::size_t nodes = 0;  ///< 0: not yet complete
    int height = 0;         ///< levels, the node itself included
  };
  struct Open {
    Size size;
    YAML::anchor_t anchor;
  };

  void leaf(const YAML::Mark& m, YAML::anchor_t a) {
    const Size one{1, 1};
    name(a, one);
    add(m, one);
  }
  // A collection opens: the node itself is counted now, its children as they come.
  void open(const YAML::Mark& m, YAML::anchor_t a) {
    count(m, 1);
    if (static_cast<int>(open_.size()) + 1 > kMaxDocumentDepth)
      throw ConfigError(source_, line_of(m),
                        fmt::format("nested deeper than {} levels", kMaxDocumentDepth));
    name(a, Size{});  // in progress: an alias to it now would be a cycle
    open_.push_back({Size{1, 1}, a});
  }
  void close() {
    const Open o = open_.back();
    open_.pop_back();
    name(o.anchor, o.size);
    add_to_parent(o.size);
  }
  // A leaf or an alias's copy of `s` nodes appears here: counted, and added to the parent.
  void add(const YAML::Mark& m, const Size& s) {
    count(m, s.nodes);
    if (static_cast<int>(open_.size()) + s.height > kMaxDocumentDepth)
      throw ConfigError(source_, line_of(m),
                        fmt::format("nested deeper than {} levels", kMaxDocumentDepth));
    add_to_parent(s);
  }
  void add_to_parent(const Size& s) {
    if (open_.empty()) return;
    Size& p = open_.back().size;
    p.nodes += s.nodes;
    p.height = std::max(p.height, s.height + 1);
  }
  void count(const YAML::Mark& m, std::size_t n) {
    expanded_ += n;
    if (expanded_ > kMaxDocumentNodes)
      throw ConfigError(source_, line_of(m),
                        fmt::format("more than {} nodes once aliases are expanded; expected a "
                                    "document without alias bombs",
                                    kMaxDocumentNodes));
  }
  void name(YAML::anchor_t a, const Size& s) {
    if (a == YAML::NullAnchor) return;
    if (a >= named_.size()) named_.resize(a + 1);
    named_[a] = s;
  }

  const std::string& source_;
  std::vector<Open> open_;
  std::vector<Size> named_;  // by anchor id
  std::size_t expanded_ = 0, aliased_ = 0;
};

}  // namespace

void check_utf8(const std::string& text, const std::string& source) {
  if (const std::optional<BadByte> bad = first_non_utf8(text))
    throw ConfigError(source, fmt::format("line {}", bad->line),
                      fmt::format("byte 0x{:02x} is not UTF-8; expected UTF-8 text", bad->byte));
}

YAML::Node load_yaml_limited(const std::string& text, const std::string& source) {
  check_input_size(text.size(), source);
  check_utf8(text, source);
  {
    std::istringstream in(text);
    YAML::Parser parser(in);
    ExpansionCounter counter(source);
    parser.HandleNextDocument(counter);
  }
  YAML::Node root = YAML::Load(text);
  // The counter bounds this walk (aliases followed) to kMaxDocumentNodes nodes and depth.
  std::vector<YAML::Node> stack{root};
  while (!stack.empty()) {
    const YAML::Node node = std::move(stack.back());
    stack.pop_back();
    if (node.IsScalar()) {
      if (const std::optional<BadByte> bad = first_non_utf8(node.Scalar()))
        throw ConfigError(source, fmt::format("line {}", node.Mark().line + bad->line),
                          fmt::format("a scalar holds byte 0x{:02x}, which is not UTF-8 (an "
                                      "escape?); expected UTF-8 text",
                                      bad->byte));
    } else if (node.IsSequence()) {
      for (const YAML::Node& c : node) stack.push_back(c);
    } else if (node.IsMap()) {
      for (const auto& kv : node) {
        if (!kv.first.IsScalar())
          throw ConfigError(source, line_of(kv.first.Mark()),
                            "a map key must be a plain scalar, got a sequence or map");
        stack.push_back(kv.first);
        stack.push_back(kv.second);
      }
    }
  }
  return root;
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
