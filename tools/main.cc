// The pipewright CLI: a thin main over the libraries.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/heap.h"
#include "tools/command.h"

namespace {

// Size of the MPI job this process was started in (Open MPI's and PMI launchers' variables),
// with the variable that says so; 1 outside a job or where the value is not a count.
std::pair<int, const char*> mpi_job_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v == nullptr) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n > 1) return {static_cast<int>(n), var};
  }
  return {1, nullptr};
}

// Whether the command runs as one rank of an MPI job: `execute`, and calibration's own MPI
// benchmark workers (`calibrate --mpi-worker`, launched by `calibrate`).
bool runs_as_mpi_job(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view cmd = argv[1];
  if (cmd == "execute") return true;
  if (cmd != "calibrate") return false;
  for (int i = 2; i < argc; ++i)
    if (std::string_view(argv[i]).starts_with("--mpi-worker")) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  pw::keep_freed_heap_top();  // before any allocation of note (core/heap.h)
  // Every other command runs in one process: started K times by mpirun it would run K times,
  // print K reports and write its files K times over each other. Refused before anything runs.
  if (const auto [size, var] = mpi_job_size(); size > 1 && !runs_as_mpi_job(argc, argv)) {
    const std::string cmd = argc > 1 ? argv[1] : "pipewright";
    const char* why = cmd == "simulate"
                          ? " (`--all-ranks` does not spread over processes: docs/simulator.md)"
                          : "";
    std::fprintf(stderr,
                 "pipewright: error: %s was started as one of %d MPI processes (%s=%d); only "
                 "`execute` runs as an MPI job, %s runs in one process%s: start it without "
                 "mpirun\n",
                 cmd.c_str(), size, var, size, cmd.c_str(), why);
    return 2;
  }
  CLI::App app{
      "pipewright: plan, simulate and execute data/tensor/pipeline-parallel training schedules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipewright 0.1.0");
  int status = 0;
  pw::tools::register_simulate(app, &status);
  pw::tools::register_estimate(app, &status);
  pw::tools::register_plan(app, &status);
  pw::tools::register_compare(app, &status);
  pw::tools::register_validate(app, &status);
  pw::tools::register_calibrate(app, &status);
  pw::tools::register_execute(app, &status);
  pw::tools::register_export(app, &status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, as every other bad input: the command, what CLI11 found, where help is.
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-') {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({}))
        names += (names.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(stderr, "pipewright: error: '%s': unknown command; expected one of %s\n",
                   argv[1], names.c_str());
      return 2;
    }
    std::string command = "pipewright";
    for (const CLI::App* sub : app.get_subcommands()) command += " " + sub->get_name();
    std::fprintf(stderr, "pipewright: error: %s (see `%s --help`)\n", e.what(), command.c_str());
    return 2;
  } catch (const pw::ConfigError& e) {
    std::fprintf(stderr, "pipewright: error: %s\n", e.what());
    return 2;
  } catch (const YAML::Exception& e) {
    // A YAML shape a reader did not anticipate (a scalar where a map was expected, ...): the
    // input's fault, with the parser's line and column.
    std::fprintf(stderr, "pipewright: error: malformed YAML input: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipewright: internal error: %s\n", e.what());
    return 1;
  }
  return status;
}
