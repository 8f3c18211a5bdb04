// NCCL collectives across all local GPUs from one process (one communicator per GPU, as
// nccl-tests' single-process mode), fp32 sum, sizes 8 B to 4 GiB (quick: 256 MiB). Timed with
// CUDA events on every GPU's stream; a sample is the slowest GPU. Correctness is checked on a
// separate call with known inputs, counting wrong elements on the device.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>

#include "calibration/cuda/cuda_check.h"
#include "calibration/cuda/cuda_internal.h"

namespace pw::calibration::cuda {
namespace {

__global__ void fill_constant(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

/// Counts elements differing from the expectation: `constant`, or (i / chunk) + 1 when chunk > 0.
__global__ void count_wrong(const float* p, size_t n, size_t chunk, float constant,
                            unsigned long long* wrong) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float expect = chunk > 0 ? static_cast<float>(i / chunk + 1) : constant;
    local += p[i] != expect;
  }
  if (local > 0) atomicAdd(wrong, local);
}

struct Gpus {
  int n = 0;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<float*> send, recv;
  std::vector<unsigned long long*> wrong;
  size_t capacity = 0;  ///< bytes per buffer
};

enum class Op { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecv };
const char* op_name(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "all_reduce";
    case Op::kAllGather:
      return "all_gather";
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kSendRecv:
      return "send_recv";
  }
  return "?";
}

/// Element counts as nccl-tests sizes them: S bytes total; per-rank send and receive counts.
bool counts(Op op, size_t bytes, int n, size_t* send, size_t* recv) {
  size_t total = bytes / sizeof(float);
  if (op == Op::kAllGather)
    *send = total / n, *recv = *send * n;
  else if (op == Op::kReduceScatter)
    *recv = total / n, *send = *recv * n;
  else
    *send = *recv = total;
  return *send > 0 && *recv > 0;
}

void enqueue(Gpus& g, Op op, size_t send, size_t recv) {
  PW_NCCL_CHECK(ncclGroupStart());
  for (int d = 0; d < g.n; ++d) {
    switch (op) {
      case Op::kAllReduce:
        PW_NCCL_CHECK(ncclAllReduce(g.send[d], g.recv[d], send, ncclFloat, ncclSum, g.comms[d],
                                    g.streams[d]));
        break;
      case Op::kAllGather:
        PW_NCCL_CHECK(
            ncclAllGather(g.send[d], g.recv[d], send, ncclFloat, g.comms[d], g.streams[d]));
        break;
      case Op::kReduceScatter:
        PW_NCCL_CHECK(ncclReduceScatter(g.send[d], g.recv[d], recv, ncclFloat, ncclSum, g.comms[d],
                                        g.streams[d]));
        break;
      case Op::kBroadcast:
        PW_NCCL_CHECK(
            ncclBroadcast(g.send[d], g.recv[d], send, ncclFloat, 0, g.comms[d], g.streams[d]));
        break;
      case Op::kSendRecv:  // ring: send to the next GPU, receive from the previous one
        PW_NCCL_CHECK(
            ncclSend(g.send[d], send, ncclFloat, (d + 1) % g.n, g.comms[d], g.streams[d]));
        PW_NCCL_CHECK(
            ncclRecv(g.recv[d], recv, ncclFloat, (d + g.n - 1) % g.n, g.comms[d], g.streams[d]));
        break;
    }
  }
  PW_NCCL_CHECK(ncclGroupEnd());
}

std::int64_t check(Gpus& g, Op op, size_t send, size_t recv) {
  for (int d = 0; d < g.n; ++d) {
    PW_CUDA_CHECK(cudaSetDevice(d));
    fill_constant<<<1024, 256, 0, g.streams[d]>>>(g.send[d], send, static_cast<float>(d + 1));
    PW_CUDA_CHECK(cudaGetLastError());
    PW_CUDA_CHECK(cudaMemsetAsync(g.wrong[d], 0, sizeof(unsigned long long), g.streams[d]));
  }
  enqueue(g, op, send, recv);
  float sum = g.n * (g.n + 1) / 2.0f;
  std::int64_t total = 0;
  for (int d = 0; d < g.n; ++d) {
    PW_CUDA_CHECK(cudaSetDevice(d));
    size_t chunk = op == Op::kAllGather ? send : 0;
    float constant = op == Op::kBroadcast  ? 1.0f
                     : op == Op::kSendRecv ? static_cast<float>((d + g.n - 1) % g.n + 1)
                                           : sum;
    count_wrong<<<1024, 256, 0, g.streams[d]>>>(g.recv[d], recv, chunk, constant, g.wrong[d]);
    PW_CUDA_CHECK(cudaGetLastError());
    unsigned long long w = 0;
    PW_CUDA_CHECK(cudaMemcpyAsync(&w, g.wrong[d], sizeof w, cudaMemcpyDeviceToHost, g.streams[d]));
    PW_CUDA_CHECK(cudaStreamSynchronize(g.streams[d]));
    total += static_cast<std::int64_t>(w);
  }
  return total;
}

