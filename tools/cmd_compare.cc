// Placeholder for `pipewright compare`; replaced by the issue that implements it.
#include <cstdio>

#include "tools/command.h"

namespace pw::tools {

void register_compare(CLI::App& app, int* status) {
  auto* sub = app.add_subcommand("compare", "(not yet available)");
  sub->callback([status] {
    std::fprintf(stderr, "pipewright compare: not yet available\n");
    *status = 1;
  });
}

}  // namespace pw::tools
