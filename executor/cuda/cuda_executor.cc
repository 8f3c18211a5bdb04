#include "executor/cuda/cuda_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/validator.h"
#include "executor/action_loop.h"
#include "executor/cuda/check.h"
#include "executor/cuda/device_stage.h"
#include "executor/program.h"
#include "executor/watchdog.h"

namespace pw::exec::cuda {

void fail(const char* file, int line, const char* call, const char* error) {
  int init = 0, rank = 0;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "pipewright execute: rank %d: %s:%d: %s failed: %s\n", rank, file, line,
               call, error);
  std::fflush(stderr);
  if (init) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

namespace {

// bf16 GEMM inputs against the fp64 reference: agreement to a few parts in a hundred.
constexpr double kBf16Tolerance = 5e-2;

// The NCCL communicator of one directed device pair (sender key 0, receiver key 1).
struct Edge {
  int from = -1, to = -1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// One pipeline device on this GPU: its stages, streams, buffers and per-action events.
struct VirtualRank {
  int device = 0;
  cudaStream_t compute = nullptr, copy = nullptr;  // copy: single-GPU point-to-point
  cublasHandle_t blas = nullptr;
  NcclGroup tp, dp;
  std::vector<std::unique_ptr<StageModel>> host;  // initial weights; gradients for the check
  std::vector<std::unique_ptr<DeviceStage>> owned;
  std::vector<DeviceStage*> stage;      // by global stage id
  std::vector<StageModel*> host_of;     // by global stage id
  std::vector<float*> recv_buf;         // by slot
  std::vector<cudaEvent_t> slot_event;  // by slot
  std::vector<cudaEvent_t> start_ev, end_ev;
  cudaEvent_t base = nullptr;
  const std::vector<ExecAction>* list = nullptr;
};

NcclGroup make_group(ncclComm_t comm, int size) {
  NcclGroup g;
  g.comm = comm;
  g.size = size;
  PW_CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  PW_CUDA_CHECK(cudaEventCreateWithFlags(&g.ready, cudaEventDisableTiming));
  PW_CUDA_CHECK(cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming));
  return g;
}

class CudaRun {
 public:
  CudaRun(const Plan& plan, const Program& prog, const ModelDims& dims, const RankLayout& layout,
          int rank, MPI_Comm world, Watchdog& wd, const ExecuteOptions& opt, bool single)
      : pl_(plan.schedule.placement),
        prog_(prog),
        dims_(dims),
        layout_(layout),
        rank_(rank),
        world_(world),
        wd_(wd),
        opt_(opt),
        single_(single),
        m_(plan.schedule.num_microbatches) {
    layout.coords(rank, &tp_idx_, &dp_idx_, &pp_idx_);
    PW_CUDA_CHECK(cudaSetDevice(single ? 0 : rank % visible_devices()));
    if (!single) init_nccl();
    const int first = single ? 0 : pp_idx_, last = single ? layout.pp : pp_idx_ + 1;
    for (int d = first; d < last; ++d) vrs_.push_back(make_vr(d));
    if (!single) init_edges();
  }

  ~CudaRun() {
    cudaDeviceSynchronize();
    for (auto& e : edges_) ncclCommDestroy(e.comm);
    for (auto& vr : vrs_) {
      if (vr->tp.comm != nullptr) ncclCommDestroy(vr->tp.comm);
      if (vr->dp.comm != nullptr) ncclCommDestroy(vr->dp.comm);
      cublasDestroy(vr->blas);
    }
    if (world_comm_ != nullptr) ncclCommDestroy(world_comm_);
  }

  // One iteration: enqueue every action, then wait (watched) for the GPU to finish.
  void iteration() {
    for (auto& vr : vrs_) {
      for (auto& st : vr->owned) st->zero_grads(vr->compute);
      PW_CUDA_CHECK(cudaEventRecord(vr->base, vr->compute));
    }
    MPI_Barrier(world_);
    if (single_)
      issue_interleaved();
    else
      for (std::size_t i = 0; i < vrs_[0]->list->size(); ++i) issue(*vrs_[0], i);
    wait_for_gpu();
  }

