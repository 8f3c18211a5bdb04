// Registration of the memory-controllable and zero-bubble schedules (filled in by that work).
#include "planner/generator.h"

namespace pw {

void register_memory_generators(GeneratorRegistry&) {}

}  // namespace pw
