// libpipewright_cuda.so: the CUDA calibration and executor behind the plain-C++ interface of
// tools/cuda_plugin.h. Only this module links cudart, cuBLAS and NCCL.
#include "calibration/cuda/cuda_bench.h"
#include "executor/cuda/cuda_executor.h"
#include "tools/cuda_plugin.h"

namespace {

pw::calibration::RawResults run_benchmarks(bool quick, const pw::calibration::Progress& progress,
                                           const std::string& command) {
  pw::calibration::cuda::CudaBenchOptions o;
  o.quick = quick;
  o.progress = progress;
  return pw::calibration::cuda::run_cuda_benchmarks(o, command);
}

const pw::tools::CudaPlugin kPlugin{pw::tools::kCudaPluginAbi, &pw::calibration::cuda::device_count,
                                    &run_benchmarks, &pw::exec::cuda::execute_plan_cuda};

}  // namespace

extern "C" __attribute__((visibility("default"))) const pw::tools::CudaPlugin* pw_cuda_plugin() {
  return &kPlugin;
}
