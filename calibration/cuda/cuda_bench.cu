// Single-GPU benchmarks (memory bandwidth, element-wise kernels, launch latency, pinned copies),
// provenance, and the orchestration of the whole CUDA calibration run.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "calibration/cuda/cuda_bench.h"
#include "calibration/cuda/cuda_check.h"
#include "calibration/cuda/cuda_internal.h"
#include "core/error.h"

namespace pw::calibration::cuda {
namespace {

__device__ __forceinline__ float hash_value(size_t i, unsigned seed) {
  unsigned x = static_cast<unsigned>(i) * 2654435761u ^ (seed * 0x9E3779B9u);
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  return static_cast<float>(x & 0xFFFFFF) / 8388608.0f - 1.0f;
}

__global__ void fill_kernel(void* p, size_t n, int bytes, bool bf16, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float v = hash_value(i, seed);
    if (bytes == 4)
      static_cast<float*>(p)[i] = v;
    else if (bf16)
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
    else
      static_cast<__half*>(p)[i] = __float2half(v);
  }
}

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

__global__ void scale_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float4 v = in[i];
    out[i] = make_float4(1.0001f * v.x, 1.0001f * v.y, 1.0001f * v.z, 1.0001f * v.w);
  }
}

__global__ void add_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                           float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void read_kernel(const float4* __restrict__ in, size_t n, float* sink) {
  float acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float4 v = in[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.678f) *sink = acc;  // practically never: keeps the loads alive
}

/// GELU (tanh form) on bf16, as the executor's CUDA element-wise kernels run it.
__global__ void gelu_kernel(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out,
                            size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float u = __bfloat162float(in[i]);
    float t = tanhf(0.7978845608f * (u + 0.044715f * u * u * u));
    out[i] = __float2bfloat16(0.5f * u * (1.0f + t));
  }
}

__global__ void empty_kernel() {}

int grid_for(int sms) { return sms * 8; }

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

/// Dense peak FLOP/s per dtype from SMs x clock x per-SM rate of the architecture (NVIDIA
/// A100/H100/B200 whitepapers); empty for architectures not listed (the fit then uses its own
/// asymptote).
std::map<std::string, double> peak_flops(int major, int minor, int sms, double clock_hz) {
  double per_sm_bf16 = 0, per_sm_tf32 = 0, per_sm_fp32 = 0;
  if (major == 8 && minor == 0) {  // A100: 1024 dense FP16 FMA/clk/SM
    per_sm_bf16 = 2048, per_sm_tf32 = 1024, per_sm_fp32 = 128;
  } else if (major == 9) {  // H100/H200
    per_sm_bf16 = 4096, per_sm_tf32 = 2048, per_sm_fp32 = 256;
  } else if (major == 10) {  // B200
    per_sm_bf16 = 8192, per_sm_tf32 = 4096, per_sm_fp32 = 256;
  } else {
    return {};
  }
  double k = sms * clock_hz;
  return {{"bf16", per_sm_bf16 * k},
          {"fp16", per_sm_bf16 * k},
          {"tf32", per_sm_tf32 * k},
          {"fp32", per_sm_fp32 * k}};
}

RawProvenance provenance(int device, int count, const std::string& command, bool quick) {
  cudaDeviceProp prop{};
  PW_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int clock_khz = 0, mem_khz = 0, bus_bits = 0, driver = 0, runtime = 0, cublas = 0, nccl = 0;
  PW_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  PW_CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
  PW_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  PW_CUDA_CHECK(cudaDriverGetVersion(&driver));
  PW_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  cublasHandle_t h = nullptr;
  PW_CUBLAS_CHECK(cublasCreate(&h));
  PW_CUBLAS_CHECK(cublasGetVersion(h, &cublas));
  PW_CUBLAS_CHECK(cublasDestroy(h));
  PW_NCCL_CHECK(ncclGetVersion(&nccl));
  RawProvenance p;
  p.backend = "cuda";
  p.device = prop.name;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) p.host = host;
  p.driver = version_string(driver);
  p.cuda = version_string(runtime);
  p.cublas = fmt::format("{}.{}.{}", cublas / 10000, (cublas / 100) % 100, cublas % 100);
  p.nccl = fmt::format("{}.{}.{}", nccl / 10000, (nccl / 100) % 100, nccl % 100);
  p.compiler = fmt::format("nvcc {}.{}", __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__);
  p.clocks = fmt::format("SM {} MHz (max), memory {} MHz, bus {} bit, compute capability {}.{}",
                         clock_khz / 1000, mem_khz / 1000, bus_bits, prop.major, prop.minor);
  p.date = utc_now();
  p.command = command;
  p.device_count = count;
  p.compute_units = prop.multiProcessorCount;
  p.memory_bytes = static_cast<double>(prop.totalGlobalMem);
  p.memory_bandwidth = 2.0 * mem_khz * 1e3 * bus_bits / 8.0;  // double data rate
  p.peak_flops = peak_flops(prop.major, prop.minor, prop.multiProcessorCount, clock_khz * 1e3);
  p.quick = quick;
  return p;
}

