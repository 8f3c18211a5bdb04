// The YAML limits, counted from the parser's events before any node is built.
#include "core/input_limits.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <string>

#include "core/error.h"

namespace pw {
namespace {

std::string refusal(const std::string& text) {
  try {
    load_yaml_limited(text, "f.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// "a" holds k scalars; each next anchor holds k aliases of the one before: once expanded, level
// j (0-based) is a sequence of k copies of level j - 1, so it holds s_j = 1 + k s_{j-1} nodes,
// s_0 = 1 + k; the aliases of levels 1..n add k (s_0 + ... + s_{n-1}) nodes in all.
std::string laughs(int k, int levels) {
  std::string doc;
  for (int j = 0; j < levels; ++j) {
    const char name = static_cast<char>('a' + j);
    doc += std::string(1, name) + ": &" + name + " [";
    for (int i = 0; i < k; ++i)
      doc += (i ? ", " : "") + (j == 0 ? std::string("x") : "*" + std::string(1, name - 1));
    doc += "]\n";
  }
  return doc;
}

TEST(InputLimits, AliasesMayAddAtMostAMillionNodes) {
  // k = 4, 10 levels: s_j = 1 + 4 s_{j-1}, s_0 = 5: 5, 21, 85, 341, 1365, 5461, 21845, 87381,
  // 349525; aliases add 4 x (5 + 21 + ... + 87381) = 4 x 116504 = 466016 nodes through level 8
  // and 4 x 349525 more at level 9 = 1864116 > 2^20 = 1048576: refused at level 9 (line 10).
  EXPECT_NO_THROW(load_yaml_limited(laughs(4, 9), "f.yaml"));
  const std::string msg = refusal(laughs(4, 10));
  EXPECT_NE(msg.find("f.yaml: line 10: aliases expand to more than 1048576 nodes"),
            std::string::npos)
      << msg;
}

TEST(InputLimits, AnAliasBombIsRefusedFromItsTextNotItsExpansion) {
  // 9 levels of 9: 9^9 = 387 M strings once expanded. Counting events costs its ~800 bytes; the
  // old walk of the expanded tree stopped at 2^24 nodes, about a second (20 instrumented).
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(refusal(laughs(9, 9)).find("aliases expand"), std::string::npos);
  // Not a timing test: a bound a thousand times what it takes, so only a walk could miss it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(InputLimits, AnAliasInsideTheNodeItNamesIsACycle) {
  EXPECT_NE(refusal("a: &a [1, *a]\n").find("line 1: an alias inside the node it names"),
            std::string::npos);
  EXPECT_NE(refusal("a: &a {b: {c: *a}}\n").find("a cycle"), std::string::npos);
}

TEST(InputLimits, DepthCountsWhatAnAliasBringsIn) {
  // An anchor 200 levels deep used at depth 100 expands to 300 levels: over the 256 allowed,
  // though neither the anchor's text nor the alias's position is.
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  const std::string at = "b: " + std::string(99, '[') + "*a" + std::string(99, ']') + "\n";
  EXPECT_NO_THROW(load_yaml_limited("a: &a " + deep + "\n", "f.yaml"));
  EXPECT_NE(refusal("a: &a " + deep + "\n" + at).find("nested deeper than 256 levels"),
            std::string::npos);
  EXPECT_NE(refusal(std::string(300, '[') + std::string(300, ']')).find("nested deeper"),
            std::string::npos);
}

TEST(InputLimits, ScalarsMustBeUtf8AfterEscapes) {
  // The text is UTF-8 either way: "\xff" decodes to U+00FF, written as UTF-8, but yaml-cpp
  // decodes "\N" (U+0085, next line) to the single byte 0x85, which no JSON writer accepts (a
  // schedule's error message once threw nlohmann's type_error 316 on it: libFuzzer's find).
  EXPECT_NO_THROW(load_yaml_limited("a: \"\\xff\"\n", "f.yaml"));
  EXPECT_NE(refusal("a: 1\nb: \"x\\Ny\"\n").find("f.yaml: line 2: a scalar holds byte 0x85"),
            std::string::npos);
  EXPECT_NE(refusal("a: 1\nb: \x85\n").find("f.yaml: line 2: byte 0x85 is not UTF-8"),
            std::string::npos);
  EXPECT_NE(refusal("? [a, b]\n: 1\n").find("line 1: a map key must be a plain scalar"),
            std::string::npos);
}

TEST(InputLimits, AnchorsAndAliasesOfOrdinaryFilesStillLoad) {
  const YAML::Node n = load_yaml_limited("x: &x {a: 1, b: [2, 3]}\ny: *x\nz: *x\n", "f.yaml");
  EXPECT_EQ(n["z"]["b"][1].as<int>(), 3);
}

}  // namespace
}  // namespace pw
