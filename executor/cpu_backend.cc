#include "executor/cpu_backend.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace pw::exec {

namespace {

bool in_set(const StageModel& m, const Tensor& t, TensorSet set) {
  return set == TensorSet::kAll ||
         is_expert_tensor(m.dims(), t.layer, t.id) == (set == TensorSet::kExpert);
}

}  // namespace

void pack_grads(const StageModel& m, std::vector<double>& out, TensorSet set) {
  out.clear();
  for (const Tensor& t : m.tensors())
    if (in_set(m, t, set)) out.insert(out.end(), t.grad.data(), t.grad.data() + t.grad.size());
}

void unpack_grads(const std::vector<double>& in, StageModel& m, TensorSet set) {
  std::size_t k = 0;
  for (Tensor& t : m.tensors()) {
    if (!in_set(m, t, set)) continue;
    std::copy_n(in.data() + k, t.grad.size(), t.grad.data());
    k += static_cast<std::size_t>(t.grad.size());
  }
}

class CpuBackend::TpAllReduce : public TpComm {
 public:
  explicit TpAllReduce(CpuBackend& be) : be_(be) {}
  void all_reduce_sum(Mat& m) override {
    buf_.assign(m.data(), m.data() + m.size());
    be_.all_reduce(buf_, be_.tp_comm_, "tensor-parallel all-reduce");
    std::copy(buf_.begin(), buf_.end(), m.data());
  }

 private:
  CpuBackend& be_;
  std::vector<double> buf_;
};

class CpuBackend::EpAllToAll : public ExpertComm {
 public:
  explicit EpAllToAll(CpuBackend& be) : be_(be) {}
  void all_to_all(const Mat& send, const std::vector<int>& send_counts, int per, Mat& recv,
                  std::vector<int>& recv_counts) override {
    const int ranks = static_cast<int>(send_counts.size()) / per;
    recv_counts.resize(send_counts.size());
    MPI_Request req;
    MPI_Ialltoall(send_counts.data(), per, MPI_INT, recv_counts.data(), per, MPI_INT, be_.ep_comm_,
                  &req);
    be_.watchdog_.wait(&req, "expert-parallel all-to-all (row counts)", -1);
    const int cols = static_cast<int>(send.cols());
    sc_.assign(ranks, 0);
    rc_.assign(ranks, 0);
    for (int r = 0; r < ranks; ++r)
      for (int e = 0; e < per; ++e) {
        sc_[r] += send_counts[r * per + e] * cols;
        rc_[r] += recv_counts[r * per + e] * cols;
      }
    sd_.assign(ranks, 0);
    rd_.assign(ranks, 0);
    std::exclusive_scan(sc_.begin(), sc_.end(), sd_.begin(), 0);
    std::exclusive_scan(rc_.begin(), rc_.end(), rd_.begin(), 0);
    recv.resize((rd_.back() + rc_.back()) / cols, cols);
    MPI_Ialltoallv(send.data(), sc_.data(), sd_.data(), MPI_DOUBLE, recv.data(), rc_.data(),
                   rd_.data(), MPI_DOUBLE, be_.ep_comm_, &req);
    be_.watchdog_.wait(&req, "expert-parallel all-to-all (tokens)", -1);
  }

 private:
  CpuBackend& be_;
  std::vector<int> sc_, sd_, rc_, rd_;
};

