#include "sim/flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace pw::des {

void FlowNetwork::set_links(const std::vector<double>& bytes_per_sec) {
  capacity_.resize(bytes_per_sec.size());
  for (std::size_t l = 0; l < bytes_per_sec.size(); ++l) {
    PW_ASSERT(bytes_per_sec[l] > 0, "link capacity must be positive");
    capacity_[l] = bytes_per_sec[l] * 1e-12;
  }
  link_flows_.assign(capacity_.size(), {});
  link_mark_.assign(capacity_.size(), 0);
  link_flushed_.assign(capacity_.size(), 0);
  residual_.assign(capacity_.size(), 0.0);
  weight_sum_.assign(capacity_.size(), 0.0);
  reset();
}

void FlowNetwork::reset() {
  for (auto& v : link_flows_) v.clear();
  flows_.clear();
  free_.clear();
  started_ = 0;
  flow_mark_.clear();
  comp_index_.clear();
  std::fill(link_mark_.begin(), link_mark_.end(), 0);
  mark_ = 0;
  flush_queued_ = false;
  pending_links_.clear();
  std::fill(link_flushed_.begin(), link_flushed_.end(), 0);
  flush_epoch_ = 0;
  link_bytes_.assign(capacity_.size(), 0.0);
  link_sat_total_.assign(capacity_.size(), 0);
  link_sat_since_.assign(capacity_.size(), -1);
}

std::uint32_t FlowNetwork::start(EventQueue& q, std::uint8_t event_type, const RouteHop* route,
                                 int hops, double bytes, std::uint32_t owner) {
  ++started_;
  std::uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
    comp_index_.push_back(0);
  }
  Flow& f = flows_[id];
  f.remaining = bytes;
  f.rate = 0;
  f.last = q.now();
  f.route = route;
  f.hops = hops;
  f.owner = owner;
  f.background = false;
  f.active = hops > 0 && bytes > 0;
  if (!f.active) {
    q.push(q.now(), event_type, id, f.gen);
    return id;
  }
  bool alone = true;  // no other flow on any of its links, no link twice on its route
  for (int k = 0; k < hops; ++k) {
    link_flows_[route[k].link].push_back(id);
    link_bytes_[route[k].link] += bytes * route[k].weight;
    alone = alone && link_flows_[route[k].link].size() == 1;
  }
  if (alone) {
    start_alone(q, event_type, id);
  } else if (flush_event_ != kImmediate) {
    defer(q, route, hops);  // rate 0 until this instant's flush
  } else {
    collect_component(id, false);
    reshare(q, event_type);
  }
  return id;
}

void FlowNetwork::defer(EventQueue& q, const RouteHop* route, int hops) {
  for (int k = 0; k < hops; ++k) pending_links_.push_back(route[k].link);
  if (!flush_queued_) {
    q.push(q.now(), flush_event_, 0, 0);
    flush_queued_ = true;
  }
}

void FlowNetwork::flush(EventQueue& q, std::uint8_t event_type) {
  flush_queued_ = false;
  ++flush_epoch_;
  const TimePs now = q.now();
  // Each touched component once, in the order its first link was touched.
  for (std::size_t i = 0; i < pending_links_.size(); ++i) {
    const std::int32_t l = pending_links_[i];
    if (link_flushed_[l] == flush_epoch_) continue;
    link_flushed_[l] = flush_epoch_;
    if (link_flows_[l].empty()) {
      set_saturated(l, false, now);  // its last flow ended at this instant
      continue;
    }
    collect_component(link_flows_[l].front(), false);
    for (std::uint32_t cl : comp_links_) link_flushed_[cl] = flush_epoch_;
    reshare(q, event_type);
  }
  pending_links_.clear();
}

