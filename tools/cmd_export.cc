// `pipewright export PLAN --to megatron|torchtitan [--out FILE]`: the launch configuration that
// runs a plan with a training framework.
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/file_io.h"
#include "core/plan_io.h"
#include "planner/search/frameworks.h"
#include "tools/command.h"

namespace pw::tools {
namespace {

struct ExportOptions {
  std::string plan;
  std::string to;
  std::string out;
};

// The CSV of a torchtitan export sits beside the TOML: out.toml -> out.csv.
std::string csv_beside(const std::string& out) {
  if (out.empty()) return {};
  std::filesystem::path p(out);
  p.replace_extension(".csv");
  return p.string();
}

int run_export(const ExportOptions& o) {
  Framework fw = Framework::kAny;
  if (!parse_framework(o.to, &fw) || fw == Framework::kAny)
    throw ConfigError("", "--to",
                      "expected megatron, torchtitan, nemo or deepspeed, got '" + o.to + "'");
  const Plan plan = load_plan(o.plan);
  const FrameworkExport e = export_plan(plan, fw, o.plan, csv_beside(o.out));
  for (const std::string& n : e.notes) std::fprintf(stderr, "pipewright export: %s\n", n.c_str());
  if (o.out.empty()) {
    std::fwrite(e.text.data(), 1, e.text.size(), stdout);
    return 0;
  }
  if (!e.csv_path.empty()) write_file_atomic(e.csv_path, e.csv_text);
  try {
    write_file_atomic(o.out, e.text);
  } catch (...) {
    std::error_code ec;  // the write's error is the one to report
    if (!e.csv_path.empty()) std::filesystem::remove(e.csv_path, ec);
    throw;
  }
  std::fprintf(stderr, "wrote %s%s%s\n", o.out.c_str(), e.csv_path.empty() ? "" : " and ",
               e.csv_path.c_str());
  return 0;
}

}  // namespace

void register_export(CLI::App& app, int* status) {
  auto o = std::make_shared<ExportOptions>();
  auto* sub = app.add_subcommand("export",
                                 "Launch configuration of a plan for a training framework "
                                 "(Megatron-LM, torchtitan, NeMo, DeepSpeed)");
  sub->add_option("plan", o->plan, "Plan file (YAML or JSON, from `plan --emit`)")->required();
  sub->add_option("--to", o->to, "megatron | torchtitan | nemo | deepspeed")->required();
  sub->add_option("--out", o->out,
                  "Write here instead of stdout (torchtitan: FILE.toml, and FILE.csv beside it "
                  "when the schedule is a custom order)");
  sub->callback([o, status] { *status = run_export(*o); });
}

}  // namespace pw::tools