CpuBackend::CpuBackend(const Plan& plan, const Program& program, const ModelDims& dims,
                       const RankLayout& layout, int world_rank, MPI_Comm world, Watchdog& watchdog,
                       const ExecuteOptions& options)
    : pl_(plan.schedule.placement),
      program_(program),
      dims_(dims),
      layout_(layout),
      m_(plan.schedule.num_microbatches),
      world_(world),
      watchdog_(watchdog),
      options_(options) {
  layout_.coords(world_rank, &tp_idx_, &dp_idx_, &pp_idx_);
  MPI_Comm_split(world, dp_idx_ * layout.pp + pp_idx_, tp_idx_, &tp_comm_);
  MPI_Comm_split(world, pp_idx_ * layout.tp + tp_idx_, dp_idx_, &dp_comm_);
  MPI_Comm_dup(world, &pair_comm_);
  const int ep = dims.ep, group = (pp_idx_ * layout.tp + tp_idx_);
  MPI_Comm_split(world, group * (layout.dp / ep) + dp_idx_ / ep, dp_idx_ % ep, &ep_comm_);
  MPI_Comm_split(world, group * ep + dp_idx_ % ep, dp_idx_, &edp_comm_);
  tp_ = std::make_unique<TpAllReduce>(*this);
  ep_ = std::make_unique<EpAllToAll>(*this);
  const int S = pl_.num_stages();
  const int per_pipe = pl_.stages_per_pipeline();
  const double loss_scale =
      1.0 / (static_cast<double>(layout.dp) * m_ * static_cast<double>(dims.tokens()));
  stage_model_.assign(static_cast<std::size_t>(S), nullptr);
  for (int st = 0; st < S; ++st) {
    const StageInfo& info = pl_.stages[st];
    if (info.device != pp_idx_) continue;
    models_.push_back(std::make_unique<StageModel>(
        dims, info.layer_begin, info.layer_end, info.index == 0, info.index == per_pipe - 1,
        tp_idx_, m_, loss_scale, tp_.get(), dp_idx_ % ep, ep_.get()));
    stage_model_[st] = models_.back().get();
  }
  const std::size_t slots = static_cast<std::size_t>(S) * m_ * 2;
  send_buf_.resize(slots);
  recv_buf_.resize(slots);
  send_req_.assign(slots, MPI_REQUEST_NULL);
  pairs_.resize(static_cast<std::size_t>(S));
}

