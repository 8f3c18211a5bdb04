#pragma once
/// Error tiers (see shared/STYLE.md): ConfigError for bad input (caught once in main, exit 2),
/// PW_ASSERT for broken invariants (always active), InternalError for failures that are not
/// the user's fault (exit 1).
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace pw {

/// Bad input: a file, the key path inside it (or the CLI argument), and what was expected.
/// what() reads "FILE: KEY: MESSAGE" with empty parts left out.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, std::string key, std::string message);
  explicit ConfigError(std::string message) : ConfigError("", "", std::move(message)) {}
  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  std::string key_;
  std::string message_;
};

/// A failure that is not the user's fault (exit status 1).
class InternalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);

/// Returns the valid name closest to `name` by edit distance (empty if `valid` is empty).
std::string nearest_name(const std::string& name, const std::initializer_list<std::string>& valid);
std::string nearest_name(const std::string& name, const std::vector<std::string>& valid);

}  // namespace pw

/// Invariant check, active in every build type. `msg` is a std::string expression.
#define PW_ASSERT(cond, msg)                                          \
  do {                                                                \
    if (!(cond)) ::pw::assert_fail(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
