#include "executor/cuda/check.h"
#include "executor/cuda/kernels.cuh"

namespace pw::exec::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kLnEps = 1e-5f;
constexpr float kGeluC = 0.7978845608028654f;

int blocks_for(std::int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// Block-wide sum (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < warps ? warp_sums[threadIdx.x] : 0.f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  const float out = total;
  __syncthreads();
  return out;
}

__device__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < warps ? warp_max[threadIdx.x] : -INFINITY;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  const float out = total;
  __syncthreads();
  return out;
}

__global__ void to_bf16_kernel(const float* in, __nv_bfloat16* out, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(in[i]);
}

__global__ void add_kernel(float* out, const float* a, const float* b, const float* bias, int rows,
                           int cols) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::int64_t>(rows) * cols) return;
  float v = (a ? a[i] : out[i]) + (b ? b[i] : 0.f);
  if (bias) v += bias[i % cols];
  out[i] = v;
}

__global__ void ln_forward_kernel(const float* x, const float* gamma, const float* beta,
                                  float* xhat, float* rstd, float* out, int cols) {
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  const float mean = block_sum(s) / cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) v += (xr[c] - mean) * (xr[c] - mean);
  const float r = rsqrtf(block_sum(v) / cols + kLnEps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * cols + c;
    const float h = (xr[c] - mean) * r;
    xhat[i] = h;
    out[i] = h * gamma[c] + beta[c];
  }
}

__global__ void ln_backward_kernel(const float* d_out, const float* xhat, const float* rstd,
                                   const float* gamma, float* dx, int cols, bool accumulate) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * cols;
  float m1 = 0.f, m2 = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = d_out[row + c] * gamma[c];
    m1 += g;
    m2 += g * xhat[row + c];
  }
  m1 = block_sum(m1) / cols;
  m2 = block_sum(m2) / cols;
  const float r = rstd[blockIdx.x];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = d_out[row + c] * gamma[c];
    const float v = r * (g - m1 - xhat[row + c] * m2);
    dx[row + c] = accumulate ? dx[row + c] + v : v;
  }
}

__global__ void gelu_forward_kernel(const float* u, float* g, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = u[i];
  g[i] = 0.5f * x * (1.f + tanhf(kGeluC * (x + 0.044715f * x * x * x)));
}

__global__ void gelu_backward_kernel(const float* u, const float* dg, float* du, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = u[i];
  const float t = tanhf(kGeluC * (x + 0.044715f * x * x * x));
  du[i] = dg[i] *
          (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluC * (1.f + 3.f * 0.044715f * x * x));
}

// One block per score row; `s` columns.
__global__ void causal_softmax_kernel(float* p, int s) {
  float* row = p + static_cast<std::int64_t>(blockIdx.x) * s;
  const int i = blockIdx.x % s;  // query position within its block
  float mx = -INFINITY;
  for (int c = threadIdx.x; c <= i; c += blockDim.x) mx = fmaxf(mx, row[c]);
  mx = block_max(mx);
  float sum = 0.f;
  for (int c = threadIdx.x; c <= i; c += blockDim.x) sum += __expf(row[c] - mx);
  sum = block_sum(sum);
  for (int c = threadIdx.x; c < s; c += blockDim.x)
    row[c] = c <= i ? __expf(row[c] - mx) / sum : 0.f;
}

__global__ void softmax_backward_kernel(const float* p, float* d_p, int s, float scale) {
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * s;
  float dot = 0.f;
  for (int c = threadIdx.x; c < s; c += blockDim.x) dot += d_p[off + c] * p[off + c];
  dot = block_sum(dot);
  for (int c = threadIdx.x; c < s; c += blockDim.x)
    d_p[off + c] = p[off + c] * (d_p[off + c] - dot) * scale;
}

__global__ void column_sum_kernel(const float* m, const float* w, float* grad, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.f;
  for (int r = 0; r < rows; ++r) {
    const std::int64_t i = static_cast<std::int64_t>(r) * cols + c;
    s += w ? m[i] * w[i] : m[i];
  }
  grad[c] += s;
}

__global__ void embed_kernel(const int* tokens, const float* table, const float* pos, float* x,
                             int rows, int cols, int seq) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::int64_t>(rows) * cols) return;
  const int r = static_cast<int>(i / cols), c = static_cast<int>(i % cols);
  x[i] = table[static_cast<std::int64_t>(tokens[r]) * cols + c] +
         pos[static_cast<std::int64_t>(r % seq) * cols + c];
}

__global__ void embed_backward_kernel(const int* tokens, const float* d, float* table_grad,
                                      float* pos_grad, int rows, int cols, int seq) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::int64_t>(rows) * cols) return;
  const int r = static_cast<int>(i / cols), c = static_cast<int>(i % cols);
  atomicAdd(&table_grad[static_cast<std::int64_t>(tokens[r]) * cols + c], d[i]);
  atomicAdd(&pos_grad[static_cast<std::int64_t>(r % seq) * cols + c], d[i]);
}

