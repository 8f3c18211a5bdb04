#pragma once
/// Subcommand registration for the `pipewright` CLI. Each subcommand lives in its own
/// tools/cmd_<name>.cc, parses its flags, calls one library function and writes output.
/// Its callback stores the exit status in *status: 0 success, 2 bad input, 1 internal failure.
/// Bad input is reported by throwing pw::ConfigError; main() prints it and exits 2.
#include <CLI/CLI.hpp>

namespace pw::tools {

void register_simulate(CLI::App& app, int* status);
void register_estimate(CLI::App& app, int* status);
void register_plan(CLI::App& app, int* status);
void register_compare(CLI::App& app, int* status);
void register_validate(CLI::App& app, int* status);
void register_calibrate(CLI::App& app, int* status);
void register_execute(CLI::App& app, int* status);
void register_export(CLI::App& app, int* status);

}  // namespace pw::tools
