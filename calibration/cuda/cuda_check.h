#pragma once
/// Check macros for every CUDA, cuBLAS and NCCL call of the calibration benchmarks: a failure
/// throws pw::InternalError("FILE:LINE: CALL failed: ERROR STRING"). Internal to calibration/cuda.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "core/error.h"

namespace pw::calibration::cuda {

[[noreturn]] inline void throw_failure(const char* file, int line, const char* call,
                                       const std::string& error) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                      " failed: " + error);
}

inline const char* cublas_error_string(cublasStatus_t s) { return cublasGetStatusString(s); }

}  // namespace pw::calibration::cuda

#define PW_CUDA_CHECK(call)                                                \
  do {                                                                     \
    cudaError_t pw_err_ = (call);                                          \
    if (pw_err_ != cudaSuccess)                                            \
      ::pw::calibration::cuda::throw_failure(__FILE__, __LINE__, #call,    \
                                             cudaGetErrorString(pw_err_)); \
  } while (0)

#define PW_CUBLAS_CHECK(call)                                                               \
  do {                                                                                      \
    cublasStatus_t pw_st_ = (call);                                                         \
    if (pw_st_ != CUBLAS_STATUS_SUCCESS)                                                    \
      ::pw::calibration::cuda::throw_failure(                                               \
          __FILE__, __LINE__, #call, ::pw::calibration::cuda::cublas_error_string(pw_st_)); \
  } while (0)

#define PW_NCCL_CHECK(call)                                                \
  do {                                                                     \
    ncclResult_t pw_res_ = (call);                                         \
    if (pw_res_ != ncclSuccess)                                            \
      ::pw::calibration::cuda::throw_failure(__FILE__, __LINE__, #call,    \
                                             ncclGetErrorString(pw_res_)); \
  } while (0)
