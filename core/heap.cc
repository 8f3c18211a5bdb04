#include "core/heap.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace pw {

void keep_freed_heap_top() {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kHeapTrimThreshold));
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapMmapThreshold));
#endif
}

}  // namespace pw
