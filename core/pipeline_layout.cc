#include "core/pipeline_layout.h"

#include <fmt/format.h>

#include <cctype>

namespace pw {
namespace {

constexpr std::size_t kMaxLetters = 1'000'000;

// Reads the repeat count after a '*' at text[*i] (digits), advancing *i past them.
bool read_count(std::string_view text, std::size_t* i, long long* n, std::string* problem) {
  if (*i >= text.size() || text[*i] != '*') {
    *problem =
        fmt::format("a group '(...)' at character {} has no repeat count; expected '*n'", *i + 1);
    return false;
  }
  ++*i;
  const std::size_t begin = *i;
  *n = 0;
  while (*i < text.size() && std::isdigit(static_cast<unsigned char>(text[*i])) && *n <= 1'000'000)
    *n = *n * 10 + (text[(*i)++] - '0');
  if (*i == begin || *n < 1) {
    *problem = fmt::format("repeat count at character {} is missing or 0; expected an integer >= 1",
                           begin + 1);
    return false;
  }
  return true;
}

// Appends `s` repeated `n` times to `out`, within the unrolled size limit.
bool repeat(std::string_view s, long long n, std::string* out, std::string* problem) {
  if (static_cast<double>(s.size()) * static_cast<double>(n) + out->size() > kMaxLetters) {
    *problem = fmt::format("unrolls to more than {} characters; expected a layout of a model",
                           kMaxLetters);
    return false;
  }
  for (long long k = 0; k < n; ++k) out->append(s);
  return true;
}

}  // namespace

bool parse_pipeline_layout(std::string_view text, std::vector<std::string>* stages,
                           std::string* problem) {
  // As Megatron: commas dropped, then every "(X)*n" unrolled, then every "x*n".
  std::string plain;
  for (char ch : text)
    if (ch != ',') plain.push_back(ch);
  std::string groups;
  for (std::size_t i = 0; i < plain.size();) {
    if (plain[i] != '(') {
      groups.push_back(plain[i++]);
      continue;
    }
    const std::size_t close = plain.find(')', i + 1);
    if (close == std::string::npos || plain.find('(', i + 1) < close || close == i + 1) {
      *problem =
          fmt::format("unbalanced or empty group at character {}; expected '(...)*n'", i + 1);
      return false;
    }
    std::size_t after = close + 1;
    long long n = 0;
    if (!read_count(plain, &after, &n, problem)) return false;
    if (!repeat(std::string_view(plain).substr(i + 1, close - i - 1), n, &groups, problem))
      return false;
    i = after;
  }
  std::string letters;
  for (std::size_t i = 0; i < groups.size();) {
    if (i + 1 < groups.size() && groups[i + 1] == '*') {
      std::size_t after = i + 1;
      long long n = 0;
      if (!read_count(groups, &after, &n, problem)) return false;
      if (!repeat(std::string_view(groups).substr(i, 1), n, &letters, problem)) return false;
      i = after;
    } else {
      letters.push_back(groups[i++]);
    }
  }
  stages->assign(1, std::string());
  for (std::size_t i = 0; i < letters.size(); ++i) {
    const char ch = letters[i];
    if (ch == '|') {
      stages->emplace_back();
    } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L') {
      stages->back().push_back(ch);
    } else {
      *problem = fmt::format(
          "'{}' is not a layer letter; expected E (embedding), t (transformer layer), m "
          "(multi-token prediction layer), L (loss), '|' between stages, '(...)*n' or 'x*n'",
          std::string(1, ch));
      return false;
    }
  }
  return true;
}

std::string pipeline_layout_string(const std::vector<int>& layers, int mtp_layers,
                                   bool mtp_standalone) {
  const int S = static_cast<int>(layers.size());
  const int mtp_stage = mtp_standalone && S >= 2 ? S - 2 : S - 1;
  auto stage = [&](int i) {
    std::string s = i == 0 ? "E" : "";
    if (layers[i] == 1) s += "t";
    if (layers[i] > 1) s += fmt::format("t*{}", layers[i]);
    if (i == mtp_stage) {
      if (mtp_layers == 1) s += "m";
      if (mtp_layers > 1) s += fmt::format("m*{}", mtp_layers);
    }
    if (i == S - 1) s += "L";
    return s;
  };
  std::string out;
  for (int i = 0; i < S - 1;) {
    int run = 1;
    while (i > 0 && layers[i] > 0 && i + run < mtp_stage && layers[i + run] == layers[i]) ++run;
    if (run > 1)
      out += fmt::format("({}|)*{},", stage(i), run);
    else
      out += stage(i) + "|";
    i += run;
  }
  return out + stage(S - 1);
}

}  // namespace pw
