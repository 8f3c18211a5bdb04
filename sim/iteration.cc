#include "sim/iteration.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "core/error.h"
#include "hwmodels/transformer.h"
#include "sim/engine.h"
#include "sim/iteration_builder.h"

namespace pw {
namespace {

using detail::BuiltIteration;
using detail::kComputeTag;

struct Interval {
  TimePs begin, end;
};

bool by_begin(const Interval& x, const Interval& y) {
  return x.begin < y.begin || (x.begin == y.begin && x.end < y.end);
}

// Sorts `a` by begin (then end). The lists gathered here are mostly in order already (a
// stream's tasks as they ran), so the check usually saves the sort.
void sort_by_begin(std::vector<Interval>& a) {
  if (!std::is_sorted(a.begin(), a.end(), by_begin)) std::sort(a.begin(), a.end(), by_begin);
}

// Measure of the union of `a` clipped to [lo, hi] (`a` is sorted by begin on return).
TimePs covered_within(std::vector<Interval>& a, TimePs lo, TimePs hi) {
  sort_by_begin(a);
  TimePs total = 0, reach = lo;
  for (const Interval& x : a) {
    const TimePs b = std::max(x.begin, reach), e = std::min(x.end, hi);
    if (e > b) {
      total += e - b;
      reach = e;
    }
  }
  return total;
}

// The union of `cover` as disjoint intervals in order (`cover` is sorted by begin on return).
void merge_cover(std::vector<Interval>& cover, std::vector<Interval>* merged) {
  sort_by_begin(cover);
  merged->clear();
  for (const Interval& c : cover) {
    if (!merged->empty() && c.begin <= merged->back().end) {
      merged->back().end = std::max(merged->back().end, c.end);
    } else {
      merged->push_back(c);
    }
  }
}

// Measure of the union of `a` minus `merged` (merge_cover's disjoint intervals; `a` is sorted
// by begin on return).
TimePs uncovered(std::vector<Interval>& a, const std::vector<Interval>& merged) {
  sort_by_begin(a);
  TimePs total = 0, reach = std::numeric_limits<TimePs>::min();
  std::size_t k = 0;
  for (const Interval& x : a) {
    TimePs b = std::max(x.begin, reach);
    if (b >= x.end) continue;
    reach = x.end;
    while (k < merged.size() && merged[k].end <= b) ++k;
    for (std::size_t j = k; j < merged.size() && merged[j].begin < x.end && b < x.end; ++j) {
      if (merged[j].begin > b) total += merged[j].begin - b;
      b = std::max(b, merged[j].end);
    }
    if (b < x.end) total += x.end - b;
  }
  return total;
}

const char* stream_name(des::StreamKind s) {
  switch (s) {
    case des::StreamKind::kCompute:
      return "compute";
    case des::StreamKind::kTp:
      return "tp";
    case des::StreamKind::kPpSend:
      return "pp send";
    case des::StreamKind::kPpRecv:
      return "pp recv";
    case des::StreamKind::kDp:
      return "dp";
    case des::StreamKind::kHost:
      return "host (offload)";
    case des::StreamKind::kDpGather:
      return "dp gather";
  }
  return "?";
}

void fill_trace(const BuiltIteration& b, const des::EngineResult& er, Trace* tr) {
  const des::TaskGraph& g = b.graph;
  const int R = static_cast<int>(b.ranks.size());
  tr->process_names.clear();
  tr->thread_names.assign(R, {});
  for (const detail::SimRank& r : b.ranks)
    tr->process_names.push_back(
        fmt::format("GPU {} (pp {}, tp {}, dp {})", r.gpu, r.pr, r.tr, r.dr));
  // Tasks per (device, stream), in start order; lanes keep slices on one thread disjoint.
  std::vector<std::vector<std::int32_t>> per(static_cast<std::size_t>(R) * des::kNumStreamKinds);
  for (std::size_t t = 0; t < g.size(); ++t) {
    const des::Task& task = g.task(static_cast<std::int32_t>(t));
    if (er.end[t] <= er.start[t]) continue;
    per[static_cast<std::size_t>(task.device) * des::kNumStreamKinds +
        static_cast<int>(task.stream)]
        .push_back(static_cast<std::int32_t>(t));
  }
  std::vector<std::int32_t> tid_of(g.size(), 0);
  std::vector<std::int32_t> slice_of(g.size(), -1);
  for (int d = 0; d < R; ++d) {
    for (int s = 0; s < des::kNumStreamKinds; ++s) {
      auto& list = per[static_cast<std::size_t>(d) * des::kNumStreamKinds + s];
      std::stable_sort(list.begin(), list.end(),
                       [&](std::int32_t x, std::int32_t y) { return er.start[x] < er.start[y]; });
      std::vector<TimePs> lane_end;
      const int first_tid = static_cast<int>(tr->thread_names[d].size());
      for (std::int32_t t : list) {
        std::size_t lane = 0;
        while (lane < lane_end.size() && lane_end[lane] > er.start[t]) ++lane;
        if (lane == lane_end.size()) lane_end.push_back(0);
        lane_end[lane] = er.end[t];
        tid_of[t] = first_tid + static_cast<int>(lane);
      }
      for (std::size_t l = 0; l < lane_end.size(); ++l) {
        const char* name = stream_name(static_cast<des::StreamKind>(s));
        tr->thread_names[d].push_back(l == 0 ? std::string(name)
                                             : fmt::format("{} #{}", name, l + 1));
      }
    }
  }
  tr->slices.clear();
  for (std::size_t t = 0; t < g.size(); ++t) {
    if (er.end[t] <= er.start[t]) continue;
    const des::Task& task = g.task(static_cast<std::int32_t>(t));
    TraceSlice sl;
    sl.pid = task.device;
    sl.tid = tid_of[t];
    const Action& a = g.label(static_cast<std::int32_t>(t));
    sl.name = a.microbatch >= 0 ? fmt::format("{}{}", action_kind_name(a.kind), a.microbatch)
                                : std::string(action_kind_name(a.kind));
    sl.category = b.comm_kind[t] == kComputeTag
                      ? "compute"
                      : comm_kind_name(static_cast<CommKind>(b.comm_kind[t]));
    sl.start = er.start[t];
    sl.duration = er.end[t] - er.start[t];
    sl.stage = a.stage;
    sl.microbatch = a.microbatch;
    slice_of[t] = static_cast<std::int32_t>(tr->slices.size());
    tr->slices.push_back(std::move(sl));
  }
  std::int32_t next_flow = 0;
  for (std::size_t t = 0; t < g.size(); ++t) {
    const std::int32_t to = b.flow_to[t];
    if (to < 0 || slice_of[t] < 0 || slice_of[to] < 0) continue;
    TraceSlice& in = tr->slices[slice_of[to]];
    if (in.flow_in >= 0) continue;
    tr->slices[slice_of[t]].flow_out = next_flow;
    in.flow_in = next_flow++;
  }
  tr->counters.clear();
  for (int d = 0; d < R && d < static_cast<int>(er.memory.size()); ++d) {
    const auto& m = er.memory[d];
    for (std::size_t k = 0; k < m.size(); ++k) {
      if (k + 1 < m.size() && m[k + 1].time == m[k].time) continue;  // keep the last per time
      tr->counters.push_back({d, "memory (GB)", m[k].time, m[k].total / 1e9});
    }
  }
}

// The link saturated longest in each tier of the cluster (in node, GPU-NIC, NIC-leaf,
// leaf-spine, host), named, longest first: which tier bounds the iteration, and where. Links past
// the topology's are the per-GPU host links of optimizer offload (host -> GPU, GPU -> host per
// simulated rank).
std::vector<LinkLoad> busiest_links(const detail::BuiltIteration& b, const des::FlowNetwork& net,
                                    TimePs end) {
  const hw::Topology& topo = *b.topology;
  auto before = [&](std::int32_t x, std::int32_t y) {
    const TimePs sx = net.link_saturated(x, end), sy = net.link_saturated(y, end);
    if (sx != sy) return sx > sy;
    if (net.link_bytes()[x] != net.link_bytes()[y])
      return net.link_bytes()[x] > net.link_bytes()[y];
    return x < y;
  };
  // Tiers: the topology's link roles, then the host links.
  constexpr int kHost = static_cast<int>(hw::LinkRole::kLeafToSpine) + 1;
  std::array<std::int32_t, kHost + 1> best;
  best.fill(-1);
  for (std::int32_t l = 0; l < net.num_links(); ++l) {
    if (net.link_saturated(l, end) <= 0) continue;
    const int tier = static_cast<std::size_t>(l) < topo.num_links()
                         ? static_cast<int>(topo.link_role(static_cast<hw::LinkId>(l)))
                         : kHost;
    if (best[tier] < 0 || before(l, best[tier])) best[tier] = l;
  }
  std::vector<std::int32_t> top;
  for (const std::int32_t l : best)
    if (l >= 0) top.push_back(l);
  std::sort(top.begin(), top.end(), before);
  std::vector<LinkLoad> out;
  for (const std::int32_t l : top) {
    LinkLoad ll;
    if (static_cast<std::size_t>(l) < topo.num_links()) {
      ll.name = topo.link_name(static_cast<hw::LinkId>(l));
      ll.role = hw::link_role_name(topo.link_role(static_cast<hw::LinkId>(l)));
    } else {
      const std::size_t k = static_cast<std::size_t>(l) - topo.num_links();
      const int gpu = b.ranks[k / 2].gpu;
      ll.name = k % 2 == 0 ? fmt::format("host -> gpu{}", gpu) : fmt::format("gpu{} -> host", gpu);
      ll.role = "host";
    }
    ll.saturated = net.link_saturated(l, end);
    ll.bytes = net.link_bytes()[l];
    ll.capacity = b.link_capacity[l];
    out.push_back(std::move(ll));
  }
  return out;
}

}  // namespace

const char* comm_kind_name(CommKind k) {
  switch (k) {
    case CommKind::kTp:
      return "tp";
    case CommKind::kPp:
      return "pp";
    case CommKind::kDp:
      return "dp";
    case CommKind::kOffload:
      return "offload";
    case CommKind::kCp:
      return "cp";
    case CommKind::kEp:
      return "ep";
  }
  return "?";
}

IterationResult simulate_iteration(const IterationInput& in, const IterationOptions& opt) {
  return simulate_iteration(in, opt, nullptr);
}

IterationResult simulate_iteration(const IterationInput& in, const IterationOptions& opt,
                                   std::vector<ActionTiming>* timings) {
  IterationOptions o = opt;
  if (!in.topology.symmetric()) o.representative = false;
  // The builder's lookup tables go before the engine allocates its per-task state.
  BuiltIteration b = detail::IterationBuilder(in, o, timings != nullptr).build();
  des::Engine engine(b.link_capacity);
  des::EngineOptions eo;
  eo.comm_compute_slowdown = opt.free_communication ? 0.0 : opt.comm_compute_slowdown;
  eo.memory_timeline = opt.trace;
  const des::EngineResult& er = engine.run(b.graph, eo);
  PW_ASSERT(er.completed, "the iteration's task graph did not run to completion");

  IterationResult res;
  res.iteration = er.makespan;
  res.simulated_gpus = static_cast<int>(b.ranks.size());
  // The busiest simulated GPU (most compute; the first on a tie): it sets the ideal time.
  int busiest = 0;
  for (int d = 1; d < res.simulated_gpus; ++d)
    if (er.device[d].busy > er.device[busiest].busy) busiest = d;
  if (res.simulated_gpus > 0) {
    const detail::SimRank& sr = b.ranks[busiest];
    res.busiest_gpu = sr.gpu;
    res.busiest_tp = sr.tr;
    res.busiest_dp = sr.dr;
    res.busiest_pp = sr.pr;
    res.busiest_busy = er.device[busiest].busy;
  }
  TimePs last_end = 0;
  for (const des::DeviceRun& dr : er.device) last_end = std::max(last_end, dr.last_end);
  res.busiest_links = busiest_links(b, engine.network(), last_end);
  res.events = er.events;
  res.tasks = b.graph.size();
  res.offload_gpu_share = b.offload_gpu_share;
  const ParallelConfig& par = in.parallel;
  const double n = static_cast<double>(par.num_gpus());

  const double secs = ps_to_seconds(res.iteration);
  const hw::IterationFlops fl = hw::iteration_flops(
      in.model, hw::workload_options(par, opt.flash_attention), par.global_batch_size);
  const double peak = in.profile.gpu.peak_flops[static_cast<int>(hw::DType::kBf16)];
  if (secs > 0) {
    res.tokens_per_sec = static_cast<double>(par.global_batch_size) * in.model.seq_length / secs;
    res.tflops_per_gpu = fl.hardware / n / secs / 1e12;
    res.model_tflops_per_gpu = fl.model / n / secs / 1e12;
    res.hfu = peak > 0 ? res.tflops_per_gpu * 1e12 / peak : 0;
    res.mfu = peak > 0 ? res.model_tflops_per_gpu * 1e12 / peak : 0;
    res.mfu_causal = peak > 0 ? fl.model_causal / n / secs / peak : 0;
  }
  // Bubbles over the compute streams (evaluator conventions), exposed communication per kind.
  // One GPU at a time: its intervals are gathered from its streams, measured and dropped.
  TimePs span = 0, busy = 0;
  const int R = res.simulated_gpus;
  // Idle time of the busiest GPU spent on exposed communication: inside its compute span,
  // covered by communication but not by compute.
  TimePs comm_idle = 0;
  std::vector<Interval> compute, compute_union;
  std::array<std::vector<Interval>, kNumCommKinds> comm;
  for (int d = 0; d < R; ++d) {
    compute.clear();
    for (auto& c : comm) c.clear();
    TimePs last_compute = 0;
    for (int s = 0; s < des::kNumStreamKinds; ++s)
      for (const std::int32_t t : b.graph.stream_tasks(d, static_cast<des::StreamKind>(s))) {
        if (er.end[t] <= er.start[t]) continue;
        if (b.comm_kind[t] == kComputeTag) {
          compute.push_back({er.start[t], er.end[t]});
          last_compute = std::max(last_compute, er.end[t]);
        } else {
          comm[b.comm_kind[t]].push_back({er.start[t], er.end[t]});
        }
      }
    span = std::max(span, last_compute - er.device[d].first_compute_start);
    busy = std::max(busy, er.device[d].busy);
    if (d == busiest) {
      std::vector<Interval> active = compute;
      for (const auto& c : comm) active.insert(active.end(), c.begin(), c.end());
      const TimePs lo = er.device[d].first_compute_start, hi = last_compute;
      if (hi > lo) comm_idle = covered_within(active, lo, hi) - covered_within(compute, lo, hi);
    }
    TimePs exposed_here = 0;
    merge_cover(compute, &compute_union);  // once per GPU, for every kind
    for (int k = 0; k < kNumCommKinds; ++k) {
      const TimePs e = uncovered(comm[k], compute_union);
      res.exposed[k] += e;
      exposed_here += e;
    }
    if (d == 0 || exposed_here > res.exposed_most) {
      const detail::SimRank& sr = b.ranks[d];
      res.exposed_gpu = sr.gpu;
      res.exposed_tp = sr.tr;
      res.exposed_dp = sr.dr;
      res.exposed_pp = sr.pr;
      res.exposed_most = exposed_here;
    }
  }
  for (TimePs& e : res.exposed) e /= std::max(R, 1);
  res.pipeline_bubble_rate =
      span > 0 ? static_cast<double>(std::max<TimePs>(0, span - busy - comm_idle)) /
                     static_cast<double>(span)
               : 0;
  res.bubble_rate = span > 0 ? static_cast<double>(span - busy) / static_cast<double>(span) : 0;
  res.bubble_fraction = busy > 0 ? static_cast<double>(span - busy) / static_cast<double>(busy) : 0;
  const double capacity = in.profile.gpu.usable_memory().value;
  for (int d = 0; d < R; ++d) {
    const des::DeviceRun& dr = er.device[d];
    DeviceMemory m;
    m.gpu = b.ranks[d].gpu;
    m.pipeline_rank = b.ranks[d].pr;
    m.weights = dr.peak_by_category[0];
    m.grads = dr.peak_by_category[1];
    m.optimizer = dr.peak_by_category[2];
    m.activations = dr.peak_by_category[3];
    m.buffers = dr.peak_by_category[4];
    m.peak = dr.peak_total;
    m.activation_peak = dr.max_by_category[3];
    m.capacity = capacity;
    m.fits = m.peak <= capacity;
    res.fits = res.fits && m.fits;
    res.worst_overflow = std::max(res.worst_overflow, m.peak - capacity);
    res.memory.push_back(m);
  }
  res.worst_overflow = std::max(0.0, res.worst_overflow);
  if (opt.trace) fill_trace(b, er, &res.trace);
  if (timings) detail::action_timings(in.schedule, b, er, timings);
  return res;
}

}  // namespace pw
