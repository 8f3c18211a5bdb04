// How the executor's process holds the memory it frees (the role of a framework's caching
// allocator).
#pragma once

namespace pw::exec {

/// Makes this process's malloc keep the blocks it frees for reuse (mallopt: blocks up to 32 MiB
/// from the heap rather than fresh mmaps, the heap not trimmed below 1 GiB of free top as every
/// pipewright process (core/heap.h), 64 MiB of
/// padding per growth): the CPU backend's Eigen temporaries are allocated and freed every pass,
/// and with glibc's defaults each one of more than 128 KiB is a fresh mmap whose pages fault in
/// again (9% of a pipeline rank's time in a profile of the calibration loop, and a steady state
/// reached only after the dynamic threshold has grown). The role of a framework's caching
/// allocator. Called by the executor and by the CPU calibration, so both measure the same state.
void keep_freed_memory();

}  // namespace pw::exec
