#include "planner/schedules/generator.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/validator.h"

namespace pw {

void GeneratorRegistry::add(GeneratorInfo info) { infos_.push_back(std::move(info)); }

const GeneratorInfo* GeneratorRegistry::find(const std::string& name) const {
  for (const GeneratorInfo& g : infos_)
    if (g.name == name) return &g;
  return nullptr;
}

const GeneratorInfo& GeneratorRegistry::get(const std::string& name, const std::string& key) const {
  if (const GeneratorInfo* g = find(name)) return *g;
  std::vector<std::string> all = names();
  throw ConfigError("", key,
                    fmt::format("unknown schedule '{}' (did you mean '{}'?); valid: {}", name,
                                nearest_name(name, all), fmt::join(all, ", ")));
}

std::vector<std::string> GeneratorRegistry::names() const {
  std::vector<std::string> out;
  for (const GeneratorInfo& g : infos_) out.push_back(g.name);
  return out;
}

GeneratorRegistry default_registry() {
  GeneratorRegistry r;
  register_classic_generators(r);
  register_memory_generators(r);
  return r;
}

Schedule generate_unvalidated(const GeneratorRegistry& registry, const std::string& name,
                              const GeneratorParams& params) {
  const GeneratorInfo& g = registry.get(name);
  if (params.p <= 0) throw ConfigError("", "--pp", "expected a positive pipeline size");
  if (params.m <= 0) throw ConfigError("", "--microbatches", "expected a positive count");
  // Per-device limits name every device or none (the generators read them by device).
  if (!params.memory_caps.empty() && static_cast<int>(params.memory_caps.size()) != params.p)
    throw ConfigError("", "memory_caps",
                      fmt::format("{} per-device limits for {} devices; expected one per device",
                                  params.memory_caps.size(), params.p));
  return g.generate(params);
}

std::string generation_source(const std::string& name) { return "generated " + name + " schedule"; }

Schedule generate_schedule(const GeneratorRegistry& registry, const std::string& name,
                           const GeneratorParams& params) {
  Schedule s = generate_unvalidated(registry, name, params);
  validate_schedule(s, generation_source(name));
  return s;
}

}  // namespace pw