// What reshare() computes for a component of one flow whose links carry nothing else, in the
// same arithmetic: the rate is the smallest capacity / copies of its links (the first such link
// on ties), and a link is saturated when that rate uses its capacity up.
void FlowNetwork::start_alone(EventQueue& q, std::uint8_t event_type, std::uint32_t id) {
  Flow& f = flows_[id];
  double best = std::numeric_limits<double>::infinity();
  bool any = false;
  for (int k = 0; k < f.hops; ++k) {
    const double w = 0.0 + f.route[k].weight;
    if (w <= 1e-9) continue;
    const double share = capacity_[f.route[k].link] / w;
    any = true;
    if (share < best) best = share;
  }
  const TimePs now = q.now();
  for (int k = 0; k < f.hops; ++k) {
    const int l = f.route[k].link;
    double residual = capacity_[l];
    if (any) residual -= f.route[k].weight * best;
    const bool sat = residual <= 1e-6 * capacity_[l];
    set_saturated(l, sat, now);
  }
  f.rate = std::max(any ? best : -1.0, 1e-18);
  schedule_end(q, event_type, id);
}

void FlowNetwork::start_background(EventQueue& q, std::uint8_t event_type, const RouteHop* route,
                                   int hops) {
  if (hops <= 0) return;
  ++started_;
  const auto id = static_cast<std::uint32_t>(flows_.size());
  flows_.emplace_back();
  flow_mark_.push_back(0);
  comp_index_.push_back(0);
  Flow& f = flows_[id];
  f.remaining = std::numeric_limits<double>::infinity();
  f.last = q.now();
  f.route = route;
  f.hops = hops;
  f.active = true;
  f.background = true;
  for (int k = 0; k < hops; ++k) link_flows_[route[k].link].push_back(id);
  collect_component(id, false);
  reshare(q, event_type);
}

bool FlowNetwork::finish(EventQueue& q, std::uint8_t event_type, const Event& e) {
  Flow& f = flows_[e.target];
  if (e.gen != f.gen) return false;
  if (!f.active) {  // empty flow
    release(e.target);
    return true;
  }
  f.active = false;
  f.remaining = 0;
  f.rate = 0;
  bool alone = true;  // no other flow left on any of its links
  for (int k = 0; k < f.hops; ++k) {
    auto& lf = link_flows_[f.route[k].link];
    auto it = std::find(lf.begin(), lf.end(), e.target);
    *it = lf.back();
    lf.pop_back();
    alone = alone && lf.empty();
  }
  if (alone) {
    // What a re-share of its links would do: no flow's rate changes, and each link, now
    // carrying nothing, ends its saturated interval.
    const TimePs now = q.now();
    for (int k = 0; k < f.hops; ++k) set_saturated(f.route[k].link, false, now);
    release(e.target);
    return true;
  }
  if (flush_event_ != kImmediate) {
    defer(q, f.route, f.hops);
    release(e.target);
    return true;
  }
  collect_component(e.target, true);
  reshare(q, event_type);
  release(e.target);
  return true;
}

// Opens or closes link `l`'s saturated interval at `now` (nothing when its state is unchanged).
void FlowNetwork::set_saturated(int l, bool sat, TimePs now) {
  const bool was = link_sat_since_[l] >= 0;
  if (sat && !was) {
    link_sat_since_[l] = now;
  } else if (!sat && was) {
    link_sat_total_[l] += now - link_sat_since_[l];
    link_sat_since_[l] = -1;
  }
}

// A finished flow's slot: its pending end events become stale (new generation) and a later
// start() takes it.
void FlowNetwork::release(std::uint32_t id) {
  ++flows_[id].gen;
  free_.push_back(id);
}

// Breadth-first over links and flows that share them, starting from the seed's route.
void FlowNetwork::collect_component(std::uint32_t seed, bool seed_removed) {
  ++mark_;
  comp_flows_.clear();
  comp_links_.clear();
  if (!seed_removed) {
    flow_mark_[seed] = mark_;
    comp_index_[seed] = 0;
    comp_flows_.push_back(seed);
  }
  const Flow& s = flows_[seed];
  for (int k = 0; k < s.hops; ++k) {
    const int l = s.route[k].link;
    if (link_mark_[l] == mark_) continue;
    link_mark_[l] = mark_;
    comp_links_.push_back(l);
  }
  for (std::size_t li = 0; li < comp_links_.size(); ++li) {
    for (std::uint32_t g : link_flows_[comp_links_[li]]) {
      if (flow_mark_[g] == mark_) continue;
      flow_mark_[g] = mark_;
      comp_index_[g] = static_cast<std::uint32_t>(comp_flows_.size());
      comp_flows_.push_back(g);
      const Flow& fg = flows_[g];
      for (int k = 0; k < fg.hops; ++k) {
        const int l = fg.route[k].link;
        if (link_mark_[l] == mark_) continue;
        link_mark_[l] = mark_;
        comp_links_.push_back(l);
      }
    }
  }
}

