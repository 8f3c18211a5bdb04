// Writes every fuzz target's seeds into DIR/<target>/seed-<k> (the libFuzzer seed corpus) and
// checks that the targets named on the command line (the build's list, tests/fuzz/CMakeLists.txt)
// are exactly the table's: a target added to one and not the other fails here, not silently.
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "tests/fuzz/fuzz_targets.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: pw_fuzz_seeds DIR TARGET...\n");
    return 2;
  }
  const std::vector<std::string> listed(argv + 2, argv + argc);
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
  }
  fmt::print("{} targets' seeds written to {}\n", pw::fuzz::fuzz_targets().size(), argv[1]);
  return 0;
}
