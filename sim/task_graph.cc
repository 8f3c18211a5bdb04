#include "sim/task_graph.h"

#include "core/error.h"

namespace pw::des {

void TaskGraph::reset(int num_devices) {
  num_devices_ = num_devices;
  tasks_.clear();
  edge_pred_.clear();
  edge_succ_.clear();
  edge_latency_.clear();
  collectives_.clear();
  phases_.clear();
  flows_.clear();
  hops_.clear();
  initial_memory_.assign(static_cast<std::size_t>(num_devices) * kNumMemCategories, 0.0);
}

std::int32_t TaskGraph::add_task(const Task& t) {
  PW_ASSERT(t.device >= 0 && t.device < num_devices_, "task device out of range");
  tasks_.push_back(t);
  return static_cast<std::int32_t>(tasks_.size() - 1);
}

void TaskGraph::add_dep(std::int32_t pred, std::int32_t succ, TimePs latency) {
  edge_pred_.push_back(pred);
  edge_succ_.push_back(succ);
  edge_latency_.push_back(latency);
}

std::int32_t TaskGraph::add_collective(bool uses_sm) {
  const auto p = static_cast<std::int32_t>(phases_.size());
  collectives_.push_back({p, p, uses_sm});
  return static_cast<std::int32_t>(collectives_.size() - 1);
}

void TaskGraph::add_phase(TimePs latency) {
  const auto f = static_cast<std::int32_t>(flows_.size());
  phases_.push_back({latency, f, f});
  collectives_.back().phase_end = static_cast<std::int32_t>(phases_.size());
}

void TaskGraph::add_flow(double bytes, const RouteHop* hops, int n) {
  const auto h = static_cast<std::int32_t>(hops_.size());
  hops_.insert(hops_.end(), hops, hops + n);
  flows_.push_back({bytes, h, static_cast<std::int32_t>(hops_.size())});
  phases_.back().flow_end = static_cast<std::int32_t>(flows_.size());
}

void TaskGraph::add_flow(double bytes, const std::vector<RouteHop>& hops) {
  add_flow(bytes, hops.data(), static_cast<int>(hops.size()));
}

void TaskGraph::replace_flow(std::int32_t flow, double bytes, const std::vector<RouteHop>& hops) {
  FlowSpec& f = flows_[flow];
  f.bytes = bytes;
  f.hop_begin = static_cast<std::int32_t>(hops_.size());
  hops_.insert(hops_.end(), hops.begin(), hops.end());
  f.hop_end = static_cast<std::int32_t>(hops_.size());
}

void TaskGraph::add_initial_memory(int device, MemCategory c, double amount) {
  initial_memory_[static_cast<std::size_t>(device) * kNumMemCategories + static_cast<int>(c)] +=
      amount;
}

// Counting sort into CSR arrays keeps the insertion order inside each bucket (determinism).
static void bucket(std::size_t buckets, const std::vector<std::int32_t>& key,
                   std::vector<std::int32_t>& begin, std::vector<std::int32_t>& out) {
  begin.assign(buckets + 1, 0);
  for (std::int32_t k : key) ++begin[k + 1];
  for (std::size_t b = 0; b < buckets; ++b) begin[b + 1] += begin[b];
  std::vector<std::int32_t> fill(begin.begin(), begin.end() - 1);
  out.resize(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) out[fill[key[i]]++] = static_cast<std::int32_t>(i);
}

void TaskGraph::finalize() {
  const std::size_t n = tasks_.size();
  std::vector<std::int32_t> order;
  bucket(n, edge_pred_, succ_begin_, order);
  succ_.resize(order.size());
  succ_latency_.resize(order.size());
  num_preds_.assign(n, 0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    succ_[i] = edge_succ_[order[i]];
    succ_latency_[i] = edge_latency_[order[i]];
    ++num_preds_[succ_[i]];
  }
  std::vector<std::int32_t> stream_key(n);
  for (std::size_t i = 0; i < n; ++i)
    stream_key[i] = tasks_[i].device * kNumStreamKinds + static_cast<int>(tasks_[i].stream);
  bucket(static_cast<std::size_t>(num_devices_) * kNumStreamKinds, stream_key, stream_begin_,
         stream_tasks_);
  stream_pos_.resize(n);
  for (std::size_t s = 0; s + 1 < stream_begin_.size(); ++s)
    for (std::int32_t k = stream_begin_[s]; k < stream_begin_[s + 1]; ++k)
      stream_pos_[stream_tasks_[k]] = k;
  std::vector<std::int32_t> coll_key;
  std::vector<std::int32_t> comm_tasks;
  for (std::size_t i = 0; i < n; ++i) {
    if (tasks_[i].is_compute) continue;
    PW_ASSERT(tasks_[i].collective >= 0 &&
                  tasks_[i].collective < static_cast<std::int32_t>(collectives_.size()),
              "communication task without a collective");
    coll_key.push_back(tasks_[i].collective);
    comm_tasks.push_back(static_cast<std::int32_t>(i));
  }
  bucket(collectives_.size(), coll_key, part_begin_, part_);
  for (std::int32_t& p : part_) p = comm_tasks[p];
  // The edge lists live on in the successor arrays.
  std::vector<std::int32_t>().swap(edge_pred_);
  std::vector<std::int32_t>().swap(edge_succ_);
  std::vector<TimePs>().swap(edge_latency_);
}

}  // namespace pw::des