  // Last iteration's action times (ns since the iteration start) of pipeline device `vr`.
  std::vector<std::int64_t> times(int vr_index, bool end) const {
    const VirtualRank& vr = *vrs_[vr_index];
    std::vector<std::int64_t> out(vr.list->size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      float ms = 0;
      PW_CUDA_CHECK(cudaEventElapsedTime(&ms, vr.base, end ? vr.end_ev[i] : vr.start_ev[i]));
      out[i] = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
    }
    return out;
  }

  // Loss share of every (data replica, microbatch) whose head this process holds.
  void loss_shares(std::vector<double>& out) const {
    out.assign(static_cast<std::size_t>(layout_.dp) * m_, 0.0);
    if (tp_idx_ != 0) return;
    std::vector<float> host(static_cast<std::size_t>(dims_.tokens()));
    for (const auto& vr : vrs_)
      for (int st = 0; st < pl_.num_stages(); ++st) {
        if (vr->stage[st] == nullptr || pl_.stages[st].index != pl_.stages_per_pipeline() - 1)
          continue;
        for (int mb = 0; mb < m_; ++mb) {
          PW_CUDA_CHECK(cudaMemcpy(host.data(), vr->stage[st]->loss(mb),
                                   host.size() * sizeof(float), cudaMemcpyDeviceToHost));
          double sum = 0;
          for (float l : host) sum += l;
          out[static_cast<std::size_t>(dp_idx_) * m_ + mb] = sum;
        }
      }
  }

  std::vector<std::pair<int, const StageModel*>> download_grads() {
    std::vector<std::pair<int, const StageModel*>> out;
    for (auto& vr : vrs_)
      for (int st = 0; st < pl_.num_stages(); ++st)
        if (vr->stage[st] != nullptr) {
          vr->stage[st]->download_grads(*vr->host_of[st]);
          out.emplace_back(st, vr->host_of[st]);
        }
    return out;
  }

  int num_vrs() const { return static_cast<int>(vrs_.size()); }
  int vr_device(int i) const { return vrs_[i]->device; }

 private:
  std::size_t slot(int stage, int mb, int dir) const {
    return (static_cast<std::size_t>(stage) * m_ + mb) * 2 + dir;
  }
  std::size_t tokens_x_hidden() const {
    return static_cast<std::size_t>(dims_.tokens()) * dims_.hidden;
  }

  void init_nccl() {
    ncclUniqueId id;
    if (rank_ == 0) PW_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, world_);
    PW_NCCL_CHECK(ncclCommInitRank(&world_comm_, layout_.num_ranks(), id, rank_));
  }

