// cuBLAS GEMMs over the shapes a transformer layer issues, per dtype, with a correctness check of
// one output element per shape kept apart from the timed iterations.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cmath>

#include "calibration/cuda/cuda_check.h"
#include "calibration/cuda/cuda_internal.h"
#include "calibration/gemm_shapes.h"

namespace pw::calibration::cuda {
namespace {

struct DtypeConfig {
  const char* name;
  cudaDataType_t type;
  cublasComputeType_t compute;
  int bytes;
  bool bf16;
  double tolerance;  ///< relative error allowed on the checked element
};

const DtypeConfig kDtypes[] = {
    {"bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, true, 2e-2},
    {"fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, false, 1e-2},
    {"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, false, 1e-2},
    {"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, false, 1e-4},
};

/// Shapes per dtype: the tensor-core types get the full sweep plus GPT-3 175B layers (t = 1, 8),
/// fp32/tf32 a smaller one (they are not what training runs, and fp32 is slow).
std::vector<GemmShape> shapes_for(const DtypeConfig& d, bool quick) {
  bool tensor16 = d.bytes == 2;
  std::vector<int> hiddens, tokens;
  if (quick) {
    hiddens = tensor16 ? std::vector<int>{1024, 4096, 8192} : std::vector<int>{1024, 4096};
    tokens = tensor16 ? std::vector<int>{2048, 4096} : std::vector<int>{2048};
  } else {
    hiddens = tensor16 ? std::vector<int>{1024, 2048, 4096, 8192, 12288}
                       : std::vector<int>{1024, 2048, 4096};
    tokens = tensor16 ? std::vector<int>{512, 2048, 4096, 8192} : std::vector<int>{512, 2048};
  }
  auto shapes = gemm_sweep(hiddens, tokens, 128, true);
  if (tensor16) {
    for (int t : {1, 8}) {  // GPT-3 175B: h 12288, 96 heads, s 2048, b 1
      for (auto g : layer_gemms({12288, 96, 0, 2048, 1, t}, !quick)) {
        g.op = fmt::format("gpt3_t{}_{}", t, g.op);
        shapes.push_back(g);
      }
    }
  }
  return shapes;
}

float to_float(const void* p, int bytes, bool bf16) {
  if (bytes == 4) return *static_cast<const float*>(p);
  if (bf16) return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
  return __half2float(*static_cast<const __half*>(p));
}

/// C[0,0] (column-major) against row 0 of A times column 0 of B, in double on the host.
/// Returns false when the relative error exceeds the dtype's tolerance.
bool check_first_element(const DtypeConfig& d, const GemmShape& g, const void* a, const void* b,
                         const void* c) {
  std::vector<char> row(static_cast<size_t>(g.k) * d.bytes), col(row.size()), out(d.bytes);
  PW_CUDA_CHECK(cudaMemcpy2D(row.data(), d.bytes, a, static_cast<size_t>(g.m) * d.bytes, d.bytes,
                             g.k, cudaMemcpyDeviceToHost));
  PW_CUDA_CHECK(cudaMemcpy(col.data(), b, row.size(), cudaMemcpyDeviceToHost));
  PW_CUDA_CHECK(cudaMemcpy(out.data(), c, d.bytes, cudaMemcpyDeviceToHost));
  double ref = 0, mag = 0;
  for (long long i = 0; i < g.k; ++i) {
    double x = to_float(row.data() + i * d.bytes, d.bytes, d.bf16);
    double y = to_float(col.data() + i * d.bytes, d.bytes, d.bf16);
    ref += x * y;
    mag += std::abs(x * y);
  }
  double got = to_float(out.data(), d.bytes, d.bf16);
  return std::abs(got - ref) <= d.tolerance * std::max(mag, 1e-6);
}

GemmSample bench_one(cublasHandle_t h, cudaStream_t s, const DtypeConfig& d, const GemmShape& g,
                     bool quick) {
  size_t ea = static_cast<size_t>(g.m) * g.k, eb = static_cast<size_t>(g.k) * g.n,
         ec = static_cast<size_t>(g.m) * g.n;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  PW_CUDA_CHECK(cudaMalloc(&a, ea * g.batch * d.bytes));
  PW_CUDA_CHECK(cudaMalloc(&b, eb * g.batch * d.bytes));
  PW_CUDA_CHECK(cudaMalloc(&c, ec * g.batch * d.bytes));
  fill_random(a, ea * g.batch, d.bytes, d.bf16, 11, s);
  fill_random(b, eb * g.batch, d.bytes, d.bf16, 12, s);
  const float alpha = 1.0f, beta = 0.0f;
  auto fn = [&] {
    if (g.batch == 1) {
      PW_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, a, d.type,
                                   g.m, b, d.type, g.k, &beta, c, d.type, g.m, d.compute,
                                   CUBLAS_GEMM_DEFAULT));
    } else {
      PW_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          h, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, a, d.type, g.m, ea, b, d.type, g.k,
          eb, &beta, c, d.type, g.m, ec, g.batch, d.compute, CUBLAS_GEMM_DEFAULT));
    }
  };
  fn();  // the correctness check runs on its own call, before and apart from the timing
  PW_CUDA_CHECK(cudaStreamSynchronize(s));
  if (!check_first_element(d, g, a, b, c))
    throw InternalError(
        fmt::format("cuBLAS {} GEMM {}x{}x{} returned a wrong result", d.name, g.m, g.n, g.k));
  Timing t = time_stream(s, fn, 3, 5, quick ? 0.01 : 0.04);
  PW_CUDA_CHECK(cudaFree(a));
  PW_CUDA_CHECK(cudaFree(b));
  PW_CUDA_CHECK(cudaFree(c));
  return {g.op, d.name, g.m, g.n, g.k, g.batch, t};
}

}  // namespace

std::vector<GemmSample> bench_cublas(const CudaBenchOptions& o) {
  cudaStream_t s = nullptr;
  cublasHandle_t h = nullptr;
  PW_CUDA_CHECK(cudaStreamCreate(&s));
  PW_CUBLAS_CHECK(cublasCreate(&h));
  PW_CUBLAS_CHECK(cublasSetStream(h, s));
  std::vector<GemmSample> out;
  for (const auto& d : kDtypes) {
    auto shapes = shapes_for(d, o.quick);
    for (size_t i = 0; i < shapes.size(); ++i) {
      const GemmShape& g = shapes[i];
      if (o.progress)
        o.progress(fmt::format("gemm {} {}/{} {} {}x{}x{} batch {}", d.name, i + 1, shapes.size(),
                               g.op, g.m, g.n, g.k, g.batch));
      out.push_back(bench_one(h, s, d, g, o.quick));
    }
  }
  PW_CUBLAS_CHECK(cublasDestroy(h));
  PW_CUDA_CHECK(cudaStreamDestroy(s));
  return out;
}

}  // namespace pw::calibration::cuda
