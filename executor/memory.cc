#include "executor/memory.h"

#include <malloc.h>

#include "core/heap.h"

namespace pw::exec {

void keep_freed_memory() {
  keep_freed_heap_top();                // the heap not trimmed below kHeapTrimThreshold of free top
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // then glibc's largest (half its 64 MiB heap size)
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace pw::exec
