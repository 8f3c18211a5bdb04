// How a pipewright process's malloc treats the memory it frees.
#pragma once

#include <cstddef>

namespace pw {

/// Free memory at the top of a malloc arena that the process keeps instead of returning it to
/// the system: 1 GiB.
inline constexpr std::size_t kHeapTrimThreshold = std::size_t{1} << 30;

/// Makes malloc keep up to kHeapTrimThreshold of free memory at each arena's top (mallopt
/// M_TRIM_THRESHOLD) instead of glibc's 128 KiB. With the default, a search that builds and
/// frees a few MB of small blocks per candidate on each thread (the adaptive V search's grids)
/// gave the pages back at every free and faulted them in again at the next allocation: 2,000
/// page faults per p=16 m=64 curve, 14% of its time on this VM. Setting it also fixes glibc's
/// mmap threshold at 128 KiB (no dynamic growth), so large arrays (the all-ranks simulation's)
/// are still returned when freed and the peak memory does not grow. Called first by the CLI's
/// main and by every benchmark, so benchmarks measure what the CLI runs; the executor adds its
/// own caching on top (executor/memory.h). Process-wide; idempotent.
void keep_freed_heap_top();

}  // namespace pw
