#include "sim/iteration_builder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "hwmodels/memory.h"

namespace pw::detail {
namespace {

using des::MemCategory;
using des::StreamKind;

// One (source, destination) pair as the pair table's key.
std::int64_t pair_key(int src, int dst) {
  return (static_cast<std::int64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
}

}  // namespace

IterationBuilder::IterationBuilder(const IterationInput& in, const IterationOptions& opt,
                                   bool timings)
    : in_(in),
      opt_(opt),
      timings_(timings),
      arrows_(opt.trace),
      topo_owned_(std::make_unique<hw::Topology>(in.topology)),
      topo_(*topo_owned_),
      gpu_(in.profile.gpu),
      dep_(build_dependency_graph(in.schedule)) {
  const ParallelConfig& par = in.parallel;
  layout_ = hw::rank_layout_of(par, in.topology.node.gpus_per_node);
  PW_ASSERT(layout_.num_ranks() <= topo_.num_gpus(), "more ranks than GPUs");
  PW_ASSERT(in.schedule.placement.num_devices == par.pipeline_parallel,
            "schedule devices differ from the pipeline size");
  wo_ = hw::workload_options(par, opt.flash_attention);
  const Placement& pl = in.schedule.placement;
  const int S = pl.num_stages();
  const int per_pipe = pl.stages_per_pipeline();
  for (int s = 0; s < S; ++s) {
    const StageInfo& st = pl.stages[s];
    const hw::StageRole role = hw::stage_role(st.index, per_pipe, par.mtp_standalone);
    costs_.push_back(hw::stage_costs(in.model, gpu_, wo_, st.layer_begin, st.layer_end, role));
    double expert = 0;
    stage_params_.push_back(hw::stage_parameter_count(in.model, wo_, st.layer_begin, st.layer_end,
                                                      role, par.pipeline_parallel, &expert));
    stage_expert_params_.push_back(expert);
    stage_layer_params_.push_back(hw::stage_parameter_count(
        in.model, wo_, st.layer_begin, st.layer_end, false, false, par.pipeline_parallel));
    if (par.zero_stage == 3 && par.zero3_gather != "stage") {
      std::vector<double> tensors;
      if (par.zero3_gather == "tensor")
        tensors = hw::stage_weight_tensors(in.model, wo_, st.layer_begin, st.layer_end, role,
                                           par.pipeline_parallel);
      stage_gathers_.push_back(hw::zero3_pass_gathers(par.zero3_gather, stage_params_.back(),
                                                      st.layer_end - st.layer_begin, tensors));
    }
  }
  stage_copies_.assign(S, {});
  for (int s = 0; s < S; ++s) {
    std::vector<int> devices;
    for (const StageInfo& o : pl.stages)
      if (o.index == pl.stages[s].index) devices.push_back(o.device);
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    if (devices.size() > 1) stage_copies_[s] = std::move(devices);
  }
  for (const Action& a : dep_.action) has_recompute_actions_ |= a.kind == ActionKind::kR;
  num_actions_ = dep_.size();
}

int IterationBuilder::sim_of(int tr, int dr, int pr) const {
  return sim_of_gpu_[layout_.gpu(tr, dr, pr)];
}

bool IterationBuilder::is_member_simulated(int member) const {
  return !opt_.representative || member == 0;
}

std::int32_t IterationBuilder::add_compute(int sim, TimePs dur, double mem_start, double mem_end,
                                           const Action& lab, MemCategory cat) {
  des::Task t;
  t.device = sim;
  t.stream = StreamKind::kCompute;
  t.is_compute = true;
  t.duration = dur;
  const std::vector<double>& slow = topo_.spec().gpu_slowdown;
  const int gpu = out_.ranks[sim].gpu;
  if (gpu < static_cast<int>(slow.size()) && slow[gpu] != 1.0)
    t.duration = static_cast<TimePs>(std::llround(static_cast<double>(dur) * slow[gpu]));
  t.mem_category = cat;
  out_.comm_kind.push_back(kComputeTag);
  if (arrows_) out_.flow_to.push_back(-1);
  return out_.graph.add_task(t, {mem_start, mem_end, 0, 0}, lab);
}

std::int32_t IterationBuilder::add_comm(int sim, StreamKind stream, std::int32_t coll,
                                        CommKind kind, const Action& lab) {
  des::Task t;
  t.device = sim;
  t.stream = stream;
  t.is_compute = false;
  t.collective = coll;
  out_.comm_kind.push_back(static_cast<std::uint8_t>(kind));
  if (arrows_) out_.flow_to.push_back(-1);
  return out_.graph.add_task(t, {}, lab);
}

int IterationBuilder::pair_of(int src, int dst) {
  const std::int64_t key = pair_key(src, dst);
  auto slot_of = [this](std::int64_t k) {
    const std::size_t mask = pair_key_.size() - 1;
    std::uint64_t h = static_cast<std::uint64_t>(k);  // splitmix64's finalizer: every bit mixes
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    std::size_t i = static_cast<std::size_t>(h ^ (h >> 31)) & mask;
    while (pair_key_[i] != kNoPair && pair_key_[i] != k) i = (i + 1) & mask;
    return i;
  };
  if (pair_key_.empty()) {
    pair_key_.assign(1024, kNoPair);
    pair_slot_id_.assign(1024, -1);
  }
  std::size_t i = slot_of(key);
  if (pair_key_[i] == key) return pair_slot_id_[i];
  const int id = static_cast<int>(pairs_.size());
  pairs_.push_back({src, dst});
  pair_latency_.push_back(-1);
  if (2 * pairs_.size() > pair_key_.size()) {  // grow: re-insert every pair, then this one
    pair_key_.assign(2 * pair_key_.size(), kNoPair);
    pair_slot_id_.assign(pair_key_.size(), -1);
    for (std::size_t q = 0; q < pairs_.size(); ++q) {
      const std::int64_t kq = pair_key(pairs_[q].first, pairs_[q].second);
      const std::size_t j = slot_of(kq);
      pair_key_[j] = kq;
      pair_slot_id_[j] = static_cast<int>(q);
    }
    return id;
  }
  pair_key_[i] = key;
  pair_slot_id_[i] = id;
  return id;
}

void IterationBuilder::add_flow(int src, int dst, double bytes) {
  if (opt_.free_communication || src == dst) return;
  out_.graph.add_pending_flow(bytes, pair_of(src, dst));
}

void IterationBuilder::add_point_phase(int src, int dst, double bytes) {
  if (opt_.free_communication) return;
  TimePs latency = 0;
  if (src != dst) {
    TimePs& cached = pair_latency_[pair_of(src, dst)];
    if (cached < 0) cached = topo_.path_info(src, dst).latency;
    latency = cached;
  }
  latency += in_.profile.collective_step_latency;
  // A calibrated send/recv size correction scales the transfer's latency and its bytes alike
  // (hwmodels' send/recv time, which the evaluator uses, carries the same factor).
  if (!in_.profile.collective_size_corrections.empty()) {
    const double c = hw::size_correction(in_.profile, hw::CollectiveKind::kSendRecv,
                                         topo_.node_of_gpu(src) != topo_.node_of_gpu(dst), bytes);
    latency = static_cast<TimePs>(std::llround(static_cast<double>(latency) * c));
    bytes *= c;
  }
  out_.graph.add_phase(latency);
  add_flow(src, dst, bytes);
}

void IterationBuilder::add_ring_step_phase(const std::vector<hw::TpComm>& comms, int steps,
                                           const std::vector<int>& group) {
  if (opt_.free_communication) return;
  // Each pair's messages as hwmodels times a send/recv between them (collective_steps: the
  // protocol, the size correction): their latencies in sequence, their bytes in one flow.
  const int n = static_cast<int>(group.size());
  TimePs latency = 0;
  std::vector<double> seconds(n, 0.0);
  for (int i = 0; i < n; ++i) {
    const std::vector<int> pair{group[i], group[(i + 1) % n]};
    TimePs pair_latency = 0;
    for (const hw::TpComm& c : comms) {
      PW_ASSERT(hw::is_cp_ring_step(c) && c.count % steps == 0,
                "a ring step is whole send/recv messages");
      const int msgs = c.count / steps;
      for (const hw::CollectiveStep& st :
           step_plan(hw::CollectiveKind::kSendRecv, c.bytes.value, pair).steps) {
        pair_latency += static_cast<TimePs>(msgs) * st.repeat * st.latency_hops * st.hop_latency;
        seconds[i] += msgs * st.repeat * st.bytes_per_rank.value / st.bandwidth.value;
      }
    }
    latency = std::max(latency, pair_latency);
  }
  out_.graph.add_phase(latency);
  // Negative: seconds at step bandwidth (see add_collective_phases).
  for (int i = 0; i < n; ++i)
    if (is_member_simulated(i)) add_flow(group[i], group[(i + 1) % n], -seconds[i]);
}

const IterationBuilder::StepPlan& IterationBuilder::step_plan(hw::CollectiveKind kind, double bytes,
                                                              const std::vector<int>& group) {
  const auto found = step_plans_.find(
      std::tuple<int, double, const std::vector<int>&>{static_cast<int>(kind), bytes, group});
  if (found != step_plans_.end()) return found->second;
  StepPlan& plan = step_plans_.try_emplace({static_cast<int>(kind), bytes, group}).first->second;
  const hw::GroupNetwork net = hw::describe_group(topo_, in_.profile, group);
  plan.steps = hw::collective_steps(kind, opt_.algorithm, Bytes{bytes}, net);
  const int n = static_cast<int>(group.size());
  std::vector<int> node(n), local(n);
  std::map<int, std::vector<int>> by_node;
  for (int i = 0; i < n; ++i) {
    node[i] = topo_.node_of_gpu(group[i]);
    local[i] = static_cast<int>(by_node[node[i]].size());
    by_node[node[i]].push_back(i);
  }
  std::vector<int> node_order;
  for (const auto& [nd, list] : by_node) node_order.push_back(nd);
  auto partner = [&](int i, hw::StepLinks links) {
    if (links == hw::StepLinks::kIntraNode) {
      const auto& list = by_node[node[i]];
      return list[(local[i] + 1) % list.size()];
    }
    if (links == hw::StepLinks::kInterNode) {
      const auto pos =
          std::find(node_order.begin(), node_order.end(), node[i]) - node_order.begin();
      const auto& next = by_node[node_order[(pos + 1) % node_order.size()]];
      return next[std::min<int>(local[i], static_cast<int>(next.size()) - 1)];
    }
    return (i + 1) % n;
  };
  plan.partner.resize(plan.steps.size() * n);
  for (std::size_t s = 0; s < plan.steps.size(); ++s)
    for (int i = 0; i < n; ++i) plan.partner[s * n + i] = partner(i, plan.steps[s].links);
  return plan;
}

// Each algorithm step becomes a phase: its latency, then one flow per simulated member to the
// partner its pattern names. Flow bytes are scaled so that an uncontended flow takes exactly the
// step time of the analytic model (bytes_per_rank / step bandwidth); contention then slows it.
void IterationBuilder::add_collective_phases(hw::CollectiveKind kind, double bytes, int count,
                                             const std::vector<int>& group, int only_member) {
  if (opt_.free_communication || group.size() < 2 || bytes <= 0) return;
  const StepPlan& plan = step_plan(kind, bytes, group);
  const int n = static_cast<int>(group.size());
  for (std::size_t s = 0; s < plan.steps.size(); ++s) {
    const hw::CollectiveStep& st = plan.steps[s];
    const TimePs lat = static_cast<TimePs>(st.repeat) * st.latency_hops * st.hop_latency * count;
    if (!st.overlaps_previous) out_.graph.add_phase(lat);
    const double per_rank = st.bytes_per_rank.value * st.repeat * count;
    for (int i = 0; i < n; ++i) {
      if (only_member >= 0 ? i != only_member : !is_member_simulated(i)) continue;
      if (st.pattern == hw::StepPattern::kPoint && i != 0) continue;
      const int j = plan.partner[s * n + i];
      if (j == i) continue;
      // Negative: seconds at step bandwidth, scaled at resolve time by the route's bottleneck
      // (see resolve_routes).
      add_flow(group[i], group[j], -(per_rank / st.bandwidth.value));
    }
  }
}

std::size_t IterationBuilder::CollKeyHash::operator()(const CollKey& k) const {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int v : k) h = (h ^ static_cast<std::uint32_t>(v)) * 0x100000001b3ull;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

std::int32_t IterationBuilder::keyed_collective(std::initializer_list<int> key, bool* fresh) {
  PW_ASSERT(key.size() < 6, "a collective key has at most 5 numbers");
  CollKey k{};
  std::copy(key.begin(), key.end(), k.begin());
  k[5] = static_cast<int>(key.size());
  auto [it, inserted] = coll_by_key_.try_emplace(k, 0);
  *fresh = inserted;
  if (inserted) it->second = out_.graph.add_collective(true);
  return it->second;
}

BuiltIteration IterationBuilder::build() {
  const int t = layout_.tp, d = layout_.dp, p = layout_.pp;
  sim_of_gpu_.assign(topo_.num_gpus(), -1);
  for (int pr = 0; pr < p; ++pr)
    for (int dr = 0; dr < d; ++dr)
      for (int tr = 0; tr < t; ++tr) {
        if (opt_.representative && (tr != 0 || dr != 0)) continue;
        const int g = layout_.gpu(tr, dr, pr);
        sim_of_gpu_[g] = static_cast<int>(out_.ranks.size());
        out_.ranks.push_back({g, tr, dr, pr});
      }
  const int R = static_cast<int>(out_.ranks.size());
  out_.graph.reset(R);
  if (timings_ || opt_.trace) out_.graph.keep_labels();
  // Each simulated rank holds the actions of its own pipeline rank.
  out_.action_offset.resize(R);
  std::int64_t slots = 0;
  for (int s = 0; s < R; ++s) {
    const int pr = out_.ranks[s].pr;
    out_.action_offset[s] = slots - dep_.device_begin[pr];
    slots += dep_.device_begin[pr + 1] - dep_.device_begin[pr];
  }
  pass_.assign(static_cast<std::size_t>(slots), PassTasks{});
  bucket_tasks_.assign(static_cast<std::size_t>(R) * in_.schedule.placement.num_stages(), {});
  last_compute_.assign(R, -1);
  stage_grads_ready_.assign(static_cast<std::size_t>(R) * in_.schedule.placement.num_stages(), -1);
  first_backward_.assign(R, -1);
  dp_tasks_.assign(R, {});
  step_waits_.assign(R, {});
  if (timings_) out_.action_send.assign(static_cast<std::size_t>(slots), -1);
  build_passes();
  build_transfers();
  build_data_parallel();
  build_embedding_sync();
  build_optimizer();
  resolve_routes();
  // Every GPU simulated and nothing kept that names tasks by id (labels, action map, arrows):
  // renumber the tasks for the engine's locality (TaskGraph::finalize) and re-key comm_kind.
  if (!opt_.representative && !out_.graph.has_labels() && !timings_ && !arrows_) {
    std::vector<std::int32_t> new_id;
    out_.graph.finalize(&new_id);
    des::ChunkedVector<std::uint8_t> kind;
    kind.append(new_id.size(), 0);
    for (std::size_t i = 0; i < new_id.size(); ++i) kind[new_id[i]] = out_.comm_kind[i];
    out_.comm_kind = std::move(kind);
  } else {
    out_.graph.finalize();
  }
  out_.num_actions = num_actions_;
  if (timings_) {
    out_.action_first.resize(pass_.size());
    out_.action_last.resize(pass_.size());
    for (std::size_t k = 0; k < pass_.size(); ++k) {
      out_.action_first[k] = pass_[k].first;
      out_.action_last[k] = pass_[k].last;
    }
  }
  out_.topology = std::move(topo_owned_);
  return std::move(out_);
}

}  // namespace pw::detail
