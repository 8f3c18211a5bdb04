#pragma once
/// The CPU backend: one rank's stages as StageModels (Eigen float64), point-to-point with
/// non-blocking MPI sends (buffered semantics: a SEND never waits for its receive), collectives
/// as reduce-then-broadcast (bit-identical results on every rank), every wait watched.
#include <mpi.h>

#include <memory>
#include <vector>

#include "core/plan.h"
#include "executor/executor.h"
#include "executor/model.h"
#include "executor/program.h"
#include "executor/watchdog.h"

namespace pw::exec {

/// Which tensors pack_grads / unpack_grads take: all, those expert parallelism splits (an MoE
/// layer's experts, reduced over the ranks holding the same experts) or the others (reduced over
/// the whole data-parallel group).
enum class TensorSet { kAll, kShared, kExpert };
/// Flat copy of the gradients of `m` in `set`, in tensor order (and back).
void pack_grads(const StageModel& m, std::vector<double>& out, TensorSet set = TensorSet::kAll);
void unpack_grads(const std::vector<double>& in, StageModel& m, TensorSet set = TensorSet::kAll);

class CpuBackend {
 public:
  CpuBackend(const Plan& plan, const Program& program, const ModelDims& dims,
             const RankLayout& layout, int world_rank, MPI_Comm world, Watchdog& watchdog,
             const ExecuteOptions& options);
  ~CpuBackend();
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  void begin_action(const ExecAction& a) { watchdog_.set_action(a.action); }
  void forward(const ExecAction& a);
  void backward_input(const ExecAction& a);
  void backward_weight(const ExecAction& a);
  void backward_full(const ExecAction& a);
  void recompute(const ExecAction& a);
  void send_f(const ExecAction& a);
  void recv_f(const ExecAction& a);
  void send_b(const ExecAction& a);
  void recv_b(const ExecAction& a);
  void overlap(const ExecAction& a);
  void reduce_grad(const ExecAction& a);
  void unshard(const ExecAction& a);
  void reshard(const ExecAction&) {}  // gathered weights are the rank's own copy: nothing to free
  void pair_reduce(const ExecAction& a);
  void opt_step(const ExecAction& a);

  /// Zeroes gradients before an iteration; completes outstanding sends after it.
  void start_iteration();
  void finish_iteration();

  /// The model of a global stage held by this rank, or nullptr.
  StageModel* model(int stage) { return stage_model_[stage]; }
  /// Loss share of each (data replica, microbatch) whose head this rank holds (tp rank 0 only);
  /// zeros elsewhere. Size dp * m.
  void loss_shares(std::vector<double>& out) const;

 private:
  class TpAllReduce;
  class EpAllToAll;
  std::size_t slot(int stage, int mb, int dir) const {
    return (static_cast<std::size_t>(stage) * m_ + mb) * 2 + dir;
  }
  int tag(int stage, int mb, int dir) const { return static_cast<int>(slot(stage, mb, dir)); }
  int peer_rank(int device) const { return layout_.gpu(tp_idx_, dp_idx_, device); }
  bool local(int stage) const { return stage >= 0 && stage_model_[stage] != nullptr; }
  void do_forward(int stage, int mb);
  void do_backward_input(int stage, int mb);
  void isend(const Mat& src, int stage, int mb, int dir, int to_stage);
  void irecv(int stage, int mb, int dir, int from_stage, const char* what);
  /// In-place sum over `comm` via reduce + broadcast, watched.
  void all_reduce(std::vector<double>& buf, MPI_Comm comm, const char* what);
  /// Sums the gradients of `m` in `set` over `comm` (nothing when it has one rank).
  void reduce_grads(StageModel& m, TensorSet set, MPI_Comm comm, const char* what);
  /// ZeRO-3: gathers the weights of `m` in `set` from the 1/size shards of the ranks of `comm`.
  void gather_weights(StageModel& m, TensorSet set, MPI_Comm comm, const char* what);
  void complete_pair(int stage);
  void complete_pairs();

  struct PendingPair {
    bool pending = false;
    int own = 0;                             ///< this stage's position in its replica group
    std::vector<double> mine;                ///< gradients as posted
    std::vector<std::vector<double>> parts;  ///< by pipeline
    std::vector<MPI_Request> reqs;
  };

  const Placement& pl_;
  const Program& program_;
  ModelDims dims_;
  RankLayout layout_;
  int dp_idx_ = 0, pp_idx_ = 0, tp_idx_ = 0;
  int m_ = 0;
  MPI_Comm world_, tp_comm_ = MPI_COMM_NULL, dp_comm_ = MPI_COMM_NULL, pair_comm_ = MPI_COMM_NULL;
  /// Expert parallelism: the ep data replicas that split the experts (ep_comm_, ranked by ep
  /// rank = data index % ep) and the replicas holding the same experts (edp_comm_).
  MPI_Comm ep_comm_ = MPI_COMM_NULL, edp_comm_ = MPI_COMM_NULL;
  Watchdog& watchdog_;
  ExecuteOptions options_;
  int opt_steps_ = 0;
  std::unique_ptr<TpAllReduce> tp_;
  std::unique_ptr<EpAllToAll> ep_;
  std::vector<std::unique_ptr<StageModel>> models_;
  std::vector<StageModel*> stage_model_;  ///< by global stage id
  std::vector<Mat> send_buf_, recv_buf_;  ///< by slot()
  std::vector<MPI_Request> send_req_;     ///< by slot()
  std::vector<double> flat_, flat2_;
  std::vector<PendingPair> pairs_;  ///< by global stage id
};

}  // namespace pw::exec
