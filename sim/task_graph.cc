#include "sim/task_graph.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace pw::des {

void TaskGraph::reset(int num_devices) {
  num_devices_ = num_devices;
  tasks_.clear();
  labels_.clear();
  keep_labels_ = false;
  effects_.clear();
  edge_pred_.clear();
  edge_succ_.clear();
  edge_latency_.clear();
  has_latency_ = false;
  collectives_.clear();
  phases_.clear();
  flows_.clear();
  sealed_ = 0;
  shared_.clear();
  hops_.clear();
  background_.clear();
  initial_memory_.assign(static_cast<std::size_t>(num_devices) * kNumMemCategories, 0.0);
}

std::int32_t TaskGraph::add_task(const Task& t, const MemoryEffect& m, const Action& label) {
  PW_ASSERT(t.device >= 0 && t.device < num_devices_, "task device out of range");
  tasks_.push_back(t);
  if (keep_labels_) labels_.push_back(label);
  tasks_.back().effect = -1;
  const auto id = static_cast<std::int32_t>(tasks_.size() - 1);
  add_effect(id, m);
  return id;
}

void TaskGraph::add_effect(std::int32_t id, const MemoryEffect& delta) {
  if (delta.empty()) return;
  Task& t = tasks_[id];
  if (t.effect < 0) {
    t.effect = static_cast<std::int32_t>(effects_.size());
    effects_.push_back({});
  }
  MemoryEffect& m = effects_[t.effect];
  m.mem_at_start += delta.mem_at_start;
  m.mem_at_end += delta.mem_at_end;
  m.buf_at_start += delta.buf_at_start;
  m.buf_at_end += delta.buf_at_end;
}

void TaskGraph::add_dep(std::int32_t pred, std::int32_t succ, TimePs latency) {
  // Latencies are stored once one is not zero (the iteration builder never sets one).
  if (latency != 0 && !has_latency_) {
    edge_latency_.append(edge_pred_.size(), 0);
    has_latency_ = true;
  }
  edge_pred_.push_back(pred);
  edge_succ_.push_back(succ);
  if (has_latency_) edge_latency_.push_back(latency);
}

namespace {

constexpr std::int32_t kPendingRoute = -1;  // FlowSpec::hop_end of a flow not routed yet

std::uint64_t mix(std::uint64_t h, std::uint64_t x) { return (h ^ x) * 0x100000001b3ull; }

}  // namespace

void TaskGraph::seal_last_collective() {
  const auto n = static_cast<std::int32_t>(collectives_.size());
  if (sealed_ >= n) return;
  sealed_ = n;
  const std::int32_t c = n - 1;
  const Collective& last = collectives_[c];
  if (last.phase_begin == last.phase_end) return;
  // Its phases and flows are the last ones stored (phases and flows go to the last collective).
  auto flow_hash = [](std::uint64_t h, const FlowSpec& f) {
    h = mix(h, std::bit_cast<std::uint64_t>(f.bytes));
    return mix(h, (static_cast<std::uint64_t>(static_cast<std::uint32_t>(f.hop_begin)) << 32) ^
                      static_cast<std::uint32_t>(f.hop_end));
  };
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::int32_t p = last.phase_begin; p < last.phase_end; ++p) {
    const Phase& ph = phases_[p];
    h = mix(mix(h, static_cast<std::uint64_t>(ph.latency)),
            static_cast<std::uint64_t>(ph.flow_end - ph.flow_begin));
    for (std::int32_t f = ph.flow_begin; f < ph.flow_end; ++f) h = flow_hash(h, flows_[f]);
  }
  auto equal = [&](const Collective& a) {
    if (a.phase_end - a.phase_begin != last.phase_end - last.phase_begin) return false;
    for (std::int32_t k = 0; k < a.phase_end - a.phase_begin; ++k) {
      const Phase &x = phases_[a.phase_begin + k], &y = phases_[last.phase_begin + k];
      if (x.latency != y.latency || x.flow_end - x.flow_begin != y.flow_end - y.flow_begin)
        return false;
      for (std::int32_t f = 0; f < x.flow_end - x.flow_begin; ++f) {
        const FlowSpec &u = flows_[x.flow_begin + f], &v = flows_[y.flow_begin + f];
        if (u.bytes != v.bytes || u.hop_begin != v.hop_begin || u.hop_end != v.hop_end)
          return false;
      }
    }
    return true;
  };
  const auto [lo, hi] = shared_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const Collective& earlier = collectives_[it->second];
    if (!equal(earlier)) continue;
    flows_.truncate(static_cast<std::size_t>(phases_[last.phase_begin].flow_begin));
    phases_.truncate(static_cast<std::size_t>(last.phase_begin));
    collectives_[c].phase_begin = earlier.phase_begin;
    collectives_[c].phase_end = earlier.phase_end;
    return;
  }
  shared_.emplace(h, c);
}

