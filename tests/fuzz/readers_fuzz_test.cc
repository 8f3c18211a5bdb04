// Mutation fuzzing of every input reader pipewright has (the targets of fuzz_targets.h):
// scenarios, profiles, Hugging Face config.json, plans and measured runs (YAML and JSON, then
// lined up by `compare`), schedule documents, PyTorch CSV, profiler traces, nccl-tests logs,
// calibration raw files and `--costs`. Each input gets one to four mutations of a seed (bytes
// flipped, spans dropped or repeated, truncation, and tokens that broke readers before: 1e999,
// integers past 64 bits, YAML aliases and alias bombs, map keys that are sequences, deep nesting,
// invalid UTF-8). A reader must accept the input or refuse it with a ConfigError whose message is
// one line; any other exception fails the test, a crash or hang fails the run. Deterministic:
// fixed seeds. (The libFuzzer harness drives the same targets with coverage guidance.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"

namespace pw::fuzz {
namespace {

const std::vector<std::string> kTokens = {
    "1e999",
    "-1e999",
    "-1",
    "0",
    "99999999999999999999999",
    "9223372036854775807",
    "2147483648",
    "nan",
    ".inf",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    "\n",
    "\"",
    "&a ",
    "*a",
    "*b",
    "? [x, y]\n: 1\n",
    "~",
    "null",
    "true",
    "- ",
    "\t",
    "\xff\xfe",
    "\xc3\x28",
    std::string(1, '\0'),
    "a: &a [1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b]\n",
    std::string(300, '[') + std::string(300, ']'),
    std::string(300, '{'),
};

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int count = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < count; ++i) {
    const std::size_t at = pick(s.size() + 1);
    switch (rng() % 6) {
      case 0:  // flip one byte to a printable or control character
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng() % 128);
        break;
      case 1:  // drop a span
        s.erase(at, 1 + pick(16));
        break;
      case 2:  // repeat a span
        s.insert(at, s.substr(pick(s.size()), 1 + pick(32)));
        break;
      case 3:  // truncate
        s.resize(at);
        break;
      default:  // insert a token that broke readers before
        s.insert(at, kTokens[pick(kTokens.size())]);
        break;
    }
  }
  return s;
}

// 400 inputs per seed in the test command; PW_FUZZ_INPUTS=N runs N (deeper runs by hand).
const int kInputsPerSeed = [] {
  const char* e = std::getenv("PW_FUZZ_INPUTS");
  return e != nullptr && std::atoi(e) > 0 ? std::atoi(e) : 400;
}();

class ReadersFuzz : public ::testing::TestWithParam<std::string> {};

TEST_P(ReadersFuzz, MutatedInputsAreAcceptedOrRefusedInOneLine) {
  const FuzzTarget* target = find_fuzz_target(GetParam());
  ASSERT_NE(target, nullptr);
  int refused = 0;
  std::uint64_t salt = 1000 * static_cast<std::uint64_t>(target - fuzz_targets().data());
  for (const std::string& seed : target->seeds) {
    // The seed itself must be accepted (the harness tests mutations of a valid file).
    const Verdict sv = check_input(*target, seed);
    EXPECT_FALSE(sv.refused || sv.failure) << target->name << ": the unmutated seed is refused";
    std::mt19937_64 rng(0x9e3779b97f4a7c15ULL ^ salt++);
    for (int i = 0; i < kInputsPerSeed; ++i) {
      const std::string input = mutate(seed, rng);
      const Verdict v = check_input(*target, input);
      refused += v.refused;
      if (v.failure)
        ADD_FAILURE() << "#" << i << " " << *v.failure << "\ninput:\n" << input.substr(0, 600);
    }
  }
  // A fuzzer whose mutations are all accepted is not reaching the reader's checks.
  EXPECT_GT(refused, 0) << target->name;
}

INSTANTIATE_TEST_SUITE_P(Targets, ReadersFuzz, ::testing::ValuesIn(fuzz_target_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace pw::fuzz
