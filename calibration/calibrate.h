#pragma once
/// One calibration run, start to end: measure (or load raw results), fit, render the profile,
/// check that hwmodels loads it, and write it atomically. What `pipewright calibrate` calls.
#include <functional>
#include <string>
#include <vector>

#include "calibration/cpu_bench.h"
#include "calibration/fit.h"
#include "calibration/mpi_bench.h"

namespace pw::calibration {

/// Measures a GPU; supplied by calibration/cuda when built with CUDA (the library itself never
/// includes a CUDA header).
using CudaMeasure =
    std::function<RawResults(bool quick, const Progress& progress, const std::string& command)>;

struct CalibrateOptions {
  std::string backend = "cpu";  ///< cpu | cuda; "" with from_raw = as the raw file says
  bool quick = false;
  std::string out;       ///< profile YAML to write (required)
  std::string raw_out;   ///< raw JSON to write ("" = do not keep)
  std::string from_raw;  ///< fit this raw JSON instead of measuring ("" = measure)
  /// Fit a PyTorch profiler (Kineto) trace instead (calibration/kineto_trace.h); needs `base`.
  std::string from_trace;
  std::string base;          ///< base profile (name or path) for cuda; "" = chosen by GPU name
  std::string name;          ///< profile name; "" = calibrated-<backend>[-<gpu>]
  MpiLaunch mpi;             ///< how to start the 2-rank MPI job (CPU backend)
  bool skip_mpi = false;     ///< CPU: no MPI job; then only raw_out is written (out must be "")
  int ranks_per_node = 0;    ///< CPU: executor ranks per host in the profile; 0 = the cores
  CpuBenchOptions cpu;       ///< CPU sweep (quick is copied from `quick`)
  CudaMeasure measure_cuda;  ///< empty = this build has no CUDA calibration
  std::string command;       ///< command line, recorded in the provenance
  Progress progress;
};

/// The result of a run: the fits and a human-readable report of them.
struct CalibrateOutcome {
  FitResult fit;
  std::string report;
  std::string profile_text;
};

/// Runs calibration. Throws ConfigError for bad input (missing --out, a raw file of the other
/// backend, from another device than the base profile, or with missing fields; no GPU when the
/// CUDA backend was asked) and InternalError when a measurement fails; the profile file is
/// written only when everything succeeded (atomically).
CalibrateOutcome calibrate(const CalibrateOptions& options);

/// The GPU model designator in a device name ("NVIDIA H100 80GB HBM3" -> "H100"); "" if none.
std::string gpu_designator(const std::string& device);

/// Bytes the workload model counts over the bytes the CPU executor moves for the same work:
/// 0.5 for the streaming work the profile's HBM bandwidth times (Adam: 28 model bytes per
/// parameter, fp32 state and bf16 weight/gradient, against 56 in the executor, whose parameters,
/// gradients and both moments are float64: reads 4 x 8, writes 3 x 8), 1 for the element-wise
/// throughput (the fit to the executor's layer passes, and layer_mix, already count model bytes),
/// 2/8 for messages (the model sends bf16 activations, the executor float64). The first serves
/// only raw files without the executor's measured Adam step (whose fit counts model bytes).
inline constexpr double kCpuMemoryBytesRatio = 0.5;
inline constexpr double kCpuElementwiseBytesRatio = 1.0;
inline constexpr double kCpuLinkBytesRatio = 0.25;

}  // namespace pw::calibration
