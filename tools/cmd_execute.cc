// Placeholder for `pipewright execute`; replaced by the issue that implements it.
#include <cstdio>

#include "tools/command.h"

namespace pw::tools {

void register_execute(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand("execute", "(not yet available)");
  sub->callback([status] {
    std::fprintf(stderr, "pipewright execute: not yet available\n");
    *status = 1;
  });
}

}  // namespace pw::tools