__global__ void cross_entropy_kernel(const float* logits, const int* targets, float* loss,
                                     float* d_logits, int vocab, float scale) {
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * vocab;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) mx = fmaxf(mx, logits[off + c]);
  mx = block_max(mx);
  float sum = 0.f;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) sum += __expf(logits[off + c] - mx);
  sum = block_sum(sum);
  const int t = targets[blockIdx.x];
  for (int c = threadIdx.x; c < vocab; c += blockDim.x)
    d_logits[off + c] = scale * (__expf(logits[off + c] - mx) / sum - (c == t ? 1.f : 0.f));
  if (threadIdx.x == 0) loss[blockIdx.x] = scale * (logf(sum) + mx - logits[off + t]);
}

__global__ void sgd_kernel(float* w, const float* g, std::int64_t n, float lr) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) w[i] -= lr * g[i];
}

int row_threads(int cols) { return cols >= 256 ? 256 : (cols >= 128 ? 128 : 64); }

}  // namespace

void to_bf16(const float* in, __nv_bfloat16* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  PW_CUDA_CHECK_LAUNCH();
}

void add_bias(float* out, const float* bias, int rows, int cols, cudaStream_t stream) {
  add(out, nullptr, nullptr, bias, rows, cols, stream);
}

void add(float* out, const float* a, const float* b, const float* bias, int rows, int cols,
         cudaStream_t stream) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * cols;
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, bias, rows, cols);
  PW_CUDA_CHECK_LAUNCH();
}

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* xhat,
                        float* rstd, float* out, int rows, int cols, cudaStream_t stream) {
  ln_forward_kernel<<<rows, row_threads(cols), 0, stream>>>(x, gamma, beta, xhat, rstd, out, cols);
  PW_CUDA_CHECK_LAUNCH();
}

void layer_norm_backward(const float* d_out, const float* xhat, const float* rstd,
                         const float* gamma, float* dx, int rows, int cols, bool accumulate,
                         cudaStream_t stream) {
  ln_backward_kernel<<<rows, row_threads(cols), 0, stream>>>(d_out, xhat, rstd, gamma, dx, cols,
                                                             accumulate);
  PW_CUDA_CHECK_LAUNCH();
}

void gelu_forward(const float* u, float* g, std::int64_t n, cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(u, g, n);
  PW_CUDA_CHECK_LAUNCH();
}

void gelu_backward(const float* u, const float* dg, float* du, std::int64_t n,
                   cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(u, dg, du, n);
  PW_CUDA_CHECK_LAUNCH();
}

void causal_softmax_forward(float* p, int count, int s, cudaStream_t stream) {
  causal_softmax_kernel<<<count * s, row_threads(s), 0, stream>>>(p, s);
  PW_CUDA_CHECK_LAUNCH();
}

void softmax_backward(const float* p, float* d_p, int count, int s, float scale,
                      cudaStream_t stream) {
  softmax_backward_kernel<<<count * s, row_threads(s), 0, stream>>>(p, d_p, s, scale);
  PW_CUDA_CHECK_LAUNCH();
}

void column_sum(const float* m, const float* w, float* grad, int rows, int cols,
                cudaStream_t stream) {
  column_sum_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(m, w, grad, rows, cols);
  PW_CUDA_CHECK_LAUNCH();
}

void embed(const int* tokens, const float* table, const float* pos, float* x, int rows, int cols,
           int seq, cudaStream_t stream) {
  embed_kernel<<<blocks_for(static_cast<std::int64_t>(rows) * cols), kThreads, 0, stream>>>(
      tokens, table, pos, x, rows, cols, seq);
  PW_CUDA_CHECK_LAUNCH();
}

void embed_backward(const int* tokens, const float* d, float* table_grad, float* pos_grad, int rows,
                    int cols, int seq, cudaStream_t stream) {
  embed_backward_kernel<<<blocks_for(static_cast<std::int64_t>(rows) * cols), kThreads, 0,
                          stream>>>(tokens, d, table_grad, pos_grad, rows, cols, seq);
  PW_CUDA_CHECK_LAUNCH();
}

void cross_entropy(const float* logits, const int* targets, float* loss, float* d_logits, int rows,
                   int vocab, float scale, cudaStream_t stream) {
  cross_entropy_kernel<<<rows, row_threads(vocab), 0, stream>>>(logits, targets, loss, d_logits,
                                                                vocab, scale);
  PW_CUDA_CHECK_LAUNCH();
}

void sgd(float* w, const float* g, std::int64_t n, float lr, cudaStream_t stream) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, n, lr);
  PW_CUDA_CHECK_LAUNCH();
}

}  // namespace pw::exec::cuda
