// How a pipewright process's malloc treats the memory it frees.
#pragma once

#include <cstddef>

namespace pw {

/// Free memory at the top of a malloc arena that the process keeps instead of returning it to
/// the system: 1 GiB.
inline constexpr std::size_t kHeapTrimThreshold = std::size_t{1} << 30;

/// Blocks of at least this size get their own mapping from malloc and go back to the system
/// when freed; smaller ones come from the heap and are reused: 4 MiB.
inline constexpr std::size_t kHeapMmapThreshold = std::size_t{4} << 20;

/// Makes malloc keep up to kHeapTrimThreshold of free memory at each arena's top (mallopt
/// M_TRIM_THRESHOLD) instead of glibc's 128 KiB. With the default, a search that builds and
/// frees a few MB of small blocks per candidate on each thread (the adaptive V search's grids)
/// gave the pages back at every free and faulted them in again at the next allocation: 2,000
/// page faults per p=16 m=64 curve, 14% of its time on this VM. Setting the trim threshold
/// also stops glibc's mmap threshold from growing, so it is set too (M_MMAP_THRESHOLD,
/// kHeapMmapThreshold): at glibc's 128 KiB every schedule generator's and evaluator's arrays
/// of 128 KiB..4 MiB were mapped, zero-filled by the kernel and unmapped on each call, a page
/// fault per 4 KiB (`plan --shortest-time` on the 1.7B model to 64 GPUs: 1.04 M faults, 9 s of
/// 18 s CPU in the kernel; with 4 MiB 78 k faults, 2.6x faster in wall time). Arrays above it
/// (the all-ranks simulation's) are still returned when freed, so its peak memory stays as it
/// was (8 MiB raised a 4,096-GPU run's peak from 0.83 to 1.13 GB). Called first by the CLI's
/// main and by every benchmark, so benchmarks measure what the CLI runs; the executor adds its
/// own caching on top (executor/memory.h). Process-wide; idempotent.
void keep_freed_heap_top();

}  // namespace pw
