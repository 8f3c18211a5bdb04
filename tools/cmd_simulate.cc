// Placeholder for `pipewright simulate`; replaced by the issue that implements it.
#include <cstdio>

#include "tools/command.h"

namespace pw::tools {

void register_simulate(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand("simulate", "(not yet available)");
  sub->callback([status] {
    std::fprintf(stderr, "pipewright simulate: not yet available\n");
    *status = 1;
  });
}

}  // namespace pw::tools
