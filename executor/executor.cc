#include "executor/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/validator.h"
#include "executor/action_loop.h"
#include "executor/cpu_backend.h"
#include "executor/memory.h"
#include "executor/probe.h"
#include "executor/reference.h"

namespace pw::exec {
namespace {

/// Probe calls per rank before a run (about 0.1 s with h = 256, 128 tokens on a 2-core EPYC).
constexpr int kRunProbeCalls = 7;

constexpr double kGradTolerance = 1e-9;

std::string_view category(ActionKind k) {
  switch (k) {
    case ActionKind::kSendF:
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
    case ActionKind::kRecvB:
      return "pp";
    case ActionKind::kReduceGrad:
    case ActionKind::kUnshard:
    case ActionKind::kReshard:
    case ActionKind::kPairReduce:
      return "dp";
    case ActionKind::kOptStep:
      return "optimizer";
    default:
      return "compute";
  }
}

std::string slice_name(const Action& a) {
  if (a.kind == ActionKind::kOverlapFB) return fmt::format("F{}+BW{}", a.microbatch, a.microbatch2);
  if (a.microbatch < 0) return fmt::format("{} s{}", action_kind_name(a.kind), a.stage);
  return fmt::format("{}{}", action_kind_name(a.kind), a.microbatch);
}

// Rank 0 collects the last iteration's times of every pipeline device (data replica 0, tensor
// rank 0) and turns them into the MeasuredRun and the trace.
}  // namespace

void append_device_timings(const std::vector<ExecAction>& list, int device, int world_rank,
                           const std::int64_t* rel_ns, ExecuteResult& res) {
  res.trace.process_names.push_back(fmt::format("device {} (rank {})", device, world_rank));
  res.trace.thread_names.push_back({"compute", "communication"});
  for (std::size_t i = 0; i < list.size(); ++i) {
    const ExecAction& a = list[i];
    const TimePs s = rel_ns[2 * i] * 1000, e = rel_ns[2 * i + 1] * 1000;
    if (a.plan_index >= 0) res.run.actions.push_back({device, a.plan_index, a.action, s, e});
    TraceSlice sl;
    sl.pid = device;
    sl.tid = is_compute(a.action.kind) ? 0 : 1;
    sl.name = slice_name(a.action);
    sl.category = std::string(category(a.action.kind));
    sl.start = s;
    sl.duration = e - s;
    sl.stage = a.action.stage;
    sl.microbatch = a.action.microbatch;
    res.trace.slices.push_back(std::move(sl));
  }
}

void gather_timings(const Program& prog, const RankLayout& layout, int rank, MPI_Comm world,
                    const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& end,
                    std::int64_t t0, ExecuteResult& res) {
  int d = 0, p = 0, t = 0;
  layout.coords(rank, &t, &d, &p);
  std::vector<std::int64_t> rel(start.size() * 2);
  for (std::size_t i = 0; i < start.size(); ++i) {
    rel[2 * i] = start[i] - t0;
    rel[2 * i + 1] = end[i] - t0;
  }
  constexpr int kTagTimes = 7001;
  if (rank != 0) {
    if (d == 0 && t == 0)
      MPI_Send(rel.data(), static_cast<int>(rel.size()), MPI_INT64_T, 0, kTagTimes, world);
    return;
  }
  for (int dev = 0; dev < layout.pp; ++dev) {
    const auto& list = prog.device[dev];
    std::vector<std::int64_t> times(list.size() * 2);
    if (dev == 0)
      times = rel;
    else
      MPI_Recv(times.data(), static_cast<int>(times.size()), MPI_INT64_T, layout.gpu(0, 0, dev),
               kTagTimes, world, MPI_STATUS_IGNORE);
    append_device_timings(list, dev, layout.gpu(0, 0, dev), times.data(), res);
  }
}

void check_against_reference(const Plan& plan, const ModelDims& dims, const RankLayout& layout,
                             const std::vector<std::pair<int, const StageModel*>>& local,
                             double tolerance, int rank, MPI_Comm world, Watchdog& wd,
                             ExecuteResult& res) {
  const int total = layout.dp * plan.schedule.num_microbatches;
  std::vector<double> ref;
  double ref_loss = 0;
  if (rank == 0) {
    ReferenceResult r = run_reference(dims, total);
    ref = std::move(r.grads);
    ref_loss = r.loss;
  } else {
    ref.resize(static_cast<std::size_t>(reference_offsets(dims).back()));
  }
  MPI_Request req;
  MPI_Ibcast(ref.data(), static_cast<int>(ref.size()), MPI_DOUBLE, 0, world, &req);
  wd.wait(&req, "reference gradients from rank 0", 0, /*limited=*/false);
  int d = 0, p = 0, t = 0;
  layout.coords(rank, &t, &d, &p);
  GradCompare mine;
  for (const auto& [st, model] : local) {
    GradCompare c = compare_grads(dims, t, model->ep_rank(), model->tensors(), ref);
    mine.tensors += c.tensors;
    if (c.max_rel_error >= mine.max_rel_error) {
      mine.max_rel_error = c.max_rel_error;
      mine.worst_tensor = fmt::format("{} (stage {}, rank {})", c.worst_tensor, st, rank);
    }
  }
  struct {
    double value;
    int rank;
  } worst{mine.max_rel_error, rank};
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC, world);
  std::int64_t count = mine.tensors;
  MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &count, &count, 1, MPI_INT64_T, MPI_SUM, 0, world);
  constexpr int kTagName = 7002;
  if (worst.rank != 0 && rank == worst.rank)
    MPI_Send(mine.worst_tensor.data(), static_cast<int>(mine.worst_tensor.size()), MPI_CHAR, 0,
             kTagName, world);
  if (rank != 0) return;
  if (worst.rank != 0) {
    MPI_Status st;
    MPI_Probe(worst.rank, kTagName, world, &st);
    int len = 0;
    MPI_Get_count(&st, MPI_CHAR, &len);
    mine.worst_tensor.assign(static_cast<std::size_t>(len), '\0');
    MPI_Recv(mine.worst_tensor.data(), len, MPI_CHAR, worst.rank, kTagName, world,
             MPI_STATUS_IGNORE);
  }
  res.checked = true;
  res.reference_loss = ref_loss;
  res.loss_rel_error = std::abs(res.losses.front() - ref_loss) / std::abs(ref_loss);
  res.max_grad_rel_error = worst.value;
  res.worst_tensor = mine.worst_tensor;
  res.tensors_checked = count;
  // Without tensor or expert parallelism every microbatch's loss is computed by the same
  // operations as the reference, so the loss is bit-identical; a TP all-reduce reorders one sum
  // and an expert's GEMM takes the tokens of several data replicas at once (last-bit level).
  // Lower-precision backends pass a looser tolerance, which then bounds the loss error as well.
  const bool loss_ok = tolerance > kGradTolerance       ? res.loss_rel_error <= tolerance
                       : layout.tp == 1 && dims.ep == 1 ? res.losses.front() == ref_loss
                                                        : res.loss_rel_error <= 1e-12;
  res.gradients_match = loss_ok && worst.value <= tolerance;
}