  std::unique_ptr<VirtualRank> make_vr(int device) {
    auto vr = std::make_unique<VirtualRank>();
    vr->device = device;
    vr->list = &prog_.device[device];
    PW_CUDA_CHECK(cudaStreamCreateWithFlags(&vr->compute, cudaStreamNonBlocking));
    PW_CUDA_CHECK(cudaStreamCreateWithFlags(&vr->copy, cudaStreamNonBlocking));
    PW_CUBLAS_CHECK(cublasCreate(&vr->blas));
    if (single_) {
      // One-rank NCCL communicators: the collectives run through NCCL, moving nothing.
      ncclComm_t c = nullptr;
      int dev = 0;
      PW_NCCL_CHECK(ncclCommInitAll(&c, 1, &dev));
      vr->dp = make_group(c, 1);
      vr->dp.always = true;
      vr->tp = make_group(nullptr, 1);
    } else {
      ncclComm_t tp = nullptr, dp = nullptr;
      PW_NCCL_CHECK(
          ncclCommSplit(world_comm_, dp_idx_ * layout_.pp + pp_idx_, tp_idx_, &tp, nullptr));
      PW_NCCL_CHECK(
          ncclCommSplit(world_comm_, pp_idx_ * layout_.tp + tp_idx_, dp_idx_, &dp, nullptr));
      vr->tp = make_group(tp, layout_.tp);
      vr->dp = make_group(dp, layout_.dp);
    }
    const int S = pl_.num_stages(), per_pipe = pl_.stages_per_pipeline();
    const float loss_scale =
        static_cast<float>(1.0 / (static_cast<double>(layout_.dp) * m_ * dims_.tokens()));
    vr->stage.assign(static_cast<std::size_t>(S), nullptr);
    vr->host_of.assign(static_cast<std::size_t>(S), nullptr);
    for (int st = 0; st < S; ++st) {
      const StageInfo& info = pl_.stages[st];
      if (info.device != device) continue;
      const bool emb = info.index == 0, head = info.index == per_pipe - 1;
      vr->host.push_back(std::make_unique<StageModel>(dims_, info.layer_begin, info.layer_end, emb,
                                                      head, tp_idx_, m_, 1.0, nullptr));
      vr->owned.push_back(std::make_unique<DeviceStage>(*vr->host.back(), dims_, emb, head, m_,
                                                        loss_scale, vr->blas, &vr->tp));
      vr->stage[st] = vr->owned.back().get();
      vr->host_of[st] = vr->host.back().get();
    }
    const std::size_t slots = static_cast<std::size_t>(S) * m_ * 2;
    vr->recv_buf.assign(slots, nullptr);
    vr->slot_event.assign(slots, nullptr);
    for (const ExecAction& a : *vr->list) {
      const bool recv = a.action.kind == ActionKind::kRecvF || a.action.kind == ActionKind::kRecvB;
      const bool send = a.action.kind == ActionKind::kSendF || a.action.kind == ActionKind::kSendB;
      if (!recv && !send) continue;
      const std::size_t k = transfer_slot(a.action);
      PW_CUDA_CHECK(cudaEventCreateWithFlags(&vr->slot_event[k], cudaEventDisableTiming));
      if (recv) {
        void* ptr = nullptr;
        PW_CUDA_CHECK(cudaMalloc(&ptr, tokens_x_hidden() * sizeof(float)));
        vr->recv_buf[k] = static_cast<float*>(ptr);
      }
    }
    vr->start_ev.resize(vr->list->size());
    vr->end_ev.resize(vr->list->size());
    for (std::size_t i = 0; i < vr->list->size(); ++i) {
      PW_CUDA_CHECK(cudaEventCreate(&vr->start_ev[i]));
      PW_CUDA_CHECK(cudaEventCreate(&vr->end_ev[i]));
    }
    PW_CUDA_CHECK(cudaEventCreate(&vr->base));
    return vr;
  }

  // Slot of a transfer, named by the receiving stage (the same on both ends).
  std::size_t transfer_slot(const Action& a) const {
    switch (a.kind) {
      case ActionKind::kSendF:
        return slot(pl_.next_stage(a.stage), a.microbatch, 0);
      case ActionKind::kSendB:
        return slot(pl_.prev_stage(a.stage), a.microbatch, 1);
      case ActionKind::kRecvB:
        return slot(a.stage, a.microbatch, 1);
      default:
        return slot(a.stage, a.microbatch, 0);
    }
  }

  // One 2-rank communicator per directed device pair, split in the same order on every rank.
  void init_edges() {
    std::set<std::pair<int, int>> pairs;
    for (int d = 0; d < layout_.pp; ++d)
      for (const ExecAction& a : prog_.device[d])
        if (a.action.kind == ActionKind::kSendF || a.action.kind == ActionKind::kSendB)
          pairs.emplace(d, a.peer);
    for (const auto& [from, to] : pairs) {
      const bool member = pp_idx_ == from || pp_idx_ == to;
      ncclComm_t comm = nullptr;
      PW_NCCL_CHECK(ncclCommSplit(world_comm_,
                                  member ? dp_idx_ * layout_.tp + tp_idx_ : NCCL_SPLIT_NOCOLOR,
                                  pp_idx_ == from ? 0 : 1, &comm, nullptr));
      if (!member) continue;
      Edge e{from, to, comm, nullptr};
      PW_CUDA_CHECK(cudaStreamCreateWithFlags(&e.stream, cudaStreamNonBlocking));
      edges_.push_back(e);
    }
  }

  Edge& edge(int from, int to) {
    for (Edge& e : edges_)
      if (e.from == from && e.to == to) return e;
    PW_ASSERT(false, fmt::format("no NCCL edge {} -> {}", from, to));
  }

  VirtualRank& vr_of_device(int device) {
    for (auto& vr : vrs_)
      if (vr->device == device) return *vr;
    PW_ASSERT(false, fmt::format("device {} is not in this process", device));
  }

