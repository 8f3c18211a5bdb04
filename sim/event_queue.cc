#include "sim/event_queue.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace pw::des {
namespace {
constexpr TimePs kNoTime = std::numeric_limits<TimePs>::min();
std::size_t hash_time(TimePs t) {
  auto x = static_cast<std::uint64_t>(t);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<std::size_t>(x);
}
}  // namespace

void EventQueue::clear() {
  for (const Slot& s : heap_) {
    buckets_[s.bucket].events.clear();
    buckets_[s.bucket].head = 0;
    free_buckets_.push_back(s.bucket);
  }
  heap_.clear();
  std::fill(map_time_.begin(), map_time_.end(), kNoTime);
  map_used_ = 0;
  last_time_ = -1;
  fifo_.clear();
  fifo_head_ = 0;
  pending_ = 0;
  seq_ = 0;
  now_ = 0;
}

void EventQueue::reserve(std::size_t n) { fifo_.reserve(n); }

std::size_t EventQueue::find_slot(TimePs time) const {
  const std::size_t mask = map_time_.size() - 1;
  std::size_t i = hash_time(time) & mask;
  while (map_time_[i] != kNoTime && map_time_[i] != time) i = (i + 1) & mask;
  return i;
}

void EventQueue::map_grow() {
  std::vector<TimePs> old_time = std::move(map_time_);
  std::vector<std::uint32_t> old_bucket = std::move(map_bucket_);
  map_time_.assign(std::max<std::size_t>(64, old_time.size() * 2), kNoTime);
  map_bucket_.assign(map_time_.size(), 0);
  for (std::size_t i = 0; i < old_time.size(); ++i)
    if (old_time[i] != kNoTime) {
      const std::size_t j = find_slot(old_time[i]);
      map_time_[j] = old_time[i];
      map_bucket_[j] = old_bucket[i];
    }
}

void EventQueue::map_insert(TimePs time, std::uint32_t bucket) {
  if (2 * (map_used_ + 1) > map_time_.size()) map_grow();
  const std::size_t i = find_slot(time);
  map_time_[i] = time;
  map_bucket_[i] = bucket;
  ++map_used_;
}

// Backward-shift deletion keeps every probe sequence unbroken without tombstones.
void EventQueue::map_erase(TimePs time) {
  const std::size_t mask = map_time_.size() - 1;
  std::size_t i = find_slot(time);
  PW_ASSERT(map_time_[i] == time, "event queue: erasing a time that is not pending");
  for (std::size_t j = (i + 1) & mask; map_time_[j] != kNoTime; j = (j + 1) & mask) {
    const std::size_t home = hash_time(map_time_[j]) & mask;
    // Move j back to i when i lies on j's probe path (cyclically in [home, j)).
    if (((j - home) & mask) >= ((j - i) & mask)) {
      map_time_[i] = map_time_[j];
      map_bucket_[i] = map_bucket_[j];
      i = j;
    }
  }
  map_time_[i] = kNoTime;
  --map_used_;
}

std::uint32_t EventQueue::bucket_for(TimePs time) {
  if (time == last_time_) return last_bucket_;
  std::uint32_t b;
  if (!map_time_.empty()) {
    const std::size_t i = find_slot(time);
    if (map_time_[i] == time) {
      last_time_ = time;
      return last_bucket_ = map_bucket_[i];
    }
  }
  if (free_buckets_.empty()) {
    b = static_cast<std::uint32_t>(buckets_.size());
    buckets_.emplace_back();
  } else {
    b = free_buckets_.back();
    free_buckets_.pop_back();
  }
  map_insert(time, b);
  heap_.push_back({time, b});
  sift_up(heap_.size() - 1);
  last_time_ = time;
  return last_bucket_ = b;
}

void EventQueue::push(TimePs time, std::uint8_t type, std::uint32_t target, std::uint32_t gen) {
  PW_ASSERT(time >= now_, "event scheduled in the past");
  const Event e{time, seq_++, target, gen, type};
  ++pending_;
  if (time == now_) {
    // Compact the consumed prefix only when it dominates, so pushes stay amortised O(1).
    if (fifo_head_ > 1024 && fifo_head_ * 2 > fifo_.size()) {
      fifo_.erase(fifo_.begin(), fifo_.begin() + static_cast<std::ptrdiff_t>(fifo_head_));
      fifo_head_ = 0;
    }
    fifo_.push_back(e);
    return;
  }
  buckets_[bucket_for(time)].events.push_back(e);
}

// The front time's events are all popped: its bucket goes back to the pool.
void EventQueue::release_front() {
  const Slot s = heap_.front();
  Bucket& b = buckets_[s.bucket];
  b.events.clear();
  b.head = 0;
  free_buckets_.push_back(s.bucket);
  map_erase(s.time);
  if (last_time_ == s.time) last_time_ = -1;
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0);
}

Event EventQueue::pop() {
  --pending_;
  // Events queued for now() in the time buckets were pushed before now() reached their time,
  // so they precede the FIFO's.
  const bool bucket_first =
      !heap_.empty() && (fifo_head_ == fifo_.size() || heap_.front().time == now_);
  if (!bucket_first) {
    Event e = fifo_[fifo_head_++];
    if (fifo_head_ == fifo_.size()) {
      fifo_.clear();
      fifo_head_ = 0;
    }
    return e;
  }
  Bucket& b = buckets_[heap_.front().bucket];
  const Event e = b.events[b.head++];
  now_ = e.time;
  if (b.head == b.events.size()) release_front();
  return e;
}

void EventQueue::sift_up(std::size_t i) {
  const Slot s = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 4;
    if (!(s.time < heap_[parent].time)) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = s;
}

void EventQueue::sift_down(std::size_t i) {
  const std::size_t n = heap_.size();
  const Slot s = heap_[i];
  for (;;) {
    const std::size_t first = 4 * i + 1;
    if (first >= n) break;
    std::size_t best = first;
    const std::size_t last = first + 4 < n ? first + 4 : n;
    for (std::size_t c = first + 1; c < last; ++c)
      if (heap_[c].time < heap_[best].time) best = c;
    if (!(heap_[best].time < s.time)) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = s;
}

}  // namespace pw::des
