#include "core/validator.h"

#include "core/dependency.h"
#include "core/error.h"

namespace pw {

void validate_schedule(const Schedule& schedule, const std::string& source) {
  (void)build_dependency_graph(schedule, source);
}

void validate_schedule(const Schedule& schedule, const std::string& source,
                       const ActionLocator& locate) {
  (void)build_dependency_graph(schedule, source, locate);
}

std::string check_schedule(const Schedule& schedule) {
  try {
    validate_schedule(schedule);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace pw