  const float* input_of(VirtualRank& vr, int st, int mb) {
    const int prev = pl_.prev_stage(st);
    if (prev < 0) return nullptr;
    if (vr.stage[prev] != nullptr) return vr.stage[prev]->output(mb);
    return vr.recv_buf[slot(st, mb, 0)];
  }

  const float* d_output_of(VirtualRank& vr, int st, int mb) {
    const int next = pl_.next_stage(st);
    if (next < 0) return nullptr;
    if (vr.stage[next] != nullptr) return vr.stage[next]->input_grad(mb);
    return vr.recv_buf[slot(st, mb, 1)];
  }

  float* send_source(VirtualRank& vr, const Action& a) {
    return a.kind == ActionKind::kSendF ? vr.stage[a.stage]->output(a.microbatch)
                                        : vr.stage[a.stage]->input_grad(a.microbatch);
  }

  void issue(VirtualRank& vr, std::size_t i) {
    const ExecAction& ea = (*vr.list)[i];
    const Action& a = ea.action;
    cudaStream_t s = vr.compute;
    const bool send = a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB;
    const bool recv = a.kind == ActionKind::kRecvF || a.kind == ActionKind::kRecvB;
    if (recv) s = single_ ? vr.copy : edge(ea.peer, vr.device).stream;
    if (send && !single_) s = edge(vr.device, ea.peer).stream;
    if (send && !single_) {  // the send waits for the compute that produced its data
      PW_CUDA_CHECK(cudaEventRecord(vr.slot_event[transfer_slot(a)], vr.compute));
      PW_CUDA_CHECK(cudaStreamWaitEvent(s, vr.slot_event[transfer_slot(a)], 0));
    }
    PW_CUDA_CHECK(cudaEventRecord(vr.start_ev[i], s));
    dispatch(vr, ea, s);
    PW_CUDA_CHECK(cudaEventRecord(vr.end_ev[i], s));
    if (recv) PW_CUDA_CHECK(cudaStreamWaitEvent(vr.compute, vr.end_ev[i], 0));
  }

  void dispatch(VirtualRank& vr, const ExecAction& ea, cudaStream_t s) {
    const Action& a = ea.action;
    const int st = a.stage, mb = a.microbatch;
    const std::int64_t g = static_cast<std::int64_t>(dp_idx_) * m_;
    const std::size_t n = tokens_x_hidden();
    switch (a.kind) {
      case ActionKind::kF:
        return vr.stage[st]->forward(mb, input_of(vr, st, mb), g + mb, s);
      case ActionKind::kB:
        return vr.stage[st]->backward_input(mb, d_output_of(vr, st, mb), s);
      case ActionKind::kW:
        return vr.stage[st]->backward_weight(mb, s);
      case ActionKind::kBW:
        vr.stage[st]->backward_input(mb, d_output_of(vr, st, mb), s);
        return vr.stage[st]->backward_weight(mb, s);
      case ActionKind::kR:
        return vr.stage[st]->recompute(mb, s);
      case ActionKind::kOverlapFB:
        // Issued back to back on one compute stream (see docs/executor.md).
        vr.stage[st]->forward(mb, input_of(vr, st, mb), g + mb, s);
        vr.stage[a.stage2]->backward_input(a.microbatch2, d_output_of(vr, a.stage2, a.microbatch2),
                                           s);
        return vr.stage[a.stage2]->backward_weight(a.microbatch2, s);
      case ActionKind::kSendF:
      case ActionKind::kSendB:
        if (single_) {  // marks the data ready; the receiver copies it
          PW_CUDA_CHECK(cudaEventRecord(vr.slot_event[transfer_slot(a)], vr.compute));
          return;
        }
        PW_NCCL_CHECK(
            ncclSend(send_source(vr, a), n, ncclFloat, 1, edge(vr.device, ea.peer).comm, s));
        return;
      case ActionKind::kRecvF:
      case ActionKind::kRecvB: {
        float* dst = vr.recv_buf[transfer_slot(a)];
        if (!single_) {
          PW_NCCL_CHECK(ncclRecv(dst, n, ncclFloat, 0, edge(ea.peer, vr.device).comm, s));
          return;
        }
        VirtualRank& from = vr_of_device(ea.peer);
        const int src_stage =
            a.kind == ActionKind::kRecvF ? pl_.prev_stage(st) : pl_.next_stage(st);
        const Action src{a.kind == ActionKind::kRecvF ? ActionKind::kSendF : ActionKind::kSendB,
                         static_cast<std::int16_t>(src_stage), mb};
        PW_CUDA_CHECK(cudaStreamWaitEvent(s, from.slot_event[transfer_slot(a)], 0));
        PW_CUDA_CHECK(cudaMemcpyAsync(dst, send_source(from, src), n * sizeof(float),
                                      cudaMemcpyDeviceToDevice, s));
        return;
      }
      case ActionKind::kReduceGrad:
        return vr.dp.all_reduce(vr.stage[st]->grads(), vr.stage[st]->num_params(), s);
      case ActionKind::kOptStep:
        for (auto& stage : vr.owned) stage->sgd_step(static_cast<float>(opt_.learning_rate), s);
        return;
      case ActionKind::kUnshard:  // weights are replicated on the GPU (see docs/executor.md)
      case ActionKind::kReshard:
      case ActionKind::kPairReduce:  // rejected at setup
        return;
    }
  }