std::int32_t TaskGraph::add_collective(bool uses_sm) {
  seal_last_collective();
  const auto p = static_cast<std::int32_t>(phases_.size());
  collectives_.push_back({p, p, uses_sm});
  return static_cast<std::int32_t>(collectives_.size() - 1);
}

void TaskGraph::add_phase(TimePs latency) {
  PW_ASSERT(sealed_ < static_cast<std::int32_t>(collectives_.size()),
            "a phase needs an open collective");
  const auto f = static_cast<std::int32_t>(flows_.size());
  phases_.push_back({latency, f, f});
  collectives_.back().phase_end = static_cast<std::int32_t>(phases_.size());
}

void TaskGraph::add_flow(double bytes, const RouteHop* hops, int n) {
  PW_ASSERT(!phases_.empty() && sealed_ < static_cast<std::int32_t>(collectives_.size()),
            "a flow needs a phase of an open collective");
  const auto h = static_cast<std::int32_t>(hops_.size());
  hops_.insert(hops_.end(), hops, hops + n);
  flows_.push_back({bytes, h, static_cast<std::int32_t>(hops_.size())});
  phases_.back().flow_end = static_cast<std::int32_t>(flows_.size());
}

void TaskGraph::add_flow(double bytes, const std::vector<RouteHop>& hops) {
  add_flow(bytes, hops.data(), static_cast<int>(hops.size()));
}

void TaskGraph::add_background_flow(std::int32_t hop_begin, std::int32_t hop_end) {
  PW_ASSERT(
      hop_begin >= 0 && hop_begin <= hop_end && hop_end <= static_cast<std::int32_t>(hops_.size()),
      "background route out of range");
  background_.push_back({hop_begin, hop_end});
}

std::int32_t TaskGraph::add_route(const std::vector<RouteHop>& hops) {
  const auto h = static_cast<std::int32_t>(hops_.size());
  hops_.insert(hops_.end(), hops.begin(), hops.end());
  return h;
}

void TaskGraph::add_pending_flow(double bytes, std::int32_t route_key) {
  PW_ASSERT(!phases_.empty() && sealed_ < static_cast<std::int32_t>(collectives_.size()),
            "a flow needs a phase of an open collective");
  PW_ASSERT(route_key >= 0, "a pending flow needs a route key");
  flows_.push_back({bytes, route_key, kPendingRoute});
  phases_.back().flow_end = static_cast<std::int32_t>(flows_.size());
}

void TaskGraph::resolve_pending_flows(const std::vector<std::int32_t>& hop_begin,
                                      const std::vector<std::int32_t>& hop_end,
                                      const std::vector<double>& scale) {
  seal_last_collective();
  for (std::size_t f = 0; f < flows_.size(); ++f) {
    FlowSpec& fs = flows_[f];
    if (fs.hop_end != kPendingRoute) continue;
    const auto k = static_cast<std::size_t>(fs.hop_begin);
    PW_ASSERT(k < hop_begin.size() && k < hop_end.size() && k < scale.size() && hop_begin[k] >= 0 &&
                  hop_begin[k] <= hop_end[k] &&
                  hop_end[k] <= static_cast<std::int32_t>(hops_.size()),
              "pending flow route out of range");
    fs = {fs.bytes >= 0 ? fs.bytes : -fs.bytes * scale[k], hop_begin[k], hop_end[k]};
  }
}

void TaskGraph::add_initial_memory(int device, MemCategory c, double amount) {
  initial_memory_[static_cast<std::size_t>(device) * kNumMemCategories + static_cast<int>(c)] +=
      amount;
}

// Counting sort into CSR arrays keeps the insertion order inside each bucket (determinism).
template <class Keys>
static void bucket(std::size_t buckets, const Keys& key, std::vector<std::int32_t>& begin,
                   std::vector<std::int32_t>& out) {
  assign_huge(begin, buckets + 1, 0);
  for (std::size_t i = 0; i < key.size(); ++i) ++begin[key[i] + 1];
  for (std::size_t b = 0; b < buckets; ++b) begin[b + 1] += begin[b];
  std::vector<std::int32_t> fill;
  assign_huge(fill, buckets, 0);
  std::copy(begin.begin(), begin.end() - 1, fill.begin());
  assign_huge(out, key.size(), 0);
  for (std::size_t i = 0; i < key.size(); ++i) out[fill[key[i]]++] = static_cast<std::int32_t>(i);
}

