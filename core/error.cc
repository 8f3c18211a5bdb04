#include "core/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace pw {
namespace {

// Control characters (a newline inside a mutated key, a NUL) are written as escapes, so an error
// is always one line whatever the input held.
std::string one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f)
      out += "\\x" + std::string(1, "0123456789abcdef"[u >> 4]) + "0123456789abcdef"[u & 15];
    else
      out += c;
  }
  return out;
}

std::string join_what(const std::string& file, const std::string& key, const std::string& msg) {
  std::string out;
  if (!file.empty()) out += file + ": ";
  if (!key.empty()) out += key + ": ";
  return one_line(out + msg);
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

template <typename Range>
std::string nearest_in(const std::string& name, const Range& valid) {
  std::string best;
  std::size_t best_d = static_cast<std::size_t>(-1);
  for (const auto& v : valid) {
    std::size_t d = edit_distance(name, v);
    if (d < best_d) {
      best_d = d;
      best = v;
    }
  }
  return best;
}

}  // namespace

ConfigError::ConfigError(std::string file, std::string key, std::string message)
    : std::runtime_error(join_what(file, key, message)),
      file_(std::move(file)),
      key_(std::move(key)),
      message_(std::move(message)) {}

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "pipewright: internal invariant failed at %s:%d: %s: %s\n", file, line, expr,
               msg.c_str());
  std::abort();
}

std::string nearest_name(const std::string& name, const std::initializer_list<std::string>& valid) {
  return nearest_in(name, valid);
}
std::string nearest_name(const std::string& name, const std::vector<std::string>& valid) {
  return nearest_in(name, valid);
}

}  // namespace pw