  // Single-GPU mode: interleave the devices' programs on the host so that every RECV is issued
  // after its SEND (the validator's buffered semantics); the GPU streams then run concurrently.
  void issue_interleaved() {
    std::vector<std::size_t> cursor(vrs_.size(), 0);
    std::vector<std::uint8_t> sent(static_cast<std::size_t>(pl_.num_stages()) * m_ * 2, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t v = 0; v < vrs_.size(); ++v) {
        VirtualRank& vr = *vrs_[v];
        while (cursor[v] < vr.list->size()) {
          const Action& a = (*vr.list)[cursor[v]].action;
          const bool recv = a.kind == ActionKind::kRecvF || a.kind == ActionKind::kRecvB;
          if (recv && !sent[transfer_slot(a)]) break;
          issue(vr, cursor[v]);
          if (a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB)
            sent[transfer_slot(a)] = 1;
          ++cursor[v];
          progress = true;
        }
      }
    }
    for (std::size_t v = 0; v < vrs_.size(); ++v)
      PW_ASSERT(cursor[v] == vrs_[v]->list->size(), "single-GPU issue order made no progress");
  }

  // Polls every action's end event; a stuck GPU is reported by the watchdog like an MPI wait.
  void wait_for_gpu() {
    const std::int64_t start = now_ns();
    for (;;) {
      bool done = true;
      for (auto& vr : vrs_) {
        for (std::size_t i = 0; i < vr->end_ev.size() && done; ++i) {
          const cudaError_t q = cudaEventQuery(vr->end_ev[i]);
          if (q == cudaErrorNotReady) {
            done = false;
            wd_.set_action((*vr->list)[i].action);
            const int peer = (*vr->list)[i].peer;
            wd_.poll("GPU work of this action has not finished",
                     peer < 0 ? -1 : layout_.gpu(tp_idx_, dp_idx_, peer),
                     static_cast<double>(now_ns() - start) * 1e-9);
          } else {
            PW_CUDA_CHECK(q);
          }
        }
      }
      if (done) break;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    PW_CUDA_CHECK(cudaDeviceSynchronize());
  }

  const Placement& pl_;
  const Program& prog_;
  ModelDims dims_;
  RankLayout layout_;
  int rank_;
  MPI_Comm world_;
  Watchdog& wd_;
  ExecuteOptions opt_;
  bool single_;
  int m_;
  int dp_idx_ = 0, pp_idx_ = 0, tp_idx_ = 0;
  ncclComm_t world_comm_ = nullptr;
  std::vector<Edge> edges_;
  std::vector<std::unique_ptr<VirtualRank>> vrs_;
};

}  // namespace

