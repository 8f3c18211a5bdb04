#pragma once
/// The constraint flags as messages name them (`--tp 2,4`, `--fp8 both`): shared by the search
/// space's checks (search_space.cc) and the framework constraint (framework_space.cc).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace pw::detail {

inline std::string join(const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, ",")); }

inline std::string join(const std::vector<std::string>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}

inline std::string int_flag(const char* name, const std::vector<int>& v) {
  return v.empty() ? std::string() : fmt::format("{} {}", name, join(v));
}

inline std::string on_off_flag(const char* name, const std::vector<int>& v) {
  if (v.empty()) return {};
  return fmt::format("{} {}", name, v.size() > 1 ? "both" : v[0] ? "on" : "off");
}

// The non-empty parts, space separated: the flags a message names.
inline std::string flags(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts)
    if (!p.empty()) out += (out.empty() ? "" : " ") + p;
  return out;
}

}  // namespace pw::detail
