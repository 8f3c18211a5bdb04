// `pipewright execute PLAN`: run a plan for real under mpirun (one process per rank).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "core/plan_io.h"
#include "core/trace.h"
#include "executor/executor.h"
#include "tools/command.h"
#include "tools/cuda_plugin.h"

namespace pw::tools {
namespace {

struct ExecuteArgs {
  std::string plan;
  std::string measured;
  std::string trace;
  std::string format = "table";
  bool check_gradients = false;
  exec::ExecuteOptions opt;
};

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& x : items) out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", x);
  return out;
}

/// Memory and communication strategies of the plan's configuration that the executor backends
/// do not carry out (they run plain data/tensor/pipeline parallelism; the gradients are the same,
/// but memory and communication times differ from what the plan predicts).
std::vector<std::string> not_executed(const Plan& plan) {
  std::vector<std::string> out;
  const ParallelConfig& c = plan.config;
  if (c.zero_stage > 0)
    out.push_back(
        fmt::format("ZeRO-{} (optimizer state and gradients stay replicated)", c.zero_stage));
  if (c.sequence_parallel) out.push_back("sequence parallelism");
  if (c.optimizer_offload) out.push_back("optimizer offload (the step runs on the device)");
  if (c.recompute == "selective") out.push_back("selective recomputation");
  bool has_r = false;
  for (const auto& list : plan.schedule.actions)
    for (const Action& x : list) has_r = has_r || x.kind == ActionKind::kR;
  if (c.recompute == "full" && !has_r)
    out.push_back("full recomputation (the schedule has no R actions)");
  return out;
}

void print_summary(const Plan& plan, const ExecuteArgs& a, const exec::ExecuteResult& r) {
  const auto& pl = plan.schedule.placement;
  const std::vector<std::string> skipped = not_executed(plan);
  if (a.format == "json") {
    std::string losses, times;
    for (std::size_t i = 0; i < r.losses.size(); ++i) {
      losses += fmt::format("{}{:.17g}", i ? ", " : "", r.losses[i]);
      times += fmt::format("{}{}", i ? ", " : "", r.iteration_times[i]);
    }
    std::printf(
        "{\"backend\": \"%s\", \"ranks\": %d, \"warmup\": %d, \"losses\": [%s], "
        "\"iteration_times_ps\": [%s], \"checked\": %s, \"reference_loss\": %.17g, "
        "\"max_grad_rel_error\": %.3g, "
        "\"gradients_match\": %s, \"not_executed\": [%s]}\n",
        a.opt.backend.c_str(), r.num_ranks, r.warmup, losses.c_str(), times.c_str(),
        r.checked ? "true" : "false", r.reference_loss, r.max_grad_rel_error,
        r.gradients_match ? "true" : "false", quoted_list(skipped).c_str());
    return;
  }
  std::printf("pipewright execute: %s: schedule %s, %d stages on %d devices, %d microbatches\n",
              a.plan.c_str(), plan.schedule.name.c_str(), pl.num_stages(), pl.num_devices,
              plan.schedule.num_microbatches);
  const std::string experts = plan.config.expert_parallel > 1
                                  ? fmt::format("; {} experts split over {} data replicas",
                                                plan.model.num_experts, plan.config.expert_parallel)
                                  : "";
  std::printf(
      "backend %s, %d ranks (data %d x pipeline %d x tensor %d%s), %d implied actions "
      "per replica\n",
      a.opt.backend.c_str(), r.num_ranks, plan.config.data_parallel, pl.num_devices,
      plan.config.tensor_parallel, experts.c_str(), r.num_implied);
  if (!skipped.empty())
    std::printf(
        "not executed by this backend (gradients unchanged; memory and times differ from "
        "the plan's prediction): %s\n",
        fmt::format("{}", fmt::join(skipped, "; ")).c_str());
  std::printf("%-10s %-22s %s\n", "iteration", "loss", "time (ms)");
  for (std::size_t i = 0; i < r.losses.size(); ++i)
    std::printf("%-10zu %-22.17g %.3f%s\n", i + 1, r.losses[i],
                static_cast<double>(r.iteration_times[i]) * 1e-9,
                static_cast<int>(i) < r.warmup ? " (warm-up, not timed)" : "");
  if (r.losses.size() > 1)
    std::printf("median of the %d timed iteration(s): %.3f ms\n", r.run.iterations,
                static_cast<double>(r.run.iteration_time) * 1e-9);
  if (r.checked)
    std::printf(
        "gradient check vs unpipelined reference: loss %.17g (%s), max relative gradient "
        "error %.3g over %lld tensors (worst %s): %s\n",
        r.reference_loss, r.losses.front() == r.reference_loss ? "identical" : "differs",
        r.max_grad_rel_error, static_cast<long long>(r.tensors_checked), r.worst_tensor.c_str(),
        r.gradients_match ? "PASS" : "FAIL");
}

