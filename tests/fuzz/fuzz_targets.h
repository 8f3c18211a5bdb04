#pragma once
/// The input readers the fuzzers drive, one target per parser. The mutation fuzz test
/// (readers_fuzz_test.cc), the libFuzzer harness (libfuzzer/harness.cc) and the replay of every
/// reproducer kept under tests/fuzz/regressions/<target>/ (regressions_test.cc) all read this
/// one table, so a parser added here is fuzzed and replayed by all three.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pw::fuzz {

struct FuzzTarget {
  std::string name;                ///< folder name under regressions/ and the seed corpus
  std::vector<std::string> seeds;  ///< valid inputs of this kind; each must be accepted
  /// Reads one input the way the CLI does; refuses it by throwing ConfigError.
  std::function<void(const std::string&)> read;
};

/// The targets' names, in the order of fuzz_targets(); cheap (builds nothing), so tests can be
/// registered from it at start-up.
const std::vector<std::string>& fuzz_target_names();

/// Every target, in a fixed order; built on first use (reads bundled files under the source
/// tree, generates the plan, schedule and calibration seeds).
const std::vector<FuzzTarget>& fuzz_targets();

/// The target named `name`, or nullptr.
const FuzzTarget* find_fuzz_target(const std::string& name);

struct Verdict {
  bool refused = false;                ///< the reader threw a ConfigError
  std::optional<std::string> failure;  ///< set when the reader broke its contract
};

/// Runs `target.read` on `input`. The contract: the input is accepted, or refused with a
/// ConfigError whose message is one line. Anything else (a multi-line ConfigError, another
/// exception) is described in `failure`; a crash or hang is left for the sanitizers or the
/// fuzzer's timeout to report.
Verdict check_input(const FuzzTarget& target, const std::string& input);

}  // namespace pw::fuzz
