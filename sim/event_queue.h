#pragma once
/// The discrete-event queue: a vector-backed 4-ary min-heap ordered by (time, sequence) plus a
/// FIFO for events scheduled at the current time (an action that ends makes its dependents ready
/// *now*; they skip the heap). Events are 24-byte PODs; nothing is allocated per event once the
/// vectors have grown. Stale events are recognised by the caller through the generation field.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/units.h"

namespace pw::des {

/// One scheduled event. `target` is a dense id whose meaning depends on `type`; `gen` is the
/// target's generation when the event was scheduled (a rescheduled target ignores older events).
struct Event {
  TimePs time = 0;
  std::uint32_t seq = 0;
  std::uint32_t target = 0;
  std::uint32_t gen = 0;
  std::uint8_t type = 0;
};
static_assert(sizeof(Event) <= 24, "events must stay within 24 bytes");
static_assert(std::is_trivially_copyable_v<Event>);

/// Min-queue of events ordered by (time, seq). Events pushed at exactly now() go to a FIFO; an
/// event already queued for now() was pushed earlier, so it pops first and the total order
/// remains (time, seq). Pending events are kept per distinct time, in push order (which is seq
/// order), and a 4-ary heap orders the distinct times only: an all-ranks simulation schedules
/// hundreds of identical ranks' events at the same instant (98% of its pops share the time of the
/// previous one), which a heap of events would sift one by one.
class EventQueue {
 public:
  /// Empties the queue and sets the clock to 0 (keeps the capacity).
  void clear();
  /// Reserves room for `n` pending events.
  void reserve(std::size_t n);
  /// Schedules an event at `time` (>= now()).
  void push(TimePs time, std::uint8_t type, std::uint32_t target, std::uint32_t gen = 0);
  /// True when no event is pending.
  bool empty() const { return pending_ == 0; }
  /// Removes and returns the earliest event and advances now() to its time. Must not be empty.
  Event pop();
  /// Time of the last popped event.
  TimePs now() const { return now_; }
  std::size_t size() const { return pending_; }

 private:
  /// A distinct pending time and the bucket holding its events.
  struct Slot {
    TimePs time;
    std::uint32_t bucket;
  };
  struct Bucket {
    std::vector<Event> events;
    std::size_t head = 0;  ///< next to pop
  };
  std::uint32_t bucket_for(TimePs time);
  void release_front();
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  // Open-addressing map from a pending time to its bucket (linear probing, power-of-two size).
  std::size_t find_slot(TimePs time) const;
  void map_insert(TimePs time, std::uint32_t bucket);
  void map_erase(TimePs time);
  void map_grow();

  std::vector<Slot> heap_;  ///< distinct pending times (after now), 4-ary min-heap by time
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_buckets_;
  std::vector<TimePs> map_time_;  ///< kNoTime: empty
  std::vector<std::uint32_t> map_bucket_;
  std::size_t map_used_ = 0;
  TimePs last_time_ = -1;  ///< the last pushed time and its bucket (pushes come in runs)
  std::uint32_t last_bucket_ = 0;
  std::vector<Event> fifo_;
  std::size_t fifo_head_ = 0;
  std::size_t pending_ = 0;
  std::uint32_t seq_ = 0;
  TimePs now_ = 0;
};

}  // namespace pw::des