ExecuteResult execute_plan_cuda(const Plan& plan, const ExecuteOptions& opt, MPI_Comm world) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  const bool single = opt.backend == "cuda-single";
  RankLayout layout;
  ModelDims dims;
  Program prog;
  std::string error;
  try {
    if (opt.backend != "cuda" && !single)
      throw ConfigError("", "--backend", "expected cuda or cuda-single");
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
      throw ConfigError("", "--backend",
                        fmt::format("{}: no CUDA device is visible ({})", opt.backend,
                                    e != cudaSuccess ? cudaGetErrorString(e) : "0 devices"));
    if (opt.optimizer != "sgd")
      throw ConfigError("", "--optimizer", "the CUDA backend implements sgd only");
    if (!opt.skip_validation) validate_schedule(plan.schedule, opt.source);
    if (plan.schedule.placement.num_pipelines() > 1)
      throw ConfigError(opt.source, "schedule.placement",
                        "the CUDA backend runs single-pipeline placements only (no BitPipe yet)");
    if (single) {
      if (size != 1)
        throw ConfigError("", "--backend", "cuda-single runs in one process (no mpirun -np > 1)");
      if (plan.config.data_parallel != 1 || plan.config.tensor_parallel != 1)
        throw ConfigError(opt.source, "config",
                          "cuda-single needs data_parallel = tensor_parallel = 1");
      layout.dp = layout.tp = 1;
      layout.pp = plan.schedule.placement.num_devices;
    } else {
      layout = make_layout(plan, size, opt.source);
    }
    dims = make_plan_model_dims(plan, opt.seed, opt.source);
    if (!dims.gpt3_layer())
      throw ConfigError(opt.source, "model",
                        "the CUDA backend runs GPT-3-style layers only (multi-head attention, "
                        "GELU, LayerNorm, biases, learned positions); the CPU backend runs "
                        "GQA, SwiGLU, RMSNorm, RoPE and sliding windows");
    prog = build_program(plan.schedule, layout.dp);
    if (!single) {
      const std::string order = check_transfer_order(prog, plan.schedule.placement);
      if (!order.empty())
        throw ConfigError(opt.source, "schedule.actions",
                          "NCCL matches transfers in order, but " + order);
    }
  } catch (const ConfigError& e) {
    error = e.what();
  }
  agree_on_error(world, error);

  int d = 0, p = 0, t = 0;
  layout.coords(single ? 0 : rank, &t, &d, &p);
  Watchdog wd(world, opt.watchdog_seconds,
              single ? std::string("rank 0 (single GPU, all devices)")
                     : fmt::format("rank {} (dp {}, pp {}, tp {})", rank, d, p, t));
  CudaRun run(plan, prog, dims, layout, rank, world, wd, opt, single);
  ExecuteResult res;
  res.num_ranks = size;
  res.num_implied = prog.num_implied;
  std::vector<TimePs> iteration_ps;
  std::vector<double> shares;
  for (int it = 0; it < opt.warmup + opt.iterations; ++it) {
    run.iteration();
    std::int64_t span = 0;
    for (int v = 0; v < run.num_vrs(); ++v) {
      const std::vector<std::int64_t> end = run.times(v, true);
      if (!end.empty()) span = std::max(span, *std::max_element(end.begin(), end.end()));
    }
    MPI_Allreduce(MPI_IN_PLACE, &span, 1, MPI_INT64_T, MPI_MAX, world);
    iteration_ps.push_back(span * 1000);
    run.loss_shares(shares);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : shares.data(), shares.data(),
               static_cast<int>(shares.size()), MPI_DOUBLE, MPI_SUM, 0, world);
    double loss = 0;
    for (double s : shares) loss += s;
    res.losses.push_back(loss);
    if (it == 0 && opt.check_gradients)
      check_against_reference(plan, dims, layout, run.download_grads(), kBf16Tolerance,
                              single ? 0 : rank, world, wd, res);
  }
  if (single) {
    for (int v = 0; v < run.num_vrs(); ++v) {
      const std::vector<std::int64_t> s = run.times(v, false), e = run.times(v, true);
      std::vector<std::int64_t> rel(s.size() * 2);
      for (std::size_t i = 0; i < s.size(); ++i) {
        rel[2 * i] = s[i];
        rel[2 * i + 1] = e[i];
      }
      append_device_timings(prog.device[run.vr_device(v)], run.vr_device(v), 0, rel.data(), res);
    }
  } else {
    gather_timings(prog, layout, rank, world, run.times(0, false), run.times(0, true), 0, res);
  }
  summarize_iterations(opt, iteration_ps, res);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  res.run.backend = opt.backend;
  res.run.optimizer = opt.optimizer;
  res.run.device =
      fmt::format("{} ({}), {} process(es)", prop.name,
                  single ? "single-GPU mode, all devices on one GPU" : "one GPU per rank", size);
  return res;
}

}  // namespace pw::exec::cuda
