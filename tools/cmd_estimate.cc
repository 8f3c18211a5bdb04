// `pipewright estimate SCENARIO.yaml`: memory, FLOPs and collective costs of a configuration.
#include <cstdio>
#include <optional>
#include <string>

#include "core/error.h"
#include "hwmodels/estimate.h"
#include "hwmodels/scenario.h"
#include "planner/search/scenario_input.h"
#include "sim/iteration.h"
#include "tools/command.h"

namespace pw::tools {
namespace {

struct EstimateOptions {
  std::string scenario;
  std::string format = "table";
  std::optional<int> tp, pp, dp, micro_batch_size, zero_stage, cp, ep, etp;
  std::optional<std::string> recompute, zero3_gather, fp8;
  bool sequence_parallel = false;
  bool no_sequence_parallel = false;
};

int run_estimate(const EstimateOptions& opt) {
  hw::ParallelOverrides o;
  o.tp = opt.tp;
  o.pp = opt.pp;
  o.dp = opt.dp;
  o.micro_batch_size = opt.micro_batch_size;
  o.zero_stage = opt.zero_stage;
  o.recompute = opt.recompute;
  o.zero3_gather = opt.zero3_gather;
  o.cp = opt.cp;
  o.ep = opt.ep;
  o.etp = opt.etp;
  o.fp8 = opt.fp8;
  if (opt.sequence_parallel && opt.no_sequence_parallel)
    throw ConfigError("", "--sequence-parallel --no-sequence-parallel",
                      "contradictory constraints: give one of the two");
  if (opt.sequence_parallel) o.sequence_parallel = true;
  if (opt.no_sequence_parallel) o.sequence_parallel = false;
  hw::Scenario s = hw::load_scenario(opt.scenario, o);
  // Memory from the simulator's timeline, the figure `simulate` and `plan` report.
  IterationOptions io;
  io.flash_attention = s.flash_attention;
  const IterationResult r = simulate_iteration(scenario_iteration_input(s), io);
  const hw::Estimate e =
      hw::make_estimate(s, memory_figures(r.memory.front()), memory_figures(r.memory.back()));
  std::string text =
      opt.format == "json" ? hw::estimate_json(e).dump(2) + "\n" : hw::estimate_table(e);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void register_estimate(CLI::App& app, int* status) {
  auto opt = std::make_shared<EstimateOptions>();
  auto* sub = app.add_subcommand(
      "estimate", "Parameters, FLOPs, per-GPU memory and collective times of a configuration");
  sub->add_option("scenario", opt->scenario, "Scenario YAML")->required();
  sub->add_option("--tp", opt->tp, "Tensor-parallel size (overrides the scenario)");
  sub->add_option("--pp", opt->pp, "Pipeline-parallel size");
  sub->add_option("--dp", opt->dp, "Data-parallel size (checked against GPUs / (t*cp*p))");
  sub->add_option("--cp", opt->cp, "Context-parallel size");
  sub->add_option("--ep", opt->ep, "Expert-parallel size (MoE models)");
  sub->add_option("--etp", opt->etp, "Expert-tensor-parallel size: 1 or the TP size");
  sub->add_option("--fp8", opt->fp8, "FP8 GEMMs: off | e4m3 | hybrid");
  sub->add_option("--micro-batch-size", opt->micro_batch_size, "Microbatch size");
  sub->add_option("--recompute", opt->recompute, "none | selective | full");
  sub->add_flag("--sequence-parallel", opt->sequence_parallel, "Turn sequence parallelism on");
  sub->add_flag("--no-sequence-parallel", opt->no_sequence_parallel,
                "Turn sequence parallelism off");
  sub->add_option("--zero-stage", opt->zero_stage, "ZeRO stage 0-3");
  sub->add_option("--zero3-gather", opt->zero3_gather,
                  "ZeRO-3 gathers one collective per layer in every pass (FSDP), per prefetch "
                  "bucket of weight tensors (DeepSpeed) or once per stage sweep: layer | tensor "
                  "| stage");
  sub->add_option("--format", opt->format, "table | json")->check(CLI::IsMember({"table", "json"}));
  sub->callback([opt, status] { *status = run_estimate(*opt); });
}

}  // namespace pw::tools
