#include "executor/memory.h"

#include <malloc.h>

namespace pw::exec {

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest (half its 64 MiB heap size)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace pw::exec