// Round robin over the devices by position: each device's k-th task (all its streams counted
// together, in insertion order), device by device, then every device's (k+1)-th. A device's tasks
// keep their relative order, so every stream's order is unchanged.
static std::vector<std::int32_t> locality_order(const ChunkedVector<Task>& tasks, int devices) {
  const std::size_t n = tasks.size();
  std::vector<std::int32_t> id;
  assign_huge(id, n, 0);
  std::vector<std::int32_t> pos(static_cast<std::size_t>(devices), 0);
  std::int32_t longest = 0;
  for (std::size_t t = 0; t < n; ++t) {
    id[t] = pos[tasks[t].device]++;
    longest = std::max(longest, id[t] + 1);
  }
  std::vector<std::int64_t> at(static_cast<std::size_t>(longest) + 1, 0);
  for (std::size_t t = 0; t < n; ++t) ++at[id[t] + 1];
  for (std::int32_t k = 0; k < longest; ++k) at[k + 1] += at[k];
  for (std::size_t t = 0; t < n; ++t) id[t] = static_cast<std::int32_t>(at[id[t]]++);
  return id;
}

void TaskGraph::finalize(std::vector<std::int32_t>* renumbered) {
  seal_last_collective();
  std::unordered_multimap<std::uint64_t, std::int32_t>().swap(shared_);
  for (std::size_t f = 0; f < flows_.size(); ++f)
    PW_ASSERT(flows_[f].hop_end != kPendingRoute, "a flow's route was never resolved");
  const std::size_t n = tasks_.size();
  // new_id[old]; empty: ids stay as added.
  std::vector<std::int32_t> new_id;
  if (renumbered) {
    PW_ASSERT(!keep_labels_, "a graph with labels keeps its task ids");
    new_id = locality_order(tasks_, num_devices_);
    for (std::size_t e = 0; e < edge_pred_.size(); ++e) {
      edge_pred_[e] = new_id[edge_pred_[e]];
      edge_succ_[e] = new_id[edge_succ_[e]];
    }
  }
  auto id_of = [&](std::size_t old) {
    return new_id.empty() ? static_cast<std::int32_t>(old) : new_id[old];
  };
  std::vector<std::int32_t> order;
  bucket(n, edge_pred_, succ_begin_, order);
  assign_huge(succ_, order.size(), 0);
  succ_latency_.assign(has_latency_ ? order.size() : 0, 0);
  assign_huge(num_preds_, n, 0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    succ_[i] = edge_succ_[order[i]];
    if (has_latency_) succ_latency_[i] = edge_latency_[order[i]];
    ++num_preds_[succ_[i]];
  }
  std::vector<std::int32_t>().swap(order);
  edge_pred_.clear();
  edge_succ_.clear();
  edge_latency_.clear();
  has_latency_ = false;
  // The engine starts the tasks without predecessors in the order they were added (equal-time
  // events then keep their order whatever the numbering), and collectives list their
  // participants in that order too.
  initial_.clear();
  std::vector<std::int32_t> coll_key;
  std::vector<std::int32_t> comm_tasks;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t id = id_of(i);
    if (num_preds_[id] == 0) initial_.push_back(id);
    if (tasks_[i].is_compute) continue;
    PW_ASSERT(tasks_[i].collective >= 0 &&
                  tasks_[i].collective < static_cast<std::int32_t>(collectives_.size()),
              "communication task without a collective");
    coll_key.push_back(tasks_[i].collective);
    comm_tasks.push_back(id);
  }
  bucket(collectives_.size(), coll_key, part_begin_, part_);
  for (std::int32_t& p : part_) p = comm_tasks[p];
  std::vector<std::int32_t>().swap(coll_key);
  std::vector<std::int32_t>().swap(comm_tasks);
  if (!new_id.empty()) {
    ChunkedVector<Task> moved;
    moved.append(n, Task{});
    for (std::size_t i = 0; i < n; ++i) moved[new_id[i]] = tasks_[i];
    tasks_ = std::move(moved);
  }
  std::vector<std::int32_t> stream_key;
  assign_huge(stream_key, n, 0);
  for (std::size_t i = 0; i < n; ++i)
    stream_key[i] = tasks_[i].device * kNumStreamKinds + static_cast<int>(tasks_[i].stream);
  bucket(static_cast<std::size_t>(num_devices_) * kNumStreamKinds, stream_key, stream_begin_,
         stream_tasks_);
  if (renumbered) *renumbered = std::move(new_id);
}

}  // namespace pw::des
