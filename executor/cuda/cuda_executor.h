#pragma once
/// Entry points of the CUDA executor (this header includes no CUDA header, so tools/ can use it).
#include <mpi.h>

#include "core/plan.h"
#include "executor/executor.h"

namespace pw::exec::cuda {

/// Number of CUDA devices visible to this process (0 without a driver or GPU).
int visible_devices();

/// Runs `plan` with options.backend "cuda" (one GPU per rank, rank r on device r % visible,
/// NCCL bootstrapped through MPI) or "cuda-single" (one process runs every pipeline device of a
/// dp = tp = 1 plan on one GPU, each on its own streams, device-to-device copies for the
/// point-to-point transfers). Missing GPU, an unsupported plan or a CUDA/NCCL failure: a message
/// naming the rank and the cause; setup errors throw the same ConfigError on every rank.
ExecuteResult execute_plan_cuda(const Plan& plan, const ExecuteOptions& options, MPI_Comm world);

}  // namespace pw::exec::cuda
