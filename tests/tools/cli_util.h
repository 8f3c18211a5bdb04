#pragma once
// Running the built `pipewright` as a user would, for the CLI tests: one helper for all of them.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace pw::testing {

/// The binary under test.
inline const std::string kTool = std::string(PW_BINARY_DIR) + "/tools/pipewright";

/// Runs `cmd` in a shell with stderr folded into stdout; appends the output to *out and returns
/// the exit status (128 when the command did not exit normally).
inline int sh(const std::string& cmd, std::string* out) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) *out += buf;
  const int st = pclose(pipe);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/// Occurrences of `needle` in `hay` (overlapping ones counted too).
inline std::size_t occurrences(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

}  // namespace pw::testing
