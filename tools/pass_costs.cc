#include "tools/pass_costs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace pw::tools {
namespace {

// A number of the whole text (from_chars: no locale, no leading blanks or '+').
bool whole_number(std::string_view text, double* out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(*out);
}

double value_of(const std::string& key, const std::string& text, bool durations) {
  if (!durations) {
    double v = 0;
    if (!whole_number(text, &v) || v < 0 || v > 1e9)
      throw ConfigError("", "--costs",
                        fmt::format("expected a non-negative number for {}, got '{}'", key, text));
    return v;
  }
  // NUMBER[UNIT]: the unit is the trailing letters.
  std::size_t split = text.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(text[split - 1]))) --split;
  const std::string unit = text.substr(split);
  double v = 0;
  if (!whole_number(std::string_view(text).substr(0, split), &v))
    throw ConfigError("", "--costs", fmt::format("{}: expected a duration, got '{}'", key, text));
  double ms = 1;
  if (unit == "ps")
    ms = 1e-9;
  else if (unit == "ns")
    ms = 1e-6;
  else if (unit == "us")
    ms = 1e-3;
  else if (unit == "s")
    ms = 1e3;
  else if (!unit.empty() && unit != "ms")
    throw ConfigError(
        "", "--costs",
        fmt::format("{}: unknown unit '{}' (expected ps, ns, us, ms or s)", key, unit));
  // At most 1000 s per pass: an iteration of up to millions of passes stays inside the 64-bit
  // picosecond clock (9.2e6 s).
  if (v < 0 || v * ms > 1e6)
    throw ConfigError("", "--costs",
                      fmt::format("{}: expected a duration in [0, 1000 s], got '{}'", key, text));
  return v * ms;
}

}  // namespace

PassCostSpec parse_pass_costs(const std::string& text, const PassCostSyntax& syntax) {
  PassCostSpec c;
  std::vector<std::string> keys = {"F", "B", "W", "R", "comm"};
  if (syntax.mw) keys.push_back("mw");
  std::string item;
  for (const char ch : text + ",") {
    if (ch != ',') {
      if (!std::isspace(static_cast<unsigned char>(ch))) item += ch;
      continue;
    }
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw ConfigError(
          "", "--costs",
          fmt::format("expected KEY=VALUE items (keys {}), got '{}'", fmt::join(keys, ", "), item));
    std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    if (key == "f" || key == "b" || key == "w" || key == "r")
      key = static_cast<char>(std::toupper(static_cast<unsigned char>(key[0])));
    if (key == "mw" && syntax.mw) {
      double v = -1;
      if (!whole_number(value, &v) || !(v >= 0 && v <= 1))
        throw ConfigError("", "--costs",
                          fmt::format("mw: expected a share in [0, 1], got '{}'", value));
      c.mw = v;
    } else if (key == "F") {
      c.f = value_of(key, value, syntax.durations);
    } else if (key == "B") {
      c.b = value_of(key, value, syntax.durations);
    } else if (key == "W") {
      c.w = value_of(key, value, syntax.durations);
    } else if (key == "R") {
      c.r = value_of(key, value, syntax.durations);
    } else if (key == "comm") {
      c.comm = value_of(key, value, syntax.durations);
    } else {
      throw ConfigError("", "--costs",
                        fmt::format("unknown key '{}' (did you mean '{}'?); valid: {}", key,
                                    nearest_name(key, keys), fmt::join(keys, ", ")));
    }
    item.clear();
  }
  return c;
}

}  // namespace pw::tools
