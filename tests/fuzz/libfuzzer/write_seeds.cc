// Writes every fuzz target's seeds into SEEDS/<target>/seed-<k> (the libFuzzer seed corpus),
// empties CORPUS/<target> (the folder ctest's libFuzzer runs add to, so every run starts from the
// same inputs: "-" leaves it alone), and checks that the targets named on
// the command line (the build's list, tests/fuzz/CMakeLists.txt) are exactly the table's: a
// target added to one and not the other fails here, not silently.
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "tests/fuzz/fuzz_targets.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: pw_fuzz_seeds SEEDS CORPUS|- TARGET...\n");
    return 2;
  }
  const std::string corpus = argv[2];
  const std::vector<std::string> listed(argv + 3, argv + argc);
  if (listed != pw::fuzz::fuzz_target_names()) {
    fmt::print(stderr, "pw_fuzz_seeds: the build lists [{}], the table has [{}]\n",
               fmt::join(listed, " "), fmt::join(pw::fuzz::fuzz_target_names(), " "));
    return 1;
  }
  for (const pw::fuzz::FuzzTarget& t : pw::fuzz::fuzz_targets()) {
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / t.name;
    std::filesystem::create_directories(dir);
    for (std::size_t k = 0; k < t.seeds.size(); ++k)
      pw::write_file_atomic((dir / fmt::format("seed-{}", k)).string(), t.seeds[k]);
    if (corpus != "-") {
      const std::filesystem::path work = std::filesystem::path(corpus) / t.name;
      std::filesystem::remove_all(work);
      std::filesystem::create_directories(work);
    }
  }
  fmt::print("{} targets' seeds written to {}\n", pw::fuzz::fuzz_targets().size(), argv[1]);
  return 0;
}