exec::ExecuteResult run_backend(const Plan& plan, const exec::ExecuteOptions& opt) {
  if (opt.backend == "cpu") return exec::execute_plan(plan, opt, MPI_COMM_WORLD);
  std::string why;
  const CudaPlugin* cuda = load_cuda_plugin(&why);
  if (cuda == nullptr) {
    exec::agree_on_error(MPI_COMM_WORLD, fmt::format("--backend {}: {}", opt.backend, why));
    return {};
  }
  return cuda->execute_plan(plan, opt, MPI_COMM_WORLD);
}

/// Flags every rank checks alike before anything runs (so rank 0 alone prints the one line).
void check_args(const ExecuteArgs& a) {
  const double lr = a.opt.learning_rate;
  if (!std::isfinite(lr) || lr <= 0)
    throw ConfigError("", "--lr", fmt::format("expected a positive learning rate, got {}", lr));
  const double wd = a.opt.watchdog_seconds;
  if (!std::isfinite(wd) || wd < 0)
    throw ConfigError("", "--watchdog-seconds",
                      fmt::format("expected seconds >= 0 (0 = never), got {}", wd));
  // An output whose folder is missing would fail only after the run.
  for (const auto& [flag, path] : {std::pair{"--measured", a.measured}, {"--trace", a.trace}}) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!path.empty() && !dir.empty() && !std::filesystem::is_directory(dir))
      throw ConfigError("", flag,
                        fmt::format("{}: the folder {} does not exist", path, dir.string()));
  }
}

int run_execute(ExecuteArgs& a) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 0;
  try {
    check_args(a);
    Plan plan;
    std::string error;
    try {
      plan = load_plan(a.plan);
    } catch (const ConfigError& e) {
      error = e.what();
    }
    exec::agree_on_error(MPI_COMM_WORLD, error);
    a.opt.source = a.plan;
    a.opt.check_gradients = a.check_gradients;
    const exec::ExecuteResult r = run_backend(plan, a.opt);
    if (rank == 0) {
      if (!a.measured.empty()) save_measured_run(a.measured, r.run);
      if (!a.trace.empty()) write_trace_file(a.trace, r.trace);
      print_summary(plan, a, r);
      if (r.checked && !r.gradients_match) status = 1;
    }
  } catch (const ConfigError& e) {
    if (rank == 0) std::fprintf(stderr, "pipewright: error: %s\n", e.what());
    status = 2;
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}

}  // namespace

void register_execute(CLI::App& app, int* status) {
  auto args = std::make_shared<ExecuteArgs>();
  auto* sub = app.add_subcommand(
      "execute",
      "run a plan for real: one MPI rank per GPU/process (mpirun -np N pipewright execute ...)");
  sub->add_option("plan", args->plan, "plan file (YAML, or JSON by extension)")->required();
  sub->add_option("--backend", args->opt.backend, "cpu (Eigen float64), cuda, cuda-single")
      ->check(CLI::IsMember({"cpu", "cuda", "cuda-single"}));
  sub->add_option("--measured", args->measured, "write the measured run (JSON or YAML)");
  sub->add_option(
      "--trace", args->trace,
      "write the measured Perfetto trace (JSON; gzip-compressed when the name ends in .gz)");
  sub->add_option("--iterations", args->opt.iterations,
                  "timed training iterations (default 1); the measured time is their median")
      ->check(CLI::PositiveNumber);
  sub->add_option("--warmup", args->opt.warmup,
                  "iterations trained first and not timed (default 0): the first iterations "
                  "touch fresh memory and caches")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--watchdog-seconds", args->opt.watchdog_seconds,
                  "abort with a report when a rank waits longer (default 60; 0 = never)");
  sub->add_flag("--check-gradients", args->check_gradients,
                "compare iteration 1 with the unpipelined model on rank 0 (exit 1 on mismatch)");
  sub->add_option("--optimizer", args->opt.optimizer, "sgd (default) or adam")
      ->check(CLI::IsMember({"sgd", "adam"}));
  sub->add_option("--lr", args->opt.learning_rate, "learning rate (default 1e-3)");
  sub->add_option("--seed", args->opt.seed, "weight and data seed (default 1234)");
  sub->add_option("--format", args->format, "table (default) or json")
      ->check(CLI::IsMember({"table", "json"}));
  sub->callback([args, status] { *status = run_execute(*args); });
}

}  // namespace pw::tools