std::vector<MemorySample> bench_memory(const CudaBenchOptions& o, int sms, cudaStream_t s) {
  size_t max_bytes = (o.quick ? 256ull : 2048ull) << 20;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  float* sink = nullptr;
  PW_CUDA_CHECK(cudaMalloc(&a, max_bytes));
  PW_CUDA_CHECK(cudaMalloc(&b, max_bytes));
  PW_CUDA_CHECK(cudaMalloc(&c, max_bytes));
  PW_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  fill_random(a, max_bytes / 4, 4, false, 1, s);
  fill_random(b, max_bytes / 4, 4, false, 2, s);
  std::vector<MemorySample> out;
  const char* kernels[] = {"copy", "scale", "read", "add", "gelu"};
  int grid = grid_for(sms);
  for (const char* k : kernels) {
    for (size_t bytes = 64 << 10; bytes <= max_bytes; bytes *= 4) {
      if (o.progress) o.progress(fmt::format("memory {} {} KiB", k, bytes >> 10));
      size_t n4 = bytes / 16;
      auto* fa = static_cast<float4*>(a);
      auto* fb = static_cast<float4*>(b);
      auto* fc = static_cast<float4*>(c);
      std::string name = k;
      double moved = name == "read" ? bytes : name == "add" ? 3.0 * bytes : 2.0 * bytes;
      auto fn = [&] {
        if (name == "copy") copy_kernel<<<grid, 256, 0, s>>>(fa, fc, n4);
        if (name == "scale") scale_kernel<<<grid, 256, 0, s>>>(fa, fc, n4);
        if (name == "read") read_kernel<<<grid, 256, 0, s>>>(fa, n4, sink);
        if (name == "add") add_kernel<<<grid, 256, 0, s>>>(fa, fb, fc, n4);
        if (name == "gelu")
          gelu_kernel<<<grid, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(a),
                                           static_cast<__nv_bfloat16*>(c), bytes / 2);
        PW_CUDA_CHECK(cudaGetLastError());
      };
      Timing t = time_stream(s, fn, 3, 10, o.quick ? 0.01 : 0.05);
      out.push_back({name, name == "gelu" ? "bf16" : "fp32", moved, t});
    }
  }
  PW_CUDA_CHECK(cudaFree(a));
  PW_CUDA_CHECK(cudaFree(b));
  PW_CUDA_CHECK(cudaFree(c));
  PW_CUDA_CHECK(cudaFree(sink));
  return out;
}

double bench_launch(cudaStream_t s) {
  const int kLaunches = 1000;
  auto fn = [&] {
    for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1, 0, s>>>();
    PW_CUDA_CHECK(cudaGetLastError());
  };
  return time_stream(s, fn, 2, 7, 0.0).median_s / kLaunches;
}

std::vector<TransferSample> bench_transfers(const CudaBenchOptions& o, cudaStream_t s) {
  size_t max_bytes = (o.quick ? 64ull : 1024ull) << 20;
  void *host = nullptr, *dev = nullptr;
  PW_CUDA_CHECK(cudaMallocHost(&host, max_bytes));
  PW_CUDA_CHECK(cudaMalloc(&dev, max_bytes));
  std::vector<TransferSample> out;
  for (int dir = 0; dir < 2; ++dir) {
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
      if (o.progress)
        o.progress(
            fmt::format("pinned {} {} B", dir == 0 ? "host-to-device" : "device-to-host", bytes));
      auto fn = [&] {
        if (dir == 0)
          PW_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
        else
          PW_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
      };
      Timing t = time_stream(s, fn, 3, 10, o.quick ? 0.01 : 0.05);
      out.push_back({dir == 0 ? "h2d_pinned" : "d2h_pinned", static_cast<double>(bytes), t});
    }
  }
  PW_CUDA_CHECK(cudaFreeHost(host));
  PW_CUDA_CHECK(cudaFree(dev));
  return out;
}

}  // namespace

Timing time_stream(cudaStream_t stream, const std::function<void()>& fn, int warmup, int min_iters,
                   double budget_s) {
  for (int i = 0; i < warmup; ++i) fn();
  PW_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> samples;
  cudaEvent_t start = nullptr, stop = nullptr;
  PW_CUDA_CHECK(cudaEventCreate(&start));
  PW_CUDA_CHECK(cudaEventCreate(&stop));
  double spent = 0;
  while (samples.size() < 1000 &&
         (static_cast<int>(samples.size()) < min_iters || spent < budget_s)) {
    PW_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    PW_CUDA_CHECK(cudaEventRecord(stop, stream));
    PW_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    PW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms * 1e-3);
    spent += ms * 1e-3;
  }
  PW_CUDA_CHECK(cudaEventDestroy(start));
  PW_CUDA_CHECK(cudaEventDestroy(stop));
  return summarize(std::move(samples));
}

void fill_random(void* p, size_t n, int bytes_per_element, bool bf16, unsigned seed,
                 cudaStream_t stream) {
  fill_kernel<<<1024, 256, 0, stream>>>(p, n, bytes_per_element, bf16, seed);
  PW_CUDA_CHECK(cudaGetLastError());
}

int device_count(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error for later callers
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "no CUDA device found";
  return n;
}

RawResults run_cuda_benchmarks(const CudaBenchOptions& o, const std::string& command) {
  std::string why;
  int count = device_count(&why);
  if (count == 0)
    throw ConfigError("--backend", "",
                      "cuda: no usable GPU on this machine (" + why + "); use --backend cpu");
  if (o.device < 0 || o.device >= count)
    throw ConfigError("--device", "", fmt::format("expected 0..{}", count - 1));
  PW_CUDA_CHECK(cudaSetDevice(o.device));
  RawResults raw;
  raw.provenance = provenance(o.device, count, command, o.quick);
  cudaStream_t s = nullptr;
  PW_CUDA_CHECK(cudaStreamCreate(&s));
  if (o.progress) o.progress("kernel launch latency");
  raw.launch_latency_s = bench_launch(s);
  raw.memory = bench_memory(o, raw.provenance.compute_units, s);
  raw.transfers = bench_transfers(o, s);
  PW_CUDA_CHECK(cudaStreamDestroy(s));
  raw.gemms = bench_cublas(o);
  std::string nccl_version;
  raw.collectives = bench_nccl(o, &nccl_version);
  return raw;
}

}  // namespace pw::calibration::cuda
