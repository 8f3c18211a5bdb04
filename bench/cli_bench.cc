// The cost of one small command, as a user pays it: the whole `pipewright` process (start-up,
// library loading, parsing, work, exit). Target (issue "hardened inputs"): a `simulate` of a
// p=8 schedule under 30 ms wall and 20 MiB peak resident memory; the CUDA plugin is not loaded.
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <string>
#include <vector>

extern char** environ;

namespace {

void BM_SimulateSmallSchedule(benchmark::State& state) {
  const std::string tool = std::string(PW_BINARY_DIR) + "/tools/pipewright";
  std::vector<std::string> args = {tool,   "simulate", "--schedule",     "1f1b",
                                   "--pp", "8",        "--microbatches", "16"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 0x1 /* O_WRONLY */, 0);
  long max_rss_kb = 0;
  for (auto _ : state) {
    pid_t pid = 0;
    if (posix_spawn(&pid, tool.c_str(), &fa, nullptr, argv.data(), environ) != 0) {
      state.SkipWithError("cannot start pipewright");
      break;
    }
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      state.SkipWithError("pipewright simulate failed");
      break;
    }
    max_rss_kb = std::max(max_rss_kb, ru.ru_maxrss);
  }
  posix_spawn_file_actions_destroy(&fa);
  state.counters["peak_rss_MiB"] = static_cast<double>(max_rss_kb) / 1024.0;
}
BENCHMARK(BM_SimulateSmallSchedule)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