// Weighted water-filling over the collected component: repeatedly saturate the link with the
// smallest fair share per unit weight and freeze the flows crossing it.
void FlowNetwork::reshare(EventQueue& q, std::uint8_t event_type) {
  const TimePs now = q.now();
  for (std::uint32_t g : comp_flows_) {
    Flow& f = flows_[g];
    f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(now - f.last));
    f.last = now;
  }
  for (std::uint32_t l : comp_links_) {
    residual_[l] = capacity_[l];
    weight_sum_[l] = 0;
  }
  // Every flow on a component link is in the component, once: each adds its copies on each link
  // it crosses (twice if its route crosses the link twice).
  for (std::uint32_t g : comp_flows_) {
    const Flow& fg = flows_[g];
    for (int k = 0; k < fg.hops; ++k) weight_sum_[fg.route[k].link] += fg.route[k].weight;
  }
  new_rate_.assign(comp_flows_.size(), -1.0);
  // Unfrozen flows are marked mark_; frozen ones get mark_ + 1 temporarily via new_rate_ >= 0.
  std::size_t left = comp_flows_.size();
  // Links still carrying unfrozen flows, in component order (dropped as they empty, so the
  // first smallest share is the one a scan of every component link finds).
  scan_.clear();
  for (std::uint32_t l : comp_links_)
    if (weight_sum_[l] > 1e-9) scan_.push_back(l);
  while (left > 0) {
    double best = std::numeric_limits<double>::infinity();
    std::int32_t best_link = -1;
    std::size_t kept = 0;
    for (std::uint32_t l : scan_) {
      if (weight_sum_[l] <= 1e-9) continue;
      scan_[kept++] = l;
      const double share = std::max(residual_[l], 0.0) / weight_sum_[l];
      if (share < best) {
        best = share;
        best_link = static_cast<std::int32_t>(l);
      }
    }
    scan_.resize(kept);
    if (best_link < 0) break;
    // The unfrozen flows crossing the bottleneck, from its own list (every flow on a component
    // link is in the component), frozen in component order: the same arithmetic as a scan of
    // the whole component, in time proportional to the link's flows.
    freeze_.clear();
    for (std::uint32_t g : link_flows_[best_link])
      if (new_rate_[comp_index_[g]] < 0) freeze_.push_back(comp_index_[g]);
    std::sort(freeze_.begin(), freeze_.end());
    freeze_.erase(std::unique(freeze_.begin(), freeze_.end()), freeze_.end());
    for (std::uint32_t i : freeze_) {
      const Flow& f = flows_[comp_flows_[i]];
      new_rate_[i] = best;
      --left;
      for (int k = 0; k < f.hops; ++k) {
        residual_[f.route[k].link] -= f.route[k].weight * best;
        weight_sum_[f.route[k].link] -= f.route[k].weight;
      }
    }
    weight_sum_[best_link] = 0;
  }
  // Bottleneck intervals: a link is one while its capacity is used up and one of the job's flows
  // crosses it; only the component's links can have changed.
  for (std::uint32_t l : comp_links_) {
    bool sat = false;
    if (residual_[l] <= 1e-6 * capacity_[l])
      for (std::uint32_t g : link_flows_[l])
        if (!flows_[g].background) {
          sat = true;
          break;
        }
    set_saturated(l, sat, now);
  }
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    const std::uint32_t g = comp_flows_[i];
    Flow& f = flows_[g];
    const double r = std::max(new_rate_[i], 1e-18);
    if (r == f.rate) continue;
    f.rate = r;
    if (!f.background) schedule_end(q, event_type, g);
  }
}

void FlowNetwork::schedule_end(EventQueue& q, std::uint8_t event_type, std::uint32_t g) {
  Flow& f = flows_[g];
  ++f.gen;
  const double dt = std::ceil(f.remaining / f.rate);
  q.push(q.now() + static_cast<TimePs>(dt), event_type, g, f.gen);
}

}  // namespace pw::des
