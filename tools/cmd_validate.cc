// `pipewright validate [DIR]`: simulate every scenario that names a configuration (the bundled ones
// by default), grouped by their `group:` key; print predicted vs published TFLOP/s per GPU and the
// error where a published figure is given (the prediction alone elsewhere), then each group's and
// the whole set's mean and worst absolute error.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "hwmodels/profile.h"
#include "hwmodels/scenario.h"
#include "sim/iteration.h"
#include "tools/command.h"
#include "tools/simulate_scenario.h"

namespace pw::tools {
namespace {

struct ValidateOptions {
  std::string dir;  ///< empty: the bundled scenarios (hw::shipped_scenario_dir)
  std::string format = "table";
};

struct Row {
  std::string file;  ///< as displayed
  hw::Scenario scenario;
  IterationResult result;
  double error_pct = 0;  ///< when the scenario has published figures
};

struct Group {
  std::string name;
  std::vector<const Row*> rows;
  int published = 0;           ///< rows with published figures
  double mean = 0, worst = 0;  ///< |error| over those rows, percent
};

constexpr const char* kNoGroup = "other";

std::vector<std::string> scenario_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    if (!fs::is_regular_file(dir, ec))
      throw ConfigError("", "DIR", fmt::format("'{}' is not a scenario file or a directory", dir));
  std::vector<std::string> files;
  if (fs::is_regular_file(dir, ec)) return {dir};
  // Unreadable subfolders are skipped; an error while walking stops the walk (the range-for's
  // increment would throw), and so does one naming the folder itself.
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw ConfigError(dir, "", "cannot list the folder: " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw ConfigError(dir, "", "cannot list the folder: " + ec.message());
    std::error_code entry_ec;  // an entry that vanished or cannot be stat'ed is not a scenario
    if (it->is_regular_file(entry_ec) && it->path().extension() == ".yaml")
      files.push_back(it->path().string());
  }
  if (ec) throw ConfigError(dir, "", "cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// Mean and worst |error| of rows with published figures.
void summarise(Group& g) {
  double sum = 0;
  for (const Row* r : g.rows) {
    if (!r->scenario.published) continue;
    ++g.published;
    sum += std::abs(r->error_pct);
    g.worst = std::max(g.worst, std::abs(r->error_pct));
  }
  g.mean = g.published > 0 ? sum / g.published : 0;
}

std::string summary_line(const Group& g, const char* what) {
  if (g.published == 0)
    return fmt::format("{}: {} {}, none with published figures\n", g.name, g.rows.size(), what);
  return fmt::format("{}: {} {}, {} with published figures: mean |error| {:.2f}%, worst {:.2f}%\n",
                     g.name, g.rows.size(), what, g.published, g.mean, g.worst);
}

nlohmann::ordered_json row_json(const Row& r) {
  nlohmann::ordered_json j{{"scenario", r.file},
                           {"group", r.scenario.group.empty() ? kNoGroup : r.scenario.group},
                           {"gpus", r.scenario.num_gpus()},
                           {"predicted_tflops_per_gpu", r.result.tflops_per_gpu},
                           {"iteration_ms", ps_to_millis(r.result.iteration)},
                           {"fits", r.result.fits}};
  if (const auto& pub = r.scenario.published) {
    j["published_tflops_per_gpu"] = pub->tflops_per_gpu;
    j["published_iteration_s"] = pub->iteration_time_s;
    j["published_tokens_per_s_per_gpu"] = pub->tokens_per_s_per_gpu;
    j["error_pct"] = r.error_pct;
    j["source"] = pub->source;
  } else {
    j["error_pct"] = nullptr;  // a prediction alone
  }
  return j;
}

int run_validate(const ValidateOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw ConfigError("", "--format", fmt::format("'{}'; expected table or json", o.format));
  // The bundled scenarios by default, from any directory; they are shown as scenarios/...
  const bool bundled = o.dir.empty();
  const std::string dir = bundled ? hw::shipped_scenario_dir() : o.dir;
  std::vector<Row> rows;
  std::vector<std::string> unconfigured;  // planner inputs: no configuration to predict
  for (const std::string& f : scenario_files(dir)) {
    const std::string shown =
        bundled ? "scenarios/" + std::filesystem::path(f).lexically_relative(dir).generic_string()
                : f;
    hw::Scenario s = hw::load_scenario(f, {}, hw::ParallelSection::kOptional);
    if (!s.has_parallel) {
      unconfigured.push_back(shown);
      continue;
    }
    IterationOptions io;
    io.flash_attention = s.flash_attention;
    Row r{shown, s, simulate_iteration(scenario_iteration_input(s), io), 0};
    if (s.published)
      r.error_pct = hw::published_error_pct(*s.published, r.result.tflops_per_gpu,
                                            ps_to_seconds(r.result.iteration));
    rows.push_back(std::move(r));
  }
  // Groups in the order their first scenario appears (files are sorted by name).
  std::vector<Group> groups;
  for (const Row& r : rows) {
    const std::string name = r.scenario.group.empty() ? kNoGroup : r.scenario.group;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.name == name; });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{name, {}, 0, 0, 0});
    it->rows.push_back(&r);
  }
  // Within a group by GPU count (a scaling series reads in order), then file.
  for (Group& g : groups)
    std::stable_sort(g.rows.begin(), g.rows.end(), [](const Row* a, const Row* b) {
      return a->scenario.num_gpus() < b->scenario.num_gpus();
    });
  Group all{"all", {}, 0, 0, 0};
  for (Group& g : groups) {
    summarise(g);
    all.rows.insert(all.rows.end(), g.rows.begin(), g.rows.end());
  }
  summarise(all);
  if (o.format == "json") {
    nlohmann::ordered_json js = nlohmann::ordered_json::array();
    for (const Group& g : groups) {
      nlohmann::ordered_json gr = nlohmann::ordered_json::array();
      for (const Row* r : g.rows) gr.push_back(row_json(*r));
      js.push_back({{"group", g.name},
                    {"scenarios", g.rows.size()},
                    {"published", g.published},
                    {"mean_abs_error_pct", g.mean},
                    {"worst_abs_error_pct", g.worst},
                    {"rows", gr}});
    }
    nlohmann::ordered_json out{{"groups", js},
                               {"scenarios", all.rows.size()},
                               {"published", all.published},
                               {"mean_abs_error_pct", all.mean},
                               {"worst_abs_error_pct", all.worst},
                               {"without_configuration", unconfigured}};
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
    return 0;
  }
  std::size_t width = 8;
  for (const Row& r : rows) width = std::max(width, r.file.size() + 1);
  // Published TFLOP/s or iteration time: the figure the source gives ("-" for the other or none).
  auto fig = [](double v) { return v > 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
  auto secs = [](double v) { return v > 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
  std::string t;
  for (const Group& g : groups) {
    t += fmt::format(
        "{:<{}}{:>6}{:>3}{:>3}{:>3}{:>5}{:>4}{:>3}{:>3}{:>5}{:>9}{:>9}{:>9}{:>9}{:>8}\n",
        "[" + g.name + "]", width, "GPUs", "t", "cp", "p", "d", "ep", "v", "b", "fp8", "pred s",
        "pub s", "pred TF", "pub TF", "error");
    for (const Row* rp : g.rows) {
      const Row& r = *rp;
      const ParallelConfig& p = r.scenario.parallel;
      const hw::PublishedFigures pub = r.scenario.published.value_or(hw::PublishedFigures{});
      const std::string err =
          r.scenario.published ? fmt::format("{:+.1f}%", r.error_pct) : std::string("-");
      t += fmt::format(
          "{:<{}}{:>6}{:>3}{:>3}{:>3}{:>5}{:>4}{:>3}{:>3}{:>5}{:>9.2f}{:>9}{:>9.1f}{:>9}{:>8}{}\n",
          r.file, width, r.scenario.num_gpus(), p.tensor_parallel, p.context_parallel,
          p.pipeline_parallel, p.data_parallel, p.expert_parallel, p.virtual_stages,
          p.micro_batch_size, p.fp8 == "off" ? "-" : p.fp8.substr(0, 4),
          ps_to_seconds(r.result.iteration), secs(pub.iteration_time_s), r.result.tflops_per_gpu,
          fig(pub.tflops_per_gpu), err, r.result.fits ? "" : "  does not fit");
    }
    t += summary_line(g, "scenarios") + "\n";
  }
  all.name = "all groups";
  t += summary_line(all, "scenarios");
  if (!unconfigured.empty())
    t += fmt::format("not predicted ({} name no configuration; `plan` searches them): {}\n",
                     unconfigured.size(), fmt::join(unconfigured, ", "));
  std::fputs(t.c_str(), stdout);
  return 0;
}

}  // namespace

void register_validate(CLI::App& app, int* status) {
  auto opts = std::make_shared<ValidateOptions>();
  auto* sub = app.add_subcommand(
      "validate",
      "Simulate every scenario, grouped; print predicted vs published where a figure is given");
  sub->add_option("dir", opts->dir,
                  "Scenario file or directory searched recursively for *.yaml (default: the "
                  "bundled scenarios, from any directory)");
  sub->add_option("--format", opts->format, "table or json");
  sub->callback([opts, status] { *status = run_validate(*opts); });
}

}  // namespace pw::tools
