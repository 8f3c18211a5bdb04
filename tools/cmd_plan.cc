// Placeholder for `pipewright plan`; replaced by the issue that implements it.
#include <cstdio>

#include "tools/command.h"

namespace pw::tools {

void register_plan(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand("plan", "(not yet available)");
  sub->callback([status] {
    std::fprintf(stderr, "pipewright plan: not yet available\n");
    *status = 1;
  });
}

}  // namespace pw::tools
