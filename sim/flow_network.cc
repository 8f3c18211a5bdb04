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
  residual_.assign(capacity_.size(), 0.0);
  weight_sum_.assign(capacity_.size(), 0.0);
  reset();
}

void FlowNetwork::reset() {
  for (auto& v : link_flows_) v.clear();
  flows_.clear();
  routes_.clear();
  flow_mark_.clear();
  std::fill(link_mark_.begin(), link_mark_.end(), 0);
  mark_ = 0;
}

std::uint32_t FlowNetwork::start(EventQueue& q, std::uint8_t event_type, const RouteHop* route,
                                 int hops, double bytes, std::uint32_t owner) {
  const auto id = static_cast<std::uint32_t>(flows_.size());
  Flow f;
  f.remaining = bytes;
  f.last = q.now();
  f.route_begin = static_cast<std::int32_t>(routes_.size());
  routes_.insert(routes_.end(), route, route + hops);
  f.route_end = static_cast<std::int32_t>(routes_.size());
  f.owner = owner;
  f.active = hops > 0 && bytes > 0;
  flows_.push_back(f);
  flow_mark_.push_back(0);
  if (!f.active) {
    q.push(q.now(), event_type, id, 0);
    return id;
  }
  for (int k = 0; k < hops; ++k) link_flows_[route[k].link].push_back(id);
  collect_component(id, false);
  reshare(q, event_type);
  return id;
}

bool FlowNetwork::finish(EventQueue& q, std::uint8_t event_type, const Event& e) {
  Flow& f = flows_[e.target];
  if (e.gen != f.gen) return false;
  if (!f.active) return true;  // empty flow
  f.active = false;
  f.remaining = 0;
  f.rate = 0;
  for (int k = f.route_begin; k < f.route_end; ++k) {
    auto& lf = link_flows_[routes_[k].link];
    auto it = std::find(lf.begin(), lf.end(), e.target);
    *it = lf.back();
    lf.pop_back();
  }
  collect_component(e.target, true);
  reshare(q, event_type);
  return true;
}

// Breadth-first over links and flows that share them, starting from the seed's route.
void FlowNetwork::collect_component(std::uint32_t seed, bool seed_removed) {
  ++mark_;
  comp_flows_.clear();
  comp_links_.clear();
  if (!seed_removed) {
    flow_mark_[seed] = mark_;
    comp_flows_.push_back(seed);
  }
  const Flow& s = flows_[seed];
  for (int k = s.route_begin; k < s.route_end; ++k) {
    const int l = routes_[k].link;
    if (link_mark_[l] == mark_) continue;
    link_mark_[l] = mark_;
    comp_links_.push_back(l);
  }
  for (std::size_t li = 0; li < comp_links_.size(); ++li) {
    for (std::uint32_t g : link_flows_[comp_links_[li]]) {
      if (flow_mark_[g] == mark_) continue;
      flow_mark_[g] = mark_;
      comp_flows_.push_back(g);
      const Flow& fg = flows_[g];
      for (int k = fg.route_begin; k < fg.route_end; ++k) {
        const int l = routes_[k].link;
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
    for (std::uint32_t g : link_flows_[l]) {
      for (int k = flows_[g].route_begin; k < flows_[g].route_end; ++k)
        if (routes_[k].link == static_cast<std::int32_t>(l)) weight_sum_[l] += routes_[k].weight;
    }
  }
  new_rate_.assign(comp_flows_.size(), -1.0);
  // Unfrozen flows are marked mark_; frozen ones get mark_ + 1 temporarily via new_rate_ >= 0.
  std::size_t left = comp_flows_.size();
  std::vector<std::uint32_t>& pos = comp_links_;  // links to scan
  while (left > 0) {
    double best = std::numeric_limits<double>::infinity();
    std::int32_t best_link = -1;
    for (std::uint32_t l : pos) {
      if (weight_sum_[l] <= 1e-9) continue;
      const double share = std::max(residual_[l], 0.0) / weight_sum_[l];
      if (share < best) {
        best = share;
        best_link = static_cast<std::int32_t>(l);
      }
    }
    if (best_link < 0) break;
    for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
      if (new_rate_[i] >= 0) continue;
      const Flow& f = flows_[comp_flows_[i]];
      bool crosses = false;
      for (int k = f.route_begin; k < f.route_end && !crosses; ++k)
        crosses = routes_[k].link == best_link;
      if (!crosses) continue;
      new_rate_[i] = best;
      --left;
      for (int k = f.route_begin; k < f.route_end; ++k) {
        residual_[routes_[k].link] -= routes_[k].weight * best;
        weight_sum_[routes_[k].link] -= routes_[k].weight;
      }
    }
    weight_sum_[best_link] = 0;
  }
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    const std::uint32_t g = comp_flows_[i];
    Flow& f = flows_[g];
    const double r = std::max(new_rate_[i], 1e-18);
    if (r == f.rate) continue;
    f.rate = r;
    schedule_end(q, event_type, g);
  }
}

void FlowNetwork::schedule_end(EventQueue& q, std::uint8_t event_type, std::uint32_t g) {
  Flow& f = flows_[g];
  ++f.gen;
  const double dt = std::ceil(f.remaining / f.rate);
  q.push(q.now() + static_cast<TimePs>(dt), event_type, g, f.gen);
}

}  // namespace pw::des
