#pragma once
/// MPI microbenchmarks between local processes: point-to-point ping-pong (latency and bandwidth,
/// one-way time = round trip / 2) and the collectives the CPU executor uses (all-reduce,
/// all-gather, reduce-scatter, broadcast), with nccl-tests columns and a correctness pass kept
/// apart from the timed iterations.
#include <string>
#include <vector>

#include "calibration/raw_results.h"

namespace pw::calibration {

/// The body of one MPI rank. Must run inside `mpirun -np N` (N >= 2): initialises and finalises
/// MPI itself; rank 0 writes the results (transfers + collectives, with provenance) as raw JSON
/// to `out_path`. Returns the process exit status (0 on success).
int run_mpi_worker(const std::string& out_path, bool quick);

/// How to start the MPI job.
struct MpiLaunch {
  std::string mpirun = "mpirun";
  int ranks = 2;
  /// The worker program and its arguments; the launcher appends the output path.
  std::vector<std::string> worker;
  bool quick = false;
};

/// Launches `mpirun -np ranks worker... OUT`, waits (at most 5 minutes), reads OUT and appends
/// its transfers and collectives to `raw` (and the MPI version to its provenance). Throws
/// ConfigError with mpirun's own error output when the job fails (no mpirun, no MPI, a crash).
/// Sets the Open MPI run-as-root variables when running as root.
void measure_mpi(const MpiLaunch& launch, RawResults& raw);

}  // namespace pw::calibration
