#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace pw::des {

Engine::Engine(const std::vector<double>& link_bytes_per_sec) {
  net_.set_links(link_bytes_per_sec);
}

const EngineResult& Engine::run(const TaskGraph& g, const EngineOptions& opt) {
  g_ = &g;
  opt_ = opt;
  const std::size_t n = g.size();
  const int D = g.num_devices();
  q_.clear();
  // Events in flight follow the running tasks and flows, not the graph: the queue grows as needed.
  net_.reset();
  net_.defer_reshares(kFlowFlush);
  assign_huge(preds_left_, n, 0);
  std::copy(g.num_preds_.begin(), g.num_preds_.end(), preds_left_.begin());
  gen_.assign(D, 0);
  work_left_.assign(D, 0.0);
  work_since_.assign(D, 0);
  head_.assign(g.stream_begin_.begin(), g.stream_begin_.end() - 1);
  arrived_.assign(g.collectives_.size(), 0);
  phase_.assign(g.collectives_.size(), 0);
  flows_left_.assign(g.collectives_.size(), 0);
  running_compute_.assign(D, -1);
  sm_comm_.assign(D, 0);
  mem_ = g.initial_memory_;
  mem_total_.assign(D, 0.0);
  assign_huge(r_.start, n, TimePs{-1});
  assign_huge(r_.end, n, TimePs{-1});
  r_.device.assign(D, DeviceRun{});
  r_.events = 0;
  r_.memory.assign(opt.memory_timeline ? D : 0, {});
  constexpr TimePs kNever = std::numeric_limits<TimePs>::max();
  for (int d = 0; d < D; ++d) {
    for (int c = 0; c < kNumMemCategories; ++c) mem_total_[d] += mem_[d * kNumMemCategories + c];
    DeviceRun& dr = r_.device[d];
    dr.first_compute_start = kNever;
    dr.peak_total = mem_total_[d];
    for (int c = 0; c < kNumMemCategories; ++c)
      dr.peak_by_category[c] = dr.max_by_category[c] = mem_[d * kNumMemCategories + c];
    if (opt.memory_timeline) r_.memory[d].push_back({0, mem_total_[d]});
  }
  for (const auto& [b, end] : g.background_)
    net_.start_background(q_, kFlowEnd, g.hops_.data() + b, end - b);
  for (const std::int32_t t : g.initial_) try_start(t);

  while (!q_.empty()) {
    const Event e = q_.pop();
    ++r_.events;
    switch (static_cast<EventType>(e.type)) {
      case kTaskEnd:
        if (e.gen == gen_[g_->tasks_[e.target].device])
          end_task(static_cast<std::int32_t>(e.target));
        break;
      case kDepArrive:
        arrive(static_cast<std::int32_t>(e.target));
        break;
      case kFlowEnd:
        if (net_.finish(q_, kFlowEnd, e)) {
          const auto c = static_cast<std::int32_t>(net_.owner(e.target));
          if (--flows_left_[c] == 0) {
            ++phase_[c];
            start_phase(c);
          }
        }
        break;
      case kPhaseReady:
        start_flows(static_cast<std::int32_t>(e.target));
        break;
      case kFlowFlush:
        net_.flush(q_, kFlowEnd);
        break;
    }
  }

  TimePs first = kNever, last = 0;
  r_.completed = true;
  for (std::size_t t = 0; t < n; ++t) r_.completed = r_.completed && r_.end[t] >= 0;
  for (DeviceRun& dr : r_.device) {
    if (dr.first_compute_start == kNever) dr.first_compute_start = 0;
    first = std::min(first, dr.first_compute_start);
    last = std::max(last, dr.last_end);
  }
  r_.makespan = (D > 0 && last > first) ? last - first : 0;
  return r_;
}

void Engine::try_start(std::int32_t t) {
  if (r_.start[t] >= 0 || preds_left_[t] > 0) return;
  const Task& task = g_->tasks_[t];
  const int sid = task.device * kNumStreamKinds + static_cast<int>(task.stream);
  if (stream_is_ordered(task.stream) && g_->stream_tasks_[head_[sid]] != t) return;
  start_task(t);
}

void Engine::start_task(std::int32_t t) {
  const Task& task = g_->tasks_[t];
  r_.start[t] = q_.now();
  if (task.effect >= 0) {
    const MemoryEffect& m = g_->effects_[task.effect];
    if (m.mem_at_start != 0) apply_memory(task.device, task.mem_category, m.mem_at_start);
    if (m.buf_at_start != 0) apply_memory(task.device, MemCategory::kBuffers, m.buf_at_start);
  }
  if (task.is_compute) {
    DeviceRun& dr = r_.device[task.device];
    dr.first_compute_start = std::min(dr.first_compute_start, q_.now());
    const double rate = sm_comm_[task.device] > 0 ? 1.0 - opt_.comm_compute_slowdown : 1.0;
    work_left_[task.device] = static_cast<double>(task.duration);
    work_since_[task.device] = q_.now();
    running_compute_[task.device] = t;
    const TimePs dt = rate == 1.0 ? task.duration
                                  : static_cast<TimePs>(std::ceil(work_left_[task.device] / rate));
    q_.push(q_.now() + dt, kTaskEnd, static_cast<std::uint32_t>(t), gen_[task.device]);
    return;
  }
  const std::int32_t c = task.collective;
  const std::int32_t participants = g_->part_begin_[c + 1] - g_->part_begin_[c];
  if (++arrived_[c] == participants) {
    // A communication task's interval is its collective's: from the rendezvous to the end.
    for (std::int32_t k = g_->part_begin_[c]; k < g_->part_begin_[c + 1]; ++k) {
      r_.start[g_->part_[k]] = q_.now();
      if (g_->collectives_[c].uses_sm) set_sm_comm(g_->tasks_[g_->part_[k]].device, +1);
    }
    phase_[c] = g_->collectives_[c].phase_begin;
    start_phase(c);
  }
}

