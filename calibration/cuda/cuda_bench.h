#pragma once
/// CUDA/NCCL microbenchmarks of one node (built only when nvcc, cuBLAS and NCCL are found). This
/// header is plain C++: callers never see a CUDA type. Method as nccl-tests: warm-up, timed
/// iterations with CUDA events, median and spread, correctness checked apart from timing.
///
/// Measured: cuBLAS GEMMs of the transformer layer shapes (bf16, fp16, tf32, fp32; a sweep of
/// hidden sizes and tokens), memory bandwidth (copy, scale, read-only) and the executor's
/// element-wise kernels (GELU, add), pinned host-device copies, kernel launch latency, and NCCL
/// all-reduce, all-gather, reduce-scatter, broadcast and send/recv over all local GPUs
/// (single process, one communicator per GPU), 8 B to 4 GiB (quick: to 256 MiB).
#include <string>

#include "calibration/cpu_bench.h"
#include "calibration/raw_results.h"

namespace pw::calibration::cuda {

/// Number of usable CUDA devices; 0 when there is none, with the reason in `*why`.
int device_count(std::string* why);

struct CudaBenchOptions {
  bool quick = false;
  int device = 0;  ///< the GPU the single-GPU benchmarks run on
  Progress progress;
};

/// Runs every benchmark. Throws ConfigError when no GPU is present, and InternalError (with
/// file:line and the CUDA/cuBLAS/NCCL error string) when a call fails.
RawResults run_cuda_benchmarks(const CudaBenchOptions& options, const std::string& command);

}  // namespace pw::calibration::cuda
