// libFuzzer entry point for the readers of fuzz_targets.h (built with -DPIPEWRIGHT_LIBFUZZER=ON,
// clang). The target is chosen by PW_FUZZ_TARGET=<name> in the environment, as the ctest
// `libfuzzer.<name>` sets it. An input must be accepted or refused with a one-line ConfigError;
// anything else aborts, which libFuzzer reports as a crash and saves as an artifact. A crash,
// a hang (-timeout) or a blow-up past -rss_limit_mb is reported by libFuzzer itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/fuzz_targets.h"

namespace {

const pw::fuzz::FuzzTarget* g_target = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* name = std::getenv("PW_FUZZ_TARGET");
  std::string known;
  for (const std::string& n : pw::fuzz::fuzz_target_names()) known += " " + n;
  if (name == nullptr || (g_target = pw::fuzz::find_fuzz_target(name)) == nullptr) {
    std::fprintf(stderr, "pw_libfuzzer: set PW_FUZZ_TARGET to one of:%s\n", known.c_str());
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const pw::fuzz::Verdict v = pw::fuzz::check_input(*g_target, input);
  if (v.failure) {
    std::fprintf(stderr, "pw_libfuzzer: %s\n", v.failure->c_str());
    std::abort();
  }
  return 0;
}
