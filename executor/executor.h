#pragma once
/// Runs a plan for real. Every MPI rank calls execute_plan with the same plan; rank r plays the
/// (tensor rank, data replica, pipeline device) of the project's one rank layout
/// (core/rank_layout.h, Megatron's order, the plan's rank_to_gpu):
///   r = tp_index + tensor_parallel * (dp_index + data_parallel * pp_index).
/// The plan is validated, lowered into per-rank programs (executor/program.h), executed for the
/// requested iterations with every action timed, and, when asked, checked against the same model
/// trained unpipelined on rank 0.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/plan.h"
#include "core/rank_layout.h"
#include "core/trace.h"
#include "executor/model.h"
#include "executor/program.h"
#include "executor/watchdog.h"

namespace pw::exec {

struct ExecuteOptions {
  std::string backend = "cpu";    ///< cpu (this library); cuda backends live in executor/cuda
  int iterations = 1;             ///< timed iterations
  int warmup = 0;                 ///< iterations run before them, trained but not timed
  double watchdog_seconds = 60;   ///< <= 0: no limit
  bool check_gradients = false;   ///< compare iteration 1 with the unpipelined reference
  bool skip_validation = false;   ///< test-only: run a plan the validator would reject
  std::string optimizer = "sgd";  ///< sgd | adam
  double learning_rate = 1e-3;
  std::uint64_t seed = 1234;
  std::string source;  ///< plan file name, for messages
};

/// Checks that `world_size` ranks can run `plan` (dp x pp x tp of the plan's configuration, pp =
/// the placement's devices) and that the plan's rank_to_gpu (when given) is this layout's
/// (pipeline rank p on rank gpu(0, 0, p)); throws ConfigError naming the counts or the entry
/// otherwise.
RankLayout make_layout(const Plan& plan, int world_size, const std::string& source);

/// Collective over `world`: when any rank passes a non-empty `error`, every rank throws the same
/// ConfigError("rank R: " + the lowest failing rank R's message); otherwise returns.
void agree_on_error(MPI_Comm world, const std::string& error);

/// What a run produced. Complete on rank 0; other ranks get `ok` and the losses.
struct ExecuteResult {
  MeasuredRun run;  ///< per plan action of data replica 0 / tensor rank 0, last iteration
  Trace trace;      ///< every executed action (implied communication included), last iteration
  std::vector<double> losses;  ///< loss of each iteration (sum over the global batch, in order)
  std::vector<TimePs> iteration_times;  ///< slowest rank's span of each iteration (warm-up first)
  int warmup = 0;                       ///< leading iterations of losses/iteration_times not timed
  int num_ranks = 0;
  int num_implied = 0;  ///< actions the executor added to the plan per data/tensor replica
  bool checked = false;
  double reference_loss = 0;
  double loss_rel_error = 0;
  double max_grad_rel_error = 0;  ///< worst over tensors of max|g - g_ref| / max|g_ref|
  std::string worst_tensor;
  std::int64_t tensors_checked = 0;
  bool gradients_match = false;  ///< max_grad_rel_error <= 1e-9 and the loss matches
};

// Building blocks shared with the CUDA backend.

/// Runs opt.warmup + opt.iterations iterations in total; fills res.iteration_times (every
/// iteration's span, in order), res.warmup, res.run.iterations (the timed count) and
/// res.run.iteration_time: the median of the timed spans (the upper middle of an even count).
void summarize_iterations(const ExecuteOptions& opt, const std::vector<TimePs>& spans,
                          ExecuteResult& res);

/// Appends one device's actions to res.run (plan actions only) and res.trace (all), from
/// `rel_ns` = [start0, end0, start1, end1, ...] in nanoseconds since the iteration start.
void append_device_timings(const std::vector<ExecAction>& list, int device, int world_rank,
                           const std::int64_t* rel_ns, ExecuteResult& res);

/// Collective: rank 0 receives the last iteration's [start, end) times (nanoseconds, relative
/// to `t0_ns`) of the ranks with data replica 0 and tensor rank 0 and appends them per device.
void gather_timings(const Program& program, const RankLayout& layout, int rank, MPI_Comm world,
                    const std::vector<std::int64_t>& start_ns,
                    const std::vector<std::int64_t>& end_ns, std::int64_t t0_ns,
                    ExecuteResult& res);

/// Collective: rank 0 trains the unpipelined reference (fp64) and broadcasts its gradients;
/// every rank compares its `local` (stage id, model holding the gradients) with its slice; rank 0
/// fills res.checked..gradients_match (needs res.losses.front()). `tolerance` bounds the relative
/// gradient error (1e-9 for the fp64 CPU backend; above that it also bounds the loss error).
void check_against_reference(const Plan& plan, const ModelDims& dims, const RankLayout& layout,
                             const std::vector<std::pair<int, const StageModel*>>& local,
                             double tolerance, int rank, MPI_Comm world, Watchdog& wd,
                             ExecuteResult& res);

/// Runs `plan` on the ranks of `world` (MPI must be initialised; every rank calls this). Setup
/// errors (bad plan, wrong rank count, invalid model shape) are agreed on by all ranks and thrown
/// as the same ConfigError everywhere, prefixed with the rank that found it. A hang is reported by
/// the watchdog, which aborts the job.
ExecuteResult execute_plan(const Plan& plan, const ExecuteOptions& options, MPI_Comm world);

}  // namespace pw::exec