void agree_on_error(MPI_Comm world, const std::string& mine) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  int first = mine.empty() ? size : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, world);
  if (first == size) return;
  int len = rank == first ? static_cast<int>(mine.size()) : 0;
  MPI_Bcast(&len, 1, MPI_INT, first, world);
  std::string msg = rank == first ? mine : std::string(static_cast<std::size_t>(len), '\0');
  MPI_Bcast(msg.data(), len, MPI_CHAR, first, world);
  throw ConfigError(fmt::format("rank {}: {}", first, msg));
}

RankLayout make_layout(const Plan& plan, int world_size, const std::string& source) {
  RankLayout l;
  l.dp = plan.config.data_parallel;
  l.pp = plan.schedule.placement.num_devices;
  l.tp = plan.config.tensor_parallel;
  if (l.dp <= 0) throw ConfigError(source, "parallel.data_parallel", "expected a positive size");
  if (l.tp <= 0)
    throw ConfigError(source, "parallel.tensor_model_parallel_size", "expected a positive size");
  if (plan.config.pipeline_parallel > 0 && plan.config.pipeline_parallel != l.pp)
    throw ConfigError(source, "parallel.pipeline_model_parallel_size",
                      fmt::format("is {} but the schedule's placement has {} devices",
                                  plan.config.pipeline_parallel, l.pp));
  if (l.num_ranks() != world_size)
    throw ConfigError(source, "",
                      fmt::format("the plan needs {} ranks (data {} x pipeline {} x tensor {}) but "
                                  "{} were launched (mpirun -np {})",
                                  l.num_ranks(), l.dp, l.pp, l.tp, world_size, l.num_ranks()));
  if (!plan.rank_to_gpu.empty()) {
    if (static_cast<int>(plan.rank_to_gpu.size()) != l.pp)
      throw ConfigError(source, "rank_to_gpu",
                        fmt::format("has {} entries; expected one per pipeline rank ({})",
                                    plan.rank_to_gpu.size(), l.pp));
    for (int p = 0; p < l.pp; ++p)
      if (plan.rank_to_gpu[p] != l.gpu(0, 0, p))
        throw ConfigError(source, fmt::format("rank_to_gpu[{}]", p),
                          fmt::format("is {}; expected {} (Megatron's order: tensor rank, then "
                                      "data replica, then pipeline rank)",
                                      plan.rank_to_gpu[p], l.gpu(0, 0, p)));
  }
  return l;
}