Timing time_op(Gpus& g, Op op, size_t send, size_t recv, size_t bytes, bool quick) {
  int iters = bytes >= (256u << 20) ? 5 : bytes >= (4u << 20) ? 20 : 50;
  if (quick) iters = std::max(3, iters / 2);
  for (int w = 0; w < 5; ++w) enqueue(g, op, send, recv);
  std::vector<cudaEvent_t> start(g.n), stop(g.n);
  for (int d = 0; d < g.n; ++d) {
    PW_CUDA_CHECK(cudaSetDevice(d));
    PW_CUDA_CHECK(cudaEventCreate(&start[d]));
    PW_CUDA_CHECK(cudaEventCreate(&stop[d]));
  }
  std::vector<double> samples;
  for (int it = 0; it < iters; ++it) {
    for (int d = 0; d < g.n; ++d) {
      PW_CUDA_CHECK(cudaSetDevice(d));
      PW_CUDA_CHECK(cudaEventRecord(start[d], g.streams[d]));
    }
    enqueue(g, op, send, recv);
    double slowest = 0;
    for (int d = 0; d < g.n; ++d) {
      PW_CUDA_CHECK(cudaSetDevice(d));
      PW_CUDA_CHECK(cudaEventRecord(stop[d], g.streams[d]));
    }
    for (int d = 0; d < g.n; ++d) {
      PW_CUDA_CHECK(cudaEventSynchronize(stop[d]));
      float ms = 0;
      PW_CUDA_CHECK(cudaEventElapsedTime(&ms, start[d], stop[d]));
      slowest = std::max(slowest, ms * 1e-3);
    }
    samples.push_back(slowest);
  }
  for (int d = 0; d < g.n; ++d) {
    PW_CUDA_CHECK(cudaEventDestroy(start[d]));
    PW_CUDA_CHECK(cudaEventDestroy(stop[d]));
  }
  return summarize(std::move(samples));
}

void setup(Gpus& g, size_t capacity) {
  g.comms.resize(g.n);
  g.streams.resize(g.n);
  g.send.resize(g.n);
  g.recv.resize(g.n);
  g.wrong.resize(g.n);
  g.capacity = capacity;
  std::vector<int> devs(g.n);
  for (int d = 0; d < g.n; ++d) devs[d] = d;
  PW_NCCL_CHECK(ncclCommInitAll(g.comms.data(), g.n, devs.data()));
  for (int d = 0; d < g.n; ++d) {
    PW_CUDA_CHECK(cudaSetDevice(d));
    PW_CUDA_CHECK(cudaStreamCreateWithFlags(&g.streams[d], cudaStreamNonBlocking));
    PW_CUDA_CHECK(cudaMalloc(&g.send[d], capacity));
    PW_CUDA_CHECK(cudaMalloc(&g.recv[d], capacity));
    PW_CUDA_CHECK(cudaMalloc(&g.wrong[d], sizeof(unsigned long long)));
  }
}

void teardown(Gpus& g) {
  for (int d = 0; d < g.n; ++d) {
    PW_CUDA_CHECK(cudaSetDevice(d));
    PW_CUDA_CHECK(cudaFree(g.send[d]));
    PW_CUDA_CHECK(cudaFree(g.recv[d]));
    PW_CUDA_CHECK(cudaFree(g.wrong[d]));
    PW_CUDA_CHECK(cudaStreamDestroy(g.streams[d]));
    PW_NCCL_CHECK(ncclCommDestroy(g.comms[d]));
  }
  PW_CUDA_CHECK(cudaSetDevice(0));
}

}  // namespace

std::vector<CollectiveSample> bench_nccl(const CudaBenchOptions& o, std::string* version) {
  int nccl = 0;
  PW_NCCL_CHECK(ncclGetVersion(&nccl));
  *version = std::to_string(nccl);
  Gpus g;
  PW_CUDA_CHECK(cudaGetDeviceCount(&g.n));
  size_t max_bytes = o.quick ? (256ull << 20) : (4ull << 30);
  setup(g, max_bytes);
  std::vector<CollectiveSample> out;
  for (Op op :
       {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter, Op::kBroadcast, Op::kSendRecv}) {
    if (op == Op::kSendRecv && g.n < 2) continue;  // needs a peer
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= (o.quick ? 4 : 2)) {
      size_t send = 0, recv = 0;
      if (!counts(op, bytes, g.n, &send, &recv)) continue;
      if (o.progress) o.progress(fmt::format("nccl {} x{} {} B", op_name(op), g.n, bytes));
      std::int64_t wrong = check(g, op, send, recv);
      Timing t = time_op(g, op, send, recv, bytes, o.quick);
      double total = static_cast<double>(std::max(send, recv) * sizeof(float));
      out.push_back({"nccl", op_name(op), g.n, total, t, wrong});
    }
  }
  teardown(g);
  return out;
}

}  // namespace pw::calibration::cuda
