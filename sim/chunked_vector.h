#pragma once
/// An append-only array stored in fixed chunks of 2^kBits elements: growing never copies what is
/// there and never holds twice its size, as a doubling std::vector does (an all-ranks simulation
/// appends tens of millions of tasks and flows; their copies were most of its peak memory).
/// Indexing is a shift and a mask; elements never move, so references stay valid.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace pw::des {

template <class T, int kBits = 12>
class ChunkedVector {
 public:
  static constexpr std::size_t kChunk = std::size_t{1} << kBits;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return chunks_[i >> kBits][i & (kChunk - 1)]; }
  const T& operator[](std::size_t i) const { return chunks_[i >> kBits][i & (kChunk - 1)]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  void push_back(const T& v) {
    if ((size_ & (kChunk - 1)) == 0 && (size_ >> kBits) == chunks_.size())
      chunks_.push_back(std::make_unique<T[]>(kChunk));
    (*this)[size_++] = v;
  }
  /// Appends `n` copies of `v`.
  void append(std::size_t n, const T& v) {
    for (std::size_t k = 0; k < n; ++k) push_back(v);
  }
  /// Forgets the elements and frees the chunks.
  void clear() {
    chunks_.clear();
    size_ = 0;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::size_t size_ = 0;
};

}  // namespace pw::des