CpuBackend::~CpuBackend() {
  for (MPI_Comm* c : {&tp_comm_, &dp_comm_, &pair_comm_, &ep_comm_, &edp_comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void CpuBackend::start_iteration() {
  for (auto& m : models_) m->zero_grads();
}

void CpuBackend::finish_iteration() {
  complete_pairs();
  watchdog_.wait_all(static_cast<int>(send_req_.size()), send_req_.data(),
                     "completion of its sends");
}

void CpuBackend::do_forward(int st, int mb) {
  const int prev = pl_.prev_stage(st);
  const Mat* in = nullptr;
  if (prev >= 0) in = local(prev) ? &model(prev)->output(mb) : &recv_buf_[slot(st, mb, 0)];
  const bool keep = !program_.recompute[static_cast<std::size_t>(st) * m_ + mb];
  model(st)->forward(mb, in, static_cast<std::int64_t>(dp_idx_) * m_ + mb, keep);
}

void CpuBackend::do_backward_input(int st, int mb) {
  const int next = pl_.next_stage(st);
  const Mat* d = nullptr;
  if (next >= 0) d = local(next) ? &model(next)->input_grad(mb) : &recv_buf_[slot(st, mb, 1)];
  model(st)->backward_input(mb, d);
}

void CpuBackend::forward(const ExecAction& a) { do_forward(a.action.stage, a.action.microbatch); }

void CpuBackend::backward_input(const ExecAction& a) {
  do_backward_input(a.action.stage, a.action.microbatch);
}

void CpuBackend::backward_weight(const ExecAction& a) {
  model(a.action.stage)->backward_weight(a.action.microbatch);
}

void CpuBackend::backward_full(const ExecAction& a) {
  do_backward_input(a.action.stage, a.action.microbatch);
  model(a.action.stage)->backward_weight(a.action.microbatch);
}

void CpuBackend::recompute(const ExecAction& a) {
  model(a.action.stage)->recompute(a.action.microbatch);
}

void CpuBackend::overlap(const ExecAction& a) {
  // On a CPU the two halves run one after the other; the CUDA backend overlaps them on streams.
  do_forward(a.action.stage, a.action.microbatch);
  do_backward_input(a.action.stage2, a.action.microbatch2);
  model(a.action.stage2)->backward_weight(a.action.microbatch2);
}

void CpuBackend::isend(const Mat& src, int st, int mb, int dir, int to_stage) {
  const std::size_t k = slot(st, mb, dir);
  // A slot is reused only by the next iteration, after finish_iteration completed its send.
  send_buf_[k] = src;
  MPI_Isend(send_buf_[k].data(), static_cast<int>(send_buf_[k].size()), MPI_DOUBLE,
            peer_rank(pl_.stages[to_stage].device), tag(to_stage, mb, dir), world_, &send_req_[k]);
}

void CpuBackend::irecv(int st, int mb, int dir, int from_stage, const char* what) {
  Mat& buf = recv_buf_[slot(st, mb, dir)];
  buf.resize(dims_.tokens(), dims_.hidden);
  MPI_Request req;
  const int peer = peer_rank(pl_.stages[from_stage].device);
  MPI_Irecv(buf.data(), static_cast<int>(buf.size()), MPI_DOUBLE, peer, tag(st, mb, dir), world_,
            &req);
  watchdog_.wait(&req, what, peer);
}

void CpuBackend::send_f(const ExecAction& a) {
  const int st = a.action.stage, mb = a.action.microbatch;
  isend(model(st)->output(mb), st, mb, 0, pl_.next_stage(st));
}

void CpuBackend::send_b(const ExecAction& a) {
  const int st = a.action.stage, mb = a.action.microbatch;
  isend(model(st)->input_grad(mb), st, mb, 1, pl_.prev_stage(st));
}

void CpuBackend::recv_f(const ExecAction& a) {
  const int st = a.action.stage;
  irecv(st, a.action.microbatch, 0, pl_.prev_stage(st), "activation from SEND_F");
}

void CpuBackend::recv_b(const ExecAction& a) {
  const int st = a.action.stage;
  irecv(st, a.action.microbatch, 1, pl_.next_stage(st), "gradient from SEND_B");
}

void CpuBackend::all_reduce(std::vector<double>& buf, MPI_Comm comm, const char* what) {
  int size = 1, rank = 0;
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  MPI_Comm_rank(comm, &rank);
  flat2_.resize(buf.size());
  MPI_Request req;
  MPI_Ireduce(buf.data(), flat2_.data(), static_cast<int>(buf.size()), MPI_DOUBLE, MPI_SUM, 0, comm,
              &req);
  watchdog_.wait(&req, what, -1);
  if (rank == 0) buf.swap(flat2_);
  MPI_Ibcast(buf.data(), static_cast<int>(buf.size()), MPI_DOUBLE, 0, comm, &req);
  watchdog_.wait(&req, what, -1);
}

void CpuBackend::reduce_grads(StageModel& m, TensorSet set, MPI_Comm comm, const char* what) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  pack_grads(m, flat_, set);
  all_reduce(flat_, comm, what);
  unpack_grads(flat_, m, set);
}

void CpuBackend::reduce_grad(const ExecAction& a) {
  complete_pair(a.action.stage);
  StageModel& m = *model(a.action.stage);
  if (dims_.ep == 1) {
    reduce_grads(m, TensorSet::kAll, dp_comm_, "data-parallel gradient all-reduce");
    return;
  }
  // Experts are summed over the replicas holding the same experts, the rest over all replicas.
  reduce_grads(m, TensorSet::kShared, dp_comm_, "data-parallel gradient all-reduce");
  reduce_grads(m, TensorSet::kExpert, edp_comm_, "expert data-parallel gradient all-reduce");
}

void CpuBackend::gather_weights(StageModel& m, TensorSet set, MPI_Comm comm, const char* what) {
  int size = 1, rank = 0;
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  MPI_Comm_rank(comm, &rank);
  flat_.clear();
  for (const Tensor& t : m.tensors())
    if (in_set(m, t, set))
      flat_.insert(flat_.end(), t.value.data(), t.value.data() + t.value.size());
  const std::size_t shard = (flat_.size() + size - 1) / size;
  flat_.resize(shard * size, 0.0);
  flat2_.resize(flat_.size());
  MPI_Request req;
  MPI_Iallgather(flat_.data() + shard * rank, static_cast<int>(shard), MPI_DOUBLE, flat2_.data(),
                 static_cast<int>(shard), MPI_DOUBLE, comm, &req);
  watchdog_.wait(&req, what, -1);
  std::size_t k = 0;
  for (Tensor& t : m.tensors()) {
    if (!in_set(m, t, set)) continue;
    std::copy_n(flat2_.data() + k, t.value.size(), t.value.data());
    k += static_cast<std::size_t>(t.value.size());
  }
}

void CpuBackend::unshard(const ExecAction& a) {
  // ZeRO-3 all-gather of the stage's weights: each replica contributes its shard, the gathered
  // copy equals the weights every replica already holds (the traffic is real). Experts are
  // sharded over the replicas that hold the same experts.
  StageModel& m = *model(a.action.stage);
  if (dims_.ep == 1) {
    gather_weights(m, TensorSet::kAll, dp_comm_, "ZeRO-3 weight all-gather");
    return;
  }
  gather_weights(m, TensorSet::kShared, dp_comm_, "ZeRO-3 weight all-gather");
  gather_weights(m, TensorSet::kExpert, edp_comm_, "ZeRO-3 expert weight all-gather");
}

void CpuBackend::pair_reduce(const ExecAction& a) {
  // Posted here, completed lazily (complete_pairs): the devices of a pair reach their
  // PAIR_REDUCE actions in different orders, and buffered sends keep that deadlock-free.
  const int st = a.action.stage;
  const std::vector<int> group = replica_stages(pl_, st);
  if (group.size() < 2) return;
  PendingPair& pp = pairs_[st];
  pack_grads(*model(st), pp.mine);
  pp.parts.assign(group.size(), {});
  pp.reqs.clear();
  pp.reqs.reserve(group.size() * 2);
  const int tag = pl_.stages[st].index;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const int other = group[k];
    if (other == st) continue;
    if (local(other)) {
      pack_grads(*model(other), pp.parts[k]);
      continue;
    }
    const int peer = peer_rank(pl_.stages[other].device);
    pp.parts[k].resize(pp.mine.size());
    pp.reqs.emplace_back();
    MPI_Irecv(pp.parts[k].data(), static_cast<int>(pp.parts[k].size()), MPI_DOUBLE, peer, tag,
              pair_comm_, &pp.reqs.back());
    pp.reqs.emplace_back();
    MPI_Isend(pp.mine.data(), static_cast<int>(pp.mine.size()), MPI_DOUBLE, peer, tag, pair_comm_,
              &pp.reqs.back());
  }
  for (std::size_t k = 0; k < group.size(); ++k)
    if (group[k] == st) pp.own = static_cast<int>(k);
  pp.pending = true;
}

void CpuBackend::complete_pair(int st) {
  PendingPair& pp = pairs_[st];
  if (!pp.pending) return;
  pp.pending = false;
  watchdog_.wait_all(static_cast<int>(pp.reqs.size()), pp.reqs.data(), "BitPipe pair exchange");
  pp.parts[pp.own] = pp.mine;
  // Sum in pipeline order so every replica ends with the bit-identical total.
  std::vector<double> sum(pp.parts[0]);
  for (std::size_t k = 1; k < pp.parts.size(); ++k)
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += pp.parts[k][i];
  unpack_grads(sum, *model(st));
}

void CpuBackend::complete_pairs() {
  for (int st = 0; st < pl_.num_stages(); ++st) complete_pair(st);
}

void CpuBackend::opt_step(const ExecAction&) {
  complete_pairs();
  ++opt_steps_;
  for (auto& m : models_) {
    if (options_.optimizer == "adam")
      m->adam_step(options_.learning_rate, opt_steps_);
    else
      m->sgd_step(options_.learning_rate);
  }
}

void CpuBackend::loss_shares(std::vector<double>& out) const {
  out.assign(static_cast<std::size_t>(layout_.dp) * m_, 0.0);
  if (tp_idx_ != 0) return;
  const int per_pipe = pl_.stages_per_pipeline();
  for (int st = 0; st < pl_.num_stages(); ++st) {
    if (stage_model_[st] == nullptr || pl_.stages[st].index != per_pipe - 1) continue;
    for (int mb = 0; mb < m_; ++mb) {
      const double l = stage_model_[st]->loss(mb);
      if (l != 0) out[static_cast<std::size_t>(dp_idx_) * m_ + mb] = l;
    }
  }
}

}  // namespace pw::exec
