// Placeholder for `pipewright estimate`; replaced by the issue that implements it.
#include <cstdio>

#include "tools/command.h"

namespace pw::tools {

void register_estimate(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand("estimate", "(not yet available)");
  sub->callback([status] {
    std::fprintf(stderr, "pipewright estimate: not yet available\n");
    *status = 1;
  });
}

}  // namespace pw::tools
