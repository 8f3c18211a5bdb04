#pragma once
/// The CUDA backends (CUDA calibration, CUDA executor) as a plugin: libpipewright_cuda.so, built
/// whenever nvcc, cuBLAS and NCCL are found, and opened only when a command asks for a CUDA
/// backend. The `pipewright` binary links no CUDA library, so CPU users and every small command
/// pay nothing for it. The interface is plain C++ (no CUDA type), versioned by kCudaPluginAbi.
#include <mpi.h>

#include <string>

#include "calibration/cpu_bench.h"
#include "calibration/raw_results.h"
#include "core/plan.h"
#include "executor/executor.h"

namespace pw::tools {

inline constexpr int kCudaPluginAbi = 1;

struct CudaPlugin {
  int abi = 0;  ///< kCudaPluginAbi of the plugin that was built
  /// Usable CUDA devices; 0 with the reason in *why.
  int (*device_count)(std::string* why) = nullptr;
  /// The CUDA calibration's benchmarks (calibration/cuda/cuda_bench.h).
  calibration::RawResults (*run_benchmarks)(bool quick, const calibration::Progress& progress,
                                            const std::string& command) = nullptr;
  /// The CUDA executor (executor/cuda/cuda_executor.h).
  exec::ExecuteResult (*execute_plan)(const Plan& plan, const exec::ExecuteOptions& options,
                                      MPI_Comm world) = nullptr;
};

/// The entry point the plugin exports (C linkage, so dlsym finds it by name).
using CudaPluginEntry = const CudaPlugin* (*)();
inline constexpr const char* kCudaPluginSymbol = "pw_cuda_plugin";
inline constexpr const char* kCudaPluginFile = "libpipewright_cuda.so";

/// Opens the plugin once: $PIPEWRIGHT_CUDA_PLUGIN if set, else libpipewright_cuda.so beside the
/// running binary, else in the installed lib/pipewright (relative to the binary's directory).
/// Returns nullptr with the reason in *why (not built, not found, the CUDA runtime missing:
/// dlopen's message, an ABI mismatch).
const CudaPlugin* load_cuda_plugin(std::string* why);

}  // namespace pw::tools
