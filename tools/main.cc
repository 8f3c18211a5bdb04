// The pipewright CLI: a thin main over the libraries.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <exception>
#include <string>

#include "core/error.h"
#include "core/heap.h"
#include "tools/command.h"

int main(int argc, char** argv) {
  pw::keep_freed_heap_top();  // before any allocation of note (core/heap.h)
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
