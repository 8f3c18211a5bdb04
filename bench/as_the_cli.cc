// Linked into every benchmark: the process's malloc set up as the pipewright CLI's main sets it
// (core/heap.h) before the benchmarks run, so a benchmark measures what the CLI runs.
#include "core/heap.h"

namespace {

const bool kHeapSetUp = (pw::keep_freed_heap_top(), true);

}  // namespace
