// Shared by the framework export tests: plans of a generator's order, and readers of what the
// exporters write (Megatron's argument list, torchtitan's TOML, a refusal's key and message).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/lowering.h"
#include "hwmodels/model_presets.h"
#include "planner/schedules/generator.h"
#include "planner/search/frameworks.h"

namespace pw::testing {

// A plan of `schedule` at (t, cp, p, d) with `layers` per stage (global stage order).
inline Plan make_plan(const std::string& preset, const std::string& schedule, int t, int cp, int p,
                      int d, int v, const std::vector<int>& layers, int m = 8, int group = 0) {
  Plan plan;
  plan.model = hw::find_model_preset(preset)->shape;
  plan.flash_attention = true;
  plan.cluster = "dgx-h100";
  ParallelConfig& pc = plan.config;
  pc.tensor_parallel = t;
  pc.context_parallel = cp;
  pc.pipeline_parallel = p;
  pc.data_parallel = d;
  pc.virtual_stages = v;
  pc.micro_batch_size = 1;
  pc.global_batch_size = m * d;
  pc.sequence_parallel = t > 1;
  pc.schedule = schedule;
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  gp.v = v > 1 ? v : 0;
  gp.group_size = group;
  gp.num_layers = plan.model.num_layers;
  Schedule s = generate_schedule(default_registry(), schedule, gp);
  EXPECT_EQ(s.placement.stages.size(), layers.size());
  int at = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    s.placement.stages[i].layer_begin = at;
    at += layers[i];
    s.placement.stages[i].layer_end = at;
  }
  EXPECT_EQ(at, plan.model.num_layers);
  plan.schedule = complete_for_execution(s, cp * d);
  return plan;
}

// Megatron's argument list as flag -> value ("" for a switch); comments and blank lines skipped.
inline std::map<std::string, std::string> parse_args(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line.rfind("--", 0), 0u) << line;
    const std::size_t sp = line.find(' ');
    const std::string flag = line.substr(0, sp);
    EXPECT_EQ(out.count(flag), 0u) << flag << " given twice";
    out[flag] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  return out;
}

// TOML `key = value` lines (values as written) under their "[section]".
inline std::map<std::string, std::string> parse_toml(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ' ' || line[0] == ']') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const std::size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    out[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

inline std::string refusal_key(const Plan& plan, Framework fw) {
  try {
    export_plan(plan, fw, "plan.yaml", "plan.csv");
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "plan.yaml");
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.key() + " | " + e.message();
  }
  return "";
}

// The schedule's compute actions alone (F, B, W, full backward, overlapped pair): what a
// compute_only CSV holds.
inline Schedule compute_only(Schedule s) {
  for (auto& dev : s.actions)
    dev.erase(std::remove_if(dev.begin(), dev.end(),
                             [](const Action& a) {
                               return a.kind != ActionKind::kF && a.kind != ActionKind::kB &&
                                      a.kind != ActionKind::kW && a.kind != ActionKind::kBW &&
                                      a.kind != ActionKind::kOverlapFB;
                             }),
              dev.end());
  return s;
}

}  // namespace pw::testing
