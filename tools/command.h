#pragma once
/// Subcommand registration for the `pipewright` CLI. Each subcommand lives in its own
/// tools/cmd_<name>.cc, parses its flags, calls one library function and writes output.
/// Its callback stores the exit status in *status: 0 success, 2 bad input, 1 internal failure.
/// Bad input is reported by throwing pw::ConfigError; main() prints it and exits 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>

#include "core/error.h"

namespace pw::tools {

/// A flag whose value when left out is 0: given as 0 (or NaN, or infinite) it would silently
/// mean what leaving it out means (`unset`), so it is refused naming the flag.
inline void require_positive_if_given(const CLI::App& app, const char* flag, double value,
                                      const char* unset) {
  if (app.count(flag) > 0 && !(value > 0 && std::isfinite(value)))
    throw ConfigError("", flag,
                      fmt::format("expected a finite value above 0, got {} (leave the flag out "
                                  "for {})",
                                  value, unset));
}

void register_simulate(CLI::App& app, int* status);
void register_estimate(CLI::App& app, int* status);
void register_plan(CLI::App& app, int* status);
void register_compare(CLI::App& app, int* status);
void register_validate(CLI::App& app, int* status);
void register_calibrate(CLI::App& app, int* status);
void register_execute(CLI::App& app, int* status);
void register_export(CLI::App& app, int* status);

}  // namespace pw::tools
