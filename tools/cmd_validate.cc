// `pipewright validate [DIR]`: simulate every bundled scenario that carries published figures and
// print predicted vs published TFLOP/s per GPU with the error per row, then the mean and worst
// absolute error.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "hwmodels/scenario.h"
#include "sim/iteration.h"
#include "tools/command.h"
#include "tools/simulate_scenario.h"

namespace pw::tools {
namespace {

struct ValidateOptions {
  std::string dir = "scenarios";
  std::string format = "table";
};

struct Row {
  std::string file;
  hw::Scenario scenario;
  IterationResult result;
  double error_pct = 0;
};

std::vector<std::string> scenario_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    if (!fs::is_regular_file(dir, ec))
      throw ConfigError("", "DIR", fmt::format("'{}' is not a scenario file or a directory", dir));
  std::vector<std::string> files;
  if (fs::is_regular_file(dir, ec)) return {dir};
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

int run_validate(const ValidateOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw ConfigError("", "--format", fmt::format("'{}'; expected table or json", o.format));
  std::vector<Row> rows;
  for (const std::string& f : scenario_files(o.dir)) {
    // Scenarios without published figures (e.g. the planner's grid-search ones, which name no
    // configuration) are not validated; a published figure needs the configuration behind it.
    hw::Scenario s = hw::load_scenario(f, {}, hw::ParallelSection::kOptional);
    if (!s.published) continue;
    if (!s.has_parallel) s = hw::load_scenario(f);
    IterationOptions io;
    io.flash_attention = s.flash_attention;
    Row r{f, s, simulate_iteration(scenario_iteration_input(s), io), 0};
    r.error_pct = hw::published_error_pct(*s.published, r.result.tflops_per_gpu,
                                          ps_to_seconds(r.result.iteration));
    rows.push_back(std::move(r));
  }
  double sum = 0, worst = 0;
  for (const Row& r : rows) {
    sum += std::abs(r.error_pct);
    worst = std::max(worst, std::abs(r.error_pct));
  }
  const double mean = rows.empty() ? 0 : sum / static_cast<double>(rows.size());
  if (o.format == "json") {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const Row& r : rows) {
      j.push_back({{"scenario", r.file},
                   {"predicted_tflops_per_gpu", r.result.tflops_per_gpu},
                   {"published_tflops_per_gpu", r.scenario.published->tflops_per_gpu},
                   {"published_iteration_s", r.scenario.published->iteration_time_s},
                   {"published_tokens_per_s_per_gpu", r.scenario.published->tokens_per_s_per_gpu},
                   {"error_pct", r.error_pct},
                   {"iteration_ms", ps_to_millis(r.result.iteration)},
                   {"source", r.scenario.published->source}});
    }
    nlohmann::ordered_json out{
        {"rows", j}, {"mean_abs_error_pct", mean}, {"worst_abs_error_pct", worst}};
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
    return 0;
  }
  std::size_t width = 8;
  for (const Row& r : rows) width = std::max(width, r.file.size() + 1);
  // Published TFLOP/s or iteration time: the figure the source gives ("-" for the other).
  auto fig = [](double v) { return v > 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
  auto secs = [](double v) { return v > 0 ? fmt::format("{:.2f}", v) : std::string("-"); };
  std::string t =
      fmt::format("{:<{}}{:>6}{:>3}{:>3}{:>3}{:>5}{:>4}{:>3}{:>3}{:>5}{:>9}{:>9}{:>9}{:>9}{:>8}\n",
                  "scenario", width, "GPUs", "t", "cp", "p", "d", "ep", "v", "b", "fp8", "pred s",
                  "pub s", "pred TF", "pub TF", "error");
  for (const Row& r : rows) {
    const ParallelConfig& p = r.scenario.parallel;
    const hw::PublishedFigures& pub = *r.scenario.published;
    t += fmt::format(
        "{:<{}}{:>6}{:>3}{:>3}{:>3}{:>5}{:>4}{:>3}{:>3}{:>5}{:>9.2f}{:>9}{:>9.1f}{:>9}{:>+7.1f}%\n",
        r.file, width, r.scenario.num_gpus(), p.tensor_parallel, p.context_parallel,
        p.pipeline_parallel, p.data_parallel, p.expert_parallel, p.virtual_stages,
        p.micro_batch_size, p.fp8 == "off" ? "-" : p.fp8.substr(0, 4),
        ps_to_seconds(r.result.iteration), secs(pub.iteration_time_s), r.result.tflops_per_gpu,
        fig(pub.tflops_per_gpu), r.error_pct);
  }
  t += fmt::format("{} scenarios with published figures: mean |error| {:.2f}%, worst {:.2f}%\n",
                   rows.size(), mean, worst);
  std::fputs(t.c_str(), stdout);
  return 0;
}

}  // namespace

void register_validate(CLI::App& app, int* status) {
  auto opts = std::make_shared<ValidateOptions>();
  auto* sub = app.add_subcommand(
      "validate", "Simulate every scenario with published figures; print predicted vs published");
  sub->add_option("dir", opts->dir,
                  "Directory searched recursively for *.yaml (default: scenarios)");
  sub->add_option("--format", opts->format, "table or json");
  sub->callback([opts, status] { *status = run_validate(*opts); });
}

}  // namespace pw::tools
