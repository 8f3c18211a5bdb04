#include "sim/event_queue.h"

#include "core/error.h"

namespace pw::des {

void EventQueue::clear() {
  heap_.clear();
  fifo_.clear();
  fifo_head_ = 0;
  seq_ = 0;
  now_ = 0;
}

void EventQueue::reserve(std::size_t n) {
  heap_.reserve(n);
  fifo_.reserve(n);
}

void EventQueue::push(TimePs time, std::uint8_t type, std::uint32_t target, std::uint32_t gen) {
  PW_ASSERT(time >= now_, "event scheduled in the past");
  const Event e{time, seq_++, target, gen, type};
  if (time == now_) {
    // Compact the consumed prefix only when it dominates, so pushes stay amortised O(1).
    if (fifo_head_ > 1024 && fifo_head_ * 2 > fifo_.size()) {
      fifo_.erase(fifo_.begin(), fifo_.begin() + static_cast<std::ptrdiff_t>(fifo_head_));
      fifo_head_ = 0;
    }
    fifo_.push_back(e);
    return;
  }
  heap_.push_back(e);
  sift_up(heap_.size() - 1);
}

Event EventQueue::pop() {
  const bool heap_first =
      !heap_.empty() && (fifo_head_ == fifo_.size() || heap_.front().time == now_);
  if (!heap_first) {
    Event e = fifo_[fifo_head_++];
    if (fifo_head_ == fifo_.size()) {
      fifo_.clear();
      fifo_head_ = 0;
    }
    return e;
  }
  Event top = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0);
  now_ = top.time;
  return top;
}

void EventQueue::sift_up(std::size_t i) {
  const Event e = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 4;
    if (!less(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

void EventQueue::sift_down(std::size_t i) {
  const std::size_t n = heap_.size();
  const Event e = heap_[i];
  for (;;) {
    const std::size_t first = 4 * i + 1;
    if (first >= n) break;
    std::size_t best = first;
    const std::size_t last = first + 4 < n ? first + 4 : n;
    for (std::size_t c = first + 1; c < last; ++c)
      if (less(heap_[c], heap_[best])) best = c;
    if (!less(heap_[best], e)) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = e;
}

}  // namespace pw::des
