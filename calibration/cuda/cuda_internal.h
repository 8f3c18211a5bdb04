#pragma once
/// Shared pieces of the CUDA benchmarks (internal to calibration/cuda; includes CUDA headers).
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "calibration/cuda/cuda_bench.h"
#include "calibration/raw_results.h"

namespace pw::calibration::cuda {

/// Times `fn` (which enqueues work on `stream`) with CUDA events: `warmup` untimed calls, then
/// at least `min_iters` timed calls and more until `budget_s` of GPU time is spent (at most
/// 1000). Each sample is one call.
Timing time_stream(cudaStream_t stream, const std::function<void()>& fn, int warmup, int min_iters,
                   double budget_s);

/// Fills `n` elements at `p` (fp32, or 16-bit when `half_bytes`) with deterministic values in
/// [-1, 1) on `stream`.
void fill_random(void* p, size_t n, int bytes_per_element, bool bf16, unsigned seed,
                 cudaStream_t stream);

/// cuBLAS GEMM sweep of the transformer shapes, per dtype.
std::vector<GemmSample> bench_cublas(const CudaBenchOptions& o);
/// NCCL collectives and send/recv over all local GPUs (single process).
std::vector<CollectiveSample> bench_nccl(const CudaBenchOptions& o, std::string* version);

}  // namespace pw::calibration::cuda