void Engine::start_phase(std::int32_t c) {
  if (phase_[c] >= g_->collectives_[c].phase_end) {
    end_collective(c);
    return;
  }
  const Phase& ph = g_->phases_[phase_[c]];
  if (ph.latency > 0) {
    q_.push(q_.now() + ph.latency, kPhaseReady, static_cast<std::uint32_t>(c));
  } else {
    start_flows(c);
  }
}

void Engine::start_flows(std::int32_t c) {
  const Phase& ph = g_->phases_[phase_[c]];
  flows_left_[c] = ph.flow_end - ph.flow_begin;
  if (flows_left_[c] == 0) {
    ++phase_[c];
    start_phase(c);
    return;
  }
  for (std::int32_t f = ph.flow_begin; f < ph.flow_end; ++f) {
    const FlowSpec& fs = g_->flows_[f];
    net_.start(q_, kFlowEnd, g_->hops_.data() + fs.hop_begin, fs.hop_end - fs.hop_begin, fs.bytes,
               static_cast<std::uint32_t>(c));
  }
}

void Engine::end_collective(std::int32_t c) {
  for (std::int32_t k = g_->part_begin_[c]; k < g_->part_begin_[c + 1]; ++k) {
    const std::int32_t t = g_->part_[k];
    if (g_->collectives_[c].uses_sm) set_sm_comm(g_->tasks_[t].device, -1);
    end_task(t);
  }
}

void Engine::end_task(std::int32_t t) {
  const Task& task = g_->tasks_[t];
  const TimePs now = q_.now();
  r_.end[t] = now;
  DeviceRun& dr = r_.device[task.device];
  dr.last_end = std::max(dr.last_end, now);
  if (task.is_compute) {
    dr.busy += now - r_.start[t];
    running_compute_[task.device] = -1;
  }
  if (task.effect >= 0) {
    const MemoryEffect& m = g_->effects_[task.effect];
    if (m.mem_at_end != 0) apply_memory(task.device, task.mem_category, m.mem_at_end);
    if (m.buf_at_end != 0) apply_memory(task.device, MemCategory::kBuffers, m.buf_at_end);
  }
  const int sid = task.device * kNumStreamKinds + static_cast<int>(task.stream);
  if (stream_is_ordered(task.stream)) {
    ++head_[sid];
    if (head_[sid] < g_->stream_begin_[sid + 1]) try_start(g_->stream_tasks_[head_[sid]]);
  }
  for (std::int32_t k = g_->succ_begin_[t]; k < g_->succ_begin_[t + 1]; ++k) {
    const TimePs lat = g_->succ_latency_.empty() ? 0 : g_->succ_latency_[k];
    if (lat > 0) {
      q_.push(now + lat, kDepArrive, static_cast<std::uint32_t>(g_->succ_[k]));
    } else {
      arrive(g_->succ_[k]);
    }
  }
}

void Engine::arrive(std::int32_t succ) {
  if (--preds_left_[succ] == 0) try_start(succ);
}

// A running compute task changes speed when SM-using communication starts or stops on its GPU:
// bank the work done at the old rate and reschedule its end (the old event becomes stale).
void Engine::set_sm_comm(int device, int delta) {
  const int before = sm_comm_[device];
  sm_comm_[device] += delta;
  const int after = sm_comm_[device];
  if (opt_.comm_compute_slowdown == 0 || (before > 0) == (after > 0)) return;
  const std::int32_t t = running_compute_[device];
  if (t < 0) return;
  const double slow = 1.0 - opt_.comm_compute_slowdown;
  const double old_rate = before > 0 ? slow : 1.0;
  const double new_rate = after > 0 ? slow : 1.0;
  const TimePs now = q_.now();
  double& left = work_left_[device];
  left = std::max(0.0, left - old_rate * static_cast<double>(now - work_since_[device]));
  work_since_[device] = now;
  ++gen_[device];
  q_.push(now + static_cast<TimePs>(std::ceil(left / new_rate)), kTaskEnd,
          static_cast<std::uint32_t>(t), gen_[device]);
}

void Engine::apply_memory(int device, MemCategory c, double delta) {
  mem_[device * kNumMemCategories + static_cast<int>(c)] += delta;
  mem_total_[device] += delta;
  DeviceRun& dr = r_.device[device];
  const double now_c = mem_[device * kNumMemCategories + static_cast<int>(c)];
  if (now_c > dr.max_by_category[static_cast<int>(c)])
    dr.max_by_category[static_cast<int>(c)] = now_c;
  if (mem_total_[device] > dr.peak_total) {
    dr.peak_total = mem_total_[device];
    for (int k = 0; k < kNumMemCategories; ++k)
      dr.peak_by_category[k] = mem_[device * kNumMemCategories + k];
  }
  if (opt_.memory_timeline) r_.memory[device].push_back({q_.now(), mem_total_[device]});
}

}  // namespace pw::des
