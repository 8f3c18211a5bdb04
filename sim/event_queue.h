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
/// event already in the heap at now() was pushed earlier, so it pops first and the total order
/// remains (time, seq).
class EventQueue {
 public:
  /// Empties the queue and sets the clock to 0 (keeps the capacity).
  void clear();
  /// Reserves room for `n` pending events.
  void reserve(std::size_t n);
  /// Schedules an event at `time` (>= now()).
  void push(TimePs time, std::uint8_t type, std::uint32_t target, std::uint32_t gen = 0);
  /// True when no event is pending.
  bool empty() const { return heap_.empty() && fifo_head_ == fifo_.size(); }
  /// Removes and returns the earliest event and advances now() to its time. Must not be empty.
  Event pop();
  /// Time of the last popped event.
  TimePs now() const { return now_; }
  std::size_t size() const { return heap_.size() + (fifo_.size() - fifo_head_); }

 private:
  static bool less(const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);

  std::vector<Event> heap_;
  std::vector<Event> fifo_;
  std::size_t fifo_head_ = 0;
  std::uint32_t seq_ = 0;
  TimePs now_ = 0;
};

}  // namespace pw::des
