#pragma once
/// Transparent huge pages for the simulator's large arrays. Where the kernel runs THP in
/// "madvise" mode (the Debian default), memory it is asked for takes one page fault per 2 MiB
/// instead of 512; an all-ranks simulation of thousands of GPUs spent a fifth of its time in
/// page faults. Only a hint: without THP (or off Linux) nothing changes but the fault count.
#include <cstddef>
#include <vector>

namespace pw::des {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// Asks for huge pages over the 2 MiB-aligned part of [p, p + bytes); call before first touch.
void advise_huge_pages(void* p, std::size_t bytes);

/// v = n copies of x, in memory advised for huge pages when it is large (v's old storage is
/// freed first).
template <class T>
void assign_huge(std::vector<T>& v, std::size_t n, const T& x) {
  if (n * sizeof(T) >= 4 * kHugePageBytes && v.capacity() < n) {
    std::vector<T>().swap(v);
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(T));
  }
  v.assign(n, x);
}

}  // namespace pw::des
