#pragma once
/// Flows over links with weighted max-min fair sharing. A flow crosses a fixed route of links;
/// each route entry carries a weight: how many identical copies of the flow cross that link
/// (1 in a full simulation; more when one representative flow stands for symmetric copies that
/// share the link). Rates are recomputed only for the flows connected, through shared links, to a
/// flow that starts or ends. Time is integer picoseconds; bandwidth is bytes per picosecond.
#include <cstdint>
#include <vector>

#include "core/units.h"
#include "sim/event_queue.h"

namespace pw::des {

/// One link of a route and the number of copies of the flow that cross it.
struct RouteHop {
  std::int32_t link = 0;
  float weight = 1.0f;
};

class FlowNetwork {
 public:
  /// Links with their capacities in bytes per second (all positive).
  void set_links(const std::vector<double>& bytes_per_sec);
  int num_links() const { return static_cast<int>(capacity_.size()); }
  /// Forgets every flow (keeps links and capacity).
  void reset();

  /// Starts a flow of `bytes` over `route` at time `now`; schedules its end as an event of
  /// `event_type` (target = flow id, gen = the flow's generation) and returns the flow id. An
  /// empty route or zero bytes ends at `now`. `owner` is returned by owner(). The route is not
  /// copied: it must outlive the flow (the engine passes the task graph's). A finished flow's id
  /// is reused by a later start, so memory follows the flows in flight, not all flows run.
  std::uint32_t start(EventQueue& q, std::uint8_t event_type, const RouteHop* route, int hops,
                      double bytes, std::uint32_t owner);
  /// Starts a flow that never ends (another job's traffic): it takes its max-min fair share of
  /// every link of `route` for the rest of the run and schedules no end event.
  void start_background(EventQueue& q, std::uint8_t event_type, const RouteHop* route, int hops);
  /// Handles a popped end event: returns false if it is stale; otherwise retires the flow,
  /// re-shares its links and returns true.
  bool finish(EventQueue& q, std::uint8_t event_type, const Event& e);
  /// Re-share once per instant: a start or end that changes other flows' rates queues one
  /// event of `flush_event_type` at the current time (once), and flush() then re-shares each
  /// touched component once, however many flows started or ended in it at that instant (the
  /// synchronised ranks of a simulation start many at once). No time passes in between, so the
  /// rates are those of re-sharing after every change. Without it (the default) every change
  /// re-shares at once.
  void defer_reshares(std::uint8_t flush_event_type) { flush_event_ = flush_event_type; }
  /// Handles the popped flush event: re-shares every component touched since the last one.
  void flush(EventQueue& q, std::uint8_t event_type);
  /// Owner of a flow; valid for a finished flow until the next start().
  std::uint32_t owner(std::uint32_t flow) const { return flows_[flow].owner; }
  /// Current rate of a flow in bytes per second (0 once it ended).
  double rate_bytes_per_sec(std::uint32_t flow) const { return flows_[flow].rate * 1e12; }
  std::size_t num_flows_started() const { return started_; }
  /// Per link: bytes the job's flows have been started with over it (a flow's bytes times its
  /// copies on the link; background flows are not counted).
  const std::vector<double>& link_bytes() const { return link_bytes_; }
  /// Time link `l` has been saturated (its capacity used up by the flows crossing it, max-min
  /// fairly) while at least one of the job's flows crossed it: a bottleneck of the job (a link
  /// only background flows fill does not count). Includes the interval still open at `now`.
  TimePs link_saturated(int l, TimePs now) const {
    return link_sat_total_[l] + (link_sat_since_[l] >= 0 ? now - link_sat_since_[l] : 0);
  }
  /// Flow slots allocated: the most flows in flight at once.
  std::size_t num_flow_slots() const { return flows_.size(); }

 private:
  struct Flow {
    double remaining = 0;  ///< bytes
    double rate = 0;       ///< bytes per ps (of one copy)
    TimePs last = 0;
    const RouteHop* route = nullptr;
    std::int32_t hops = 0;
    std::uint32_t gen = 0;
    std::uint32_t owner = 0;
    bool active = false;
    bool background = false;  ///< never ends (start_background)
  };
  void release(std::uint32_t id);
  void start_alone(EventQueue& q, std::uint8_t event_type, std::uint32_t id);
  void set_saturated(int link, bool saturated, TimePs now);
  void collect_component(std::uint32_t seed_flow, bool seed_removed);
  void reshare(EventQueue& q, std::uint8_t event_type);
  /// Defers a re-share of the components of `route`'s links to this instant's flush event.
  void defer(EventQueue& q, const RouteHop* route, int hops);
  static constexpr std::uint8_t kImmediate = 255;
  std::uint8_t flush_event_ = kImmediate;
  bool flush_queued_ = false;
  std::vector<std::int32_t> pending_links_;  ///< links whose components await the flush
  std::vector<std::uint32_t> link_flushed_;  ///< per link: the flush that re-shared it
  std::uint32_t flush_epoch_ = 0;
  void schedule_end(EventQueue& q, std::uint8_t event_type, std::uint32_t f);

  std::vector<double> capacity_;  ///< bytes per ps
  std::vector<std::vector<std::uint32_t>> link_flows_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_;  ///< finished flows' slots, reused by start()
  std::size_t started_ = 0;
  // Scratch for one re-share (kept to avoid allocation).
  std::vector<std::uint32_t> comp_flows_, comp_links_;
  std::vector<std::uint32_t> link_mark_, flow_mark_;
  std::vector<std::uint32_t> comp_index_;  ///< per flow: its place in comp_flows_ (when marked)
  std::vector<std::uint32_t> freeze_;      ///< one water-filling step's flows (comp indices)
  std::vector<std::uint32_t> scan_;        ///< links with unfrozen flows, in component order
  std::uint32_t mark_ = 0;
  std::vector<double> residual_, weight_sum_;
  std::vector<double> new_rate_;
  std::vector<std::uint8_t> frozen_;
  // Per link: job bytes started over it, saturated time so far and the start of the open
  // saturated interval (-1: none).
  std::vector<double> link_bytes_;
  std::vector<TimePs> link_sat_total_, link_sat_since_;
};

}  // namespace pw::des
