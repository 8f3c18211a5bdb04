// Placeholder for `pipewright validate`; replaced by the issue that implements it.
#include <cstdio>

#include "tools/command.h"

namespace pw::tools {

void register_validate(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand("validate", "(not yet available)");
  sub->callback([status] {
    std::fprintf(stderr, "pipewright validate: not yet available\n");
    *status = 1;
  });
}

}  // namespace pw::tools
