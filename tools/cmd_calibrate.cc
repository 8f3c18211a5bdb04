// Placeholder for `pipewright calibrate`; replaced by the issue that implements it.
#include <cstdio>

#include "tools/command.h"

namespace pw::tools {

void register_calibrate(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand("calibrate", "(not yet available)");
  sub->callback([status] {
    std::fprintf(stderr, "pipewright calibrate: not yet available\n");
    *status = 1;
  });
}

}  // namespace pw::tools
