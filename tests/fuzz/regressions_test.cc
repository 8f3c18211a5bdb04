// Replays every reproducer kept under tests/fuzz/regressions/<target>/: inputs that once crashed,
// hung, blew up memory or gave the wrong exit in a reader (found by the fuzzers or by hand). Each
// must now be accepted or refused with a one-line ConfigError; a file whose name starts with
// "refused-" must be refused. A new crash found by a fuzzer goes there with a name that says what
// it did, beside the fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "tests/fuzz/fuzz_targets.h"

namespace pw::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kRegressions = fs::path(PW_SOURCE_DIR) / "tests" / "fuzz" / "regressions";

TEST(FuzzRegressions, EveryFolderNamesAFuzzTarget) {
  ASSERT_TRUE(fs::is_directory(kRegressions));
  for (const fs::directory_entry& e : fs::directory_iterator(kRegressions))
    EXPECT_NE(find_fuzz_target(e.path().filename().string()), nullptr)
        << e.path() << " is not a fuzz target's name";
}

TEST(FuzzRegressions, EveryReproducerIsAcceptedOrRefusedInOneLine) {
  int replayed = 0;
  for (const FuzzTarget& target : fuzz_targets()) {
    const fs::path dir = kRegressions / target.name;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const Verdict v = check_input(target, read_file(f.string()));
      EXPECT_FALSE(v.failure) << f << ": " << v.failure.value_or("");
      if (f.filename().string().rfind("refused-", 0) == 0)
        EXPECT_TRUE(v.refused) << f << " was accepted";
      ++replayed;
    }
  }
  // An empty replay (a folder moved, a path wrong) would prove nothing.
  EXPECT_GT(replayed, 0);
}

}  // namespace
}  // namespace pw::fuzz
