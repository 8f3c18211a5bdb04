#pragma once
// Runs `pipewright plan` (and the other commands, as JSON) as a user would: the helpers of the
// plan CLI's tests (plan_cli_test.cc, plan_constraints_test.cc).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file_io.h"

namespace pw::testing {

/// A fresh folder under the system's temporary one, named by `prefix` and this process, removed
/// with everything in it when the test ends (an ASSERT's early return included).
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix)
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

inline std::string pipewright() { return std::string(PW_BINARY_DIR) + "/tools/pipewright"; }

// `pipewright ARGS --format json`, run to success, its output parsed (written under `dir`).
inline nlohmann::json json_of(const std::filesystem::path& dir, const std::string& args) {
  const std::string out = (dir / "out.json").string();
  const std::string cmd = pipewright() + " " + args + " --format json > " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return nlohmann::json::parse(read_file(out));
}

struct PlanRun {
  int rc = -1;
  std::string out, err;
};

// Runs `pipewright plan ARGS`, capturing stdout and stderr.
inline PlanRun plan(const std::string& args) {
  static int n = 0;  // one pair of capture files per call
  const auto base = std::filesystem::temp_directory_path() /
                    ("pw_plan_cons_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  const std::string out = base.string() + ".out", err = base.string() + ".err";
  const int rc = std::system((pipewright() + " plan " + args + " > " + out + " 2> " + err).c_str());
  PlanRun r;
  r.rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// `pipewright plan ARGS --format json`, run to success, its output parsed.
inline nlohmann::json plan_json(const std::string& args) {
  const PlanRun r = plan(args + " --format json");
  EXPECT_EQ(r.rc, 0) << args << ": " << r.err;
  return nlohmann::json::parse(r.out);
}

inline std::string scenario(const std::string& name) {
  return std::string(PW_SOURCE_DIR) + "/scenarios/" + name;
}

inline bool one_of(const std::vector<int>& allowed, int x) {
  return std::find(allowed.begin(), allowed.end(), x) != allowed.end();
}

}  // namespace pw::testing
