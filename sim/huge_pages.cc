#include "sim/huge_pages.h"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pw::des {

void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(MADV_HUGEPAGE)
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (lo + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const std::uintptr_t end = (lo + bytes) & ~(kHugePageBytes - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace pw::des
