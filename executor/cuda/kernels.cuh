#pragma once
/// Element-wise and row-wise kernels of the CUDA executor's transformer block (fp32 activations,
/// row-major [rows x cols] matrices). Every launcher enqueues on `stream` and checks the launch.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace pw::exec::cuda {

void to_bf16(const float* in, __nv_bfloat16* out, std::int64_t n, cudaStream_t stream);
/// out[r, c] += bias[c]
void add_bias(float* out, const float* bias, int rows, int cols, cudaStream_t stream);
/// out = a + b (element-wise), optionally + bias[c] when bias != nullptr.
void add(float* out, const float* a, const float* b, const float* bias, int rows, int cols,
         cudaStream_t stream);
/// Layer norm over each row: xhat, rstd (per row) and out = xhat * gamma + beta.
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* xhat,
                        float* rstd, float* out, int rows, int cols, cudaStream_t stream);
/// dx (+)= LN input gradient from d_out; `accumulate` adds into dx instead of overwriting.
void layer_norm_backward(const float* d_out, const float* xhat, const float* rstd,
                         const float* gamma, float* dx, int rows, int cols, bool accumulate,
                         cudaStream_t stream);
/// g = gelu(u) (tanh form) and du = dg * gelu'(u).
void gelu_forward(const float* u, float* g, std::int64_t n, cudaStream_t stream);
void gelu_backward(const float* u, const float* dg, float* du, std::int64_t n, cudaStream_t stream);
/// In-place causal softmax of `count` square [s x s] score blocks (row i keeps keys 0..i).
void causal_softmax_forward(float* p, int count, int s, cudaStream_t stream);
/// d_s = p * (d_p - rowsum(d_p * p)) * scale, in place in d_p.
void softmax_backward(const float* p, float* d_p, int count, int s, float scale,
                      cudaStream_t stream);
/// grad[c] += sum_r m[r, c] (or of m[r, c] * w[r, c] when w != nullptr).
void column_sum(const float* m, const float* w, float* grad, int rows, int cols,
                cudaStream_t stream);
/// x[i, :] = table[tokens[i], :] + pos[i % seq, :]
void embed(const int* tokens, const float* table, const float* pos, float* x, int rows, int cols,
           int seq, cudaStream_t stream);
/// table_grad[tokens[i], :] += d[i, :]; pos_grad[i % seq, :] += d[i, :] (atomics).
void embed_backward(const int* tokens, const float* d, float* table_grad, float* pos_grad, int rows,
                    int cols, int seq, cudaStream_t stream);
/// Per row: loss[i] = scale * (logsumexp - logit[target]), d_logits = scale * (softmax - onehot).
void cross_entropy(const float* logits, const int* targets, float* loss, float* d_logits, int rows,
                   int vocab, float scale, cudaStream_t stream);
/// w -= lr * g
void sgd(float* w, const float* g, std::int64_t n, float lr, cudaStream_t stream);

}  // namespace pw::exec::cuda