void summarize_iterations(const ExecuteOptions& opt, const std::vector<TimePs>& spans,
                          ExecuteResult& res) {
  res.iteration_times = spans;
  res.warmup = opt.warmup;
  std::vector<TimePs> timed(spans.begin() + std::min<std::size_t>(opt.warmup, spans.size()),
                            spans.end());
  std::sort(timed.begin(), timed.end());
  res.run.iterations = static_cast<int>(timed.size());
  res.run.iteration_time = timed.empty() ? 0 : timed[timed.size() / 2];
}

ExecuteResult execute_plan(const Plan& plan, const ExecuteOptions& opt, MPI_Comm world) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  RankLayout layout;
  ModelDims dims;
  Program prog;
  std::string error;
  try {
    if (opt.backend != "cpu")
      throw ConfigError("", "--backend",
                        fmt::format("'{}' is not run by the CPU executor", opt.backend));
    if (opt.iterations <= 0) throw ConfigError("", "--iterations", "expected a positive count");
    if (opt.warmup < 0) throw ConfigError("", "--warmup", "expected a count of 0 or more");
    if (!opt.skip_validation) validate_schedule(plan.schedule, opt.source);
    layout = make_layout(plan, size, opt.source);
    dims = make_plan_model_dims(plan, opt.seed, opt.source);
    int* tag_ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(world, MPI_TAG_UB, &tag_ub, &flag);
    const long tags = 2L * plan.schedule.placement.num_stages() * plan.schedule.num_microbatches;
    if (flag && tags > *tag_ub)
      throw ConfigError(opt.source, "num_microbatches",
                        fmt::format("stages x microbatches too large for MPI tags ({})", *tag_ub));
    prog = build_program(plan.schedule, layout.dp);
  } catch (const ConfigError& e) {
    error = e.what();
  }
  agree_on_error(world, error);

  int d = 0, p = 0, t = 0;
  layout.coords(rank, &t, &d, &p);
  Watchdog wd(world, opt.watchdog_seconds,
              fmt::format("rank {} (dp {}, pp {}, tp {})", rank, d, p, t));
  keep_freed_memory();
  // Each rank times the machine probe on its own core first (executor/probe.h), the figure
  // calibration recorded for the core it ran on: compare sets one against the other.
  double probe_ms = probe_forward_ms(kRunProbeCalls);
  std::vector<double> probes(rank == 0 ? size : 0);
  MPI_Gather(&probe_ms, 1, MPI_DOUBLE, probes.data(), 1, MPI_DOUBLE, 0, world);
  CpuBackend be(plan, prog, dims, layout, rank, world, wd, opt);
  const std::vector<ExecAction>& list = prog.device[p];
  std::vector<std::int64_t> start(list.size()), end(list.size());
  ExecuteResult res;
  res.num_ranks = size;
  res.num_implied = prog.num_implied;
  std::vector<TimePs> iteration_ps;
  std::vector<double> shares;
  std::int64_t t0 = 0;
  for (int it = 0; it < opt.warmup + opt.iterations; ++it) {
    be.start_iteration();
    MPI_Barrier(world);
    t0 = now_ns();
    run_actions(be, list.data(), list.size(), start.data(), end.data());
    be.finish_iteration();
    wd.set_action(Action{ActionKind::kOptStep, -1, -1});
    MPI_Request req;
    MPI_Ibarrier(world, &req);
    wd.wait(&req, "end-of-iteration barrier (its own actions are done)", -1);
    std::int64_t span = (list.empty() ? t0 : end.back()) - t0;
    MPI_Allreduce(MPI_IN_PLACE, &span, 1, MPI_INT64_T, MPI_MAX, world);
    iteration_ps.push_back(span * 1000);
    be.loss_shares(shares);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : shares.data(), shares.data(),
               static_cast<int>(shares.size()), MPI_DOUBLE, MPI_SUM, 0, world);
    double loss = 0;
    for (double s : shares) loss += s;  // global microbatch order, as the reference sums
    res.losses.push_back(loss);
    if (it == 0 && opt.check_gradients) {
      std::vector<std::pair<int, const StageModel*>> local;
      for (int st = 0; st < plan.schedule.placement.num_stages(); ++st)
        if (be.model(st) != nullptr) local.emplace_back(st, be.model(st));
      check_against_reference(plan, dims, layout, local, kGradTolerance, rank, world, wd, res);
    }
  }
  gather_timings(prog, layout, rank, world, start, end, t0, res);
  summarize_iterations(opt, iteration_ps, res);
  res.run.backend = "cpu";
  res.run.device = fmt::format("CPU (Eigen float64), {} MPI ranks", size);
  res.run.optimizer = opt.optimizer;
  res.run.probe_ms = std::move(probes);
  return res;
}

}  // namespace pw::exec
