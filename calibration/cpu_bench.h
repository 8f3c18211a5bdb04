#pragma once
/// CPU microbenchmarks: the executor's CPU backend kernels (Eigen float64 GEMMs of transformer
/// shapes, element-wise work, the executor's own layer passes) and memory bandwidth,
/// single-threaded as each executor rank runs, pinned to the slowest core the run may use (each
/// core probed first: the cores of a VM need not run alike).
/// Method (as nccl-tests): warm-up, then timed iterations, median/min/max kept.
#include <functional>
#include <string>
#include <vector>

#include "calibration/raw_results.h"

namespace pw::calibration {

/// Called with a short line of progress ("gemm 12/40 ..."); may be empty.
using Progress = std::function<void(const std::string&)>;

struct CpuBenchOptions {
  bool quick = false;
  /// Hidden sizes and tokens per microbatch of the GEMM sweep; empty = defaults (quick: h in
  /// {32, 64, 128, 256}, tokens in {16, 64, 128}; full adds 512 and 256/512 tokens).
  std::vector<int> hiddens;
  std::vector<int> tokens;
  int head_dim = 16;
  /// Wall-clock budget per measured point; at least `min_iterations` run regardless.
  double seconds_per_point = 0.0;  ///< 0 = default (quick 0.02 s, full 0.1 s)
  int min_iterations = 5;
  Progress progress;
};

/// Provenance of this host (CPU model, host name, RAM, Eigen and compiler versions, date).
/// `command` is recorded verbatim.
RawProvenance cpu_provenance(const std::string& command, bool quick);

/// Runs the GEMM sweep (float64), element-wise kernels and memory bandwidth. MPI is measured
/// separately (mpi_bench.h) because it needs more than one process.
RawResults run_cpu_benchmarks(const CpuBenchOptions& options, const std::string& command);

/// The cores this process may run on (its affinity mask: all of them, or what taskset or a
/// cgroup leaves), ascending; empty when the mask cannot be read.
std::vector<int> allowed_cores();

/// Pins the calling thread to one core while alive, and gives it back the mask it had.
/// `ok()` is false when the core cannot be pinned to (then nothing changed).
class CorePin {
 public:
  explicit CorePin(int core);
  ~CorePin();
  CorePin(const CorePin&) = delete;
  CorePin& operator=(const CorePin&) = delete;
  bool ok() const { return ok_; }

 private:
  std::vector<unsigned char> old_;  // the thread's mask before (a cpu_set_t's bytes)
  bool ok_ = false;
};

/// The core the benchmarks run pinned to: the slowest probe (largest median; the lowest core
/// number among equals). With one executor rank per core every step waits for the slowest
/// rank, so the profile describes that core. -1 when `probes` is empty.
int slowest_core(const std::vector<CoreProbe>& probes);

/// Times `fn` as the benchmarks do: one warm-up call, then samples until `budget_s` of this
/// thread's CPU time has passed (or 20x that of wall time) and at least `min_iterations` were
/// taken (at most 10000). Each sample is thread CPU time minus the clock's own cost: the work as
/// it runs on a core of its own, which is what the executor's model assumes, even on a busy
/// machine. A call shorter than 50 clock costs (or 5 us) is timed in batches: a sample is then a
/// batch's time over its calls, so that no sample reads 0.
Timing time_calls(const std::function<void()>& fn, double budget_s, int min_iterations);

}  // namespace pw::calibration
