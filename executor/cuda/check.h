#pragma once
/// Check macros for every CUDA runtime, cuBLAS and NCCL call of the CUDA executor: on failure
/// they print "pipewright execute: rank R: FILE:LINE: CALL failed: ERROR STRING" and abort every
/// rank (MPI_Abort), since one rank failing alone would leave the others hanging.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace pw::exec::cuda {

[[noreturn]] void fail(const char* file, int line, const char* call, const char* error);

}  // namespace pw::exec::cuda

#define PW_CUDA_CHECK(call)                                                           \
  do {                                                                                \
    cudaError_t pw_err_ = (call);                                                     \
    if (pw_err_ != cudaSuccess)                                                       \
      ::pw::exec::cuda::fail(__FILE__, __LINE__, #call, cudaGetErrorString(pw_err_)); \
  } while (0)

#define PW_CUBLAS_CHECK(call)                                                           \
  do {                                                                                  \
    cublasStatus_t pw_st_ = (call);                                                     \
    if (pw_st_ != CUBLAS_STATUS_SUCCESS)                                                \
      ::pw::exec::cuda::fail(__FILE__, __LINE__, #call, cublasGetStatusString(pw_st_)); \
  } while (0)

#define PW_NCCL_CHECK(call)                                                          \
  do {                                                                               \
    ncclResult_t pw_nr_ = (call);                                                    \
    if (pw_nr_ != ncclSuccess)                                                       \
      ::pw::exec::cuda::fail(__FILE__, __LINE__, #call, ncclGetErrorString(pw_nr_)); \
  } while (0)

/// Checks the last kernel launch.
#define PW_CUDA_CHECK_LAUNCH() PW_CUDA_CHECK(cudaGetLastError())
