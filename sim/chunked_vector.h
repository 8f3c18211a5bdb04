#pragma once
/// An append-only array stored in fixed chunks of 2^kBits elements: growing never copies what is
/// there and never holds twice its size, as a doubling std::vector does (an all-ranks simulation
/// appends tens of millions of tasks and flows; their copies were most of its peak memory).
/// Chunks (at least a huge page each) are raw storage written once by push_back (no zero-fill
/// first; untouched pages cost nothing); from the second chunk on they ask the kernel for huge
/// pages (sim/huge_pages.h), so a large graph takes a page fault per 2 MiB instead of per 4 KiB
/// while a small one stays in ordinary pages of its first chunk. Indexing is a
/// shift and a mask; elements never move, so references stay valid.
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <vector>

#include "sim/huge_pages.h"

namespace pw::des {

/// Chunk size in bits for elements of `bytes`: the least power of two whose chunk fills a huge
/// page.
constexpr int chunk_bits(std::size_t bytes) {
  int b = 0;
  while ((std::size_t{1} << b) * bytes < kHugePageBytes) ++b;
  return b;
}

template <class T, int kBits = chunk_bits(sizeof(T))>
class ChunkedVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "chunks are raw storage: elements must be plain data");

 public:
  static constexpr std::size_t kChunk = std::size_t{1} << kBits;

  ChunkedVector() = default;
  ChunkedVector(const ChunkedVector&) = delete;
  ChunkedVector& operator=(const ChunkedVector&) = delete;
  ChunkedVector(ChunkedVector&& o) noexcept : chunks_(std::move(o.chunks_)), size_(o.size_) {
    o.chunks_.clear();
    o.size_ = 0;
  }
  ChunkedVector& operator=(ChunkedVector&& o) noexcept {
    if (this != &o) {
      clear();
      chunks_ = std::move(o.chunks_);
      size_ = o.size_;
      o.chunks_.clear();
      o.size_ = 0;
    }
    return *this;
  }
  ~ChunkedVector() { clear(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return chunks_[i >> kBits][i & (kChunk - 1)]; }
  const T& operator[](std::size_t i) const { return chunks_[i >> kBits][i & (kChunk - 1)]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  void push_back(const T& v) {
    if ((size_ & (kChunk - 1)) == 0 && (size_ >> kBits) == chunks_.size()) grow();
    ::new (static_cast<void*>(&(*this)[size_])) T(v);
    ++size_;
  }
  /// Appends `n` copies of `v`.
  void append(std::size_t n, const T& v) {
    for (std::size_t k = 0; k < n; ++k) push_back(v);
  }
  /// Drops the elements from `n` on (n <= size()); the chunks stay for later appends.
  void truncate(std::size_t n) { size_ = n < size_ ? n : size_; }
  /// Forgets the elements and frees the chunks.
  void clear() {
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      ::operator delete (chunks_[c], std::align_val_t{alignment(c)});
    chunks_.clear();
    size_ = 0;
  }

 private:
  static constexpr std::size_t kBytes = kChunk * sizeof(T);
  static std::size_t alignment(std::size_t chunk) {
    return chunk > 0 ? kHugePageBytes : alignof(std::max_align_t);
  }
  void grow() {
    const std::size_t c = chunks_.size();
    void* p = ::operator new (kBytes, std::align_val_t{alignment(c)});
    if (c > 0) advise_huge_pages(p, kBytes);
    chunks_.push_back(static_cast<T*>(p));
  }

  std::vector<T*> chunks_;
  std::size_t size_ = 0;
};

}  // namespace pw::des
