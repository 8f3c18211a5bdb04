#include "executor/cuda/device_stage.h"

#include <algorithm>
#include <cmath>

#include "executor/cuda/check.h"
#include "executor/cuda/kernels.cuh"

namespace pw::exec::cuda {

void NcclGroup::all_reduce(float* buf, std::size_t n, cudaStream_t compute) {
  if (comm == nullptr || (size <= 1 && !always)) return;
  PW_CUDA_CHECK(cudaEventRecord(ready, compute));
  PW_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  PW_NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream));
  PW_CUDA_CHECK(cudaEventRecord(done, stream));
  PW_CUDA_CHECK(cudaStreamWaitEvent(compute, done, 0));
}

float* DeviceStage::alloc(std::size_t n) {
  void* ptr = nullptr;
  PW_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(float)));
  allocations_.push_back(ptr);
  return static_cast<float*>(ptr);
}

DeviceStage::DeviceStage(const StageModel& init, const ModelDims& dims, bool has_embedding,
                         bool has_head, int num_microbatches, float loss_scale, cublasHandle_t blas,
                         NcclGroup* tp)
    : dims_(dims),
      has_embedding_(has_embedding),
      has_head_(has_head),
      loss_scale_(loss_scale),
      blas_(blas),
      tp_(tp) {
  // Parameters: one contiguous fp32 block (weights), one for gradients, one bf16 shadow.
  std::vector<float> host;
  for (const Tensor& t : init.tensors()) {
    if (t.layer == kEmbeddingLayer && t.id == 0)
      embedding_param_ = static_cast<int>(params_.size());
    if (t.layer == kHeadLayer) head_param_ = static_cast<int>(params_.size());
    if (t.layer >= 0 && t.id == 0 && num_layers_++ == 0)
      first_layer_param_ = static_cast<int>(params_.size());
    params_.push_back(Param{static_cast<int>(t.value.rows()), static_cast<int>(t.value.cols()),
                            nullptr, nullptr, nullptr});
    for (Eigen::Index k = 0; k < t.value.size(); ++k)
      host.push_back(static_cast<float>(t.value.data()[k]));
  }
  num_params_ = host.size();
  weights_ = alloc(num_params_);
  grads_ = alloc(num_params_);
  void* bf = nullptr;
  PW_CUDA_CHECK(cudaMalloc(&bf, std::max<std::size_t>(num_params_, 1) * sizeof(__nv_bfloat16)));
  allocations_.push_back(bf);
  weights_bf16_ = static_cast<__nv_bfloat16*>(bf);
  PW_CUDA_CHECK(
      cudaMemcpy(weights_, host.data(), num_params_ * sizeof(float), cudaMemcpyHostToDevice));
  to_bf16(weights_, weights_bf16_, static_cast<std::int64_t>(num_params_), nullptr);
  PW_CUDA_CHECK(cudaMemset(grads_, 0, num_params_ * sizeof(float)));
  std::size_t off = 0;
  for (Param& q : params_) {
    q.w = weights_ + off;
    q.g = grads_ + off;
    q.wb = weights_bf16_ + off;
    off += static_cast<std::size_t>(q.rows) * q.cols;
  }
  // Activations, saved state and scratch for every microbatch, allocated once.
  const std::size_t n = dims.tokens(), h = dims.hidden, hl = dims.local_hidden(),
                    fl = dims.local_ffn(), v = dims.vocab;
  const std::size_t probs =
      static_cast<std::size_t>(dims.micro_batch) * dims.local_heads() * dims.seq * dims.seq;
  const std::size_t widest = n * std::max({3 * hl, fl, h, v});
  scratch_elems_ = std::max(widest, probs);
  for (auto** s : {&scratch_a_, &scratch_b_, &scratch_c_}) {
    void* ptr = nullptr;
    PW_CUDA_CHECK(cudaMalloc(&ptr, scratch_elems_ * sizeof(__nv_bfloat16)));
    allocations_.push_back(ptr);
    *s = static_cast<__nv_bfloat16*>(ptr);
  }
  tmp_ = alloc(widest);
  tmp2_ = alloc(probs);
  mb_.resize(static_cast<std::size_t>(num_microbatches));
  for (Micro& m : mb_) {
    m.input = alloc(n * h);
    m.output = alloc(n * h);
    m.d_input = alloc(n * h);
    m.d_embed = has_embedding ? alloc(n * h) : nullptr;
    m.logits = has_head ? alloc(n * v) : nullptr;
    m.d_logits = has_head ? alloc(n * v) : nullptr;
    m.loss = has_head ? alloc(n) : nullptr;
    m.tokens = reinterpret_cast<int*>(alloc(n));
    m.targets = reinterpret_cast<int*>(alloc(n));
    m.layers.resize(static_cast<std::size_t>(num_layers_));
    for (Layer& c : m.layers) {
      for (float** f :
           {&c.x, &c.xhat1, &c.a, &c.x1, &c.xhat2, &c.a2, &c.d_a, &c.d_y, &c.d_a2, &c.d_z})
        *f = alloc(n * h);
      c.rstd1 = alloc(n);
      c.rstd2 = alloc(n);
      c.qkv = alloc(n * 3 * hl);
      c.d_qkv = alloc(n * 3 * hl);
      c.probs = alloc(probs);
      c.ctx = alloc(n * hl);
      c.u = alloc(n * fl);
      c.g = alloc(n * fl);
      c.d_u = alloc(n * fl);
    }
  }
}

DeviceStage::~DeviceStage() {
  for (void* p : allocations_) cudaFree(p);  // no check: may run while aborting
}

void DeviceStage::gemm(const float* a, bool ta, const float* b, bool tb, float* c, int m, int n,
                       int k, float beta, cudaStream_t s) {
  to_bf16(a, scratch_a_, static_cast<std::int64_t>(m) * k, s);
  to_bf16(b, scratch_b_, static_cast<std::int64_t>(k) * n, s);
  const float alpha = 1.f;
  PW_CUBLAS_CHECK(cublasSetStream(blas_, s));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  PW_CUBLAS_CHECK(cublasGemmEx(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                               ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, scratch_b_,
                               CUDA_R_16BF, tb ? k : n, scratch_a_, CUDA_R_16BF, ta ? m : k, &beta,
                               c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void DeviceStage::gemm_w(const float* a, bool ta, const Param& w, bool tb, float* c, int m, int n,
                         int k, cudaStream_t s) {
  to_bf16(a, scratch_a_, static_cast<std::int64_t>(m) * k, s);
  const float alpha = 1.f, beta = 0.f;
  PW_CUBLAS_CHECK(cublasSetStream(blas_, s));
  PW_CUBLAS_CHECK(cublasGemmEx(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                               ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, w.wb, CUDA_R_16BF,
                               tb ? k : n, scratch_a_, CUDA_R_16BF, ta ? m : k, &beta, c,
                               CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

namespace {

// Strided-batched row-major GEMM over the heads of one sequence (bf16 in, fp32 out).
void batched(cublasHandle_t h, const __nv_bfloat16* a, int lda, long long sa, bool ta,
             const __nv_bfloat16* b, int ldb, long long sb, bool tb, float* c, int ldc,
             long long sc, int m, int n, int k, float alpha, int batch) {
  const float beta = 0.f;
  PW_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
      CUDA_R_16BF, ldb, sb, a, CUDA_R_16BF, lda, sa, &beta, c, CUDA_R_32F, ldc, sc, batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void DeviceStage::attention_forward(Layer& c, cudaStream_t s) {
  const int sq = dims_.seq, dh = dims_.head_dim(), hl = dims_.local_hidden(),
            lh = dims_.local_heads(), w = 3 * hl;
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  const long long ss = static_cast<long long>(sq) * sq;
  PW_CUBLAS_CHECK(cublasSetStream(blas_, s));
  to_bf16(c.qkv, scratch_a_, static_cast<std::int64_t>(dims_.tokens()) * w, s);
  for (int b = 0; b < dims_.micro_batch; ++b) {
    const __nv_bfloat16* q = scratch_a_ + static_cast<std::size_t>(b) * sq * w;
    batched(blas_, q, w, dh, false, q + hl, w, dh, true, c.probs + b * lh * ss, sq, ss, sq, sq, dh,
            scale, lh);
  }
  causal_softmax_forward(c.probs, dims_.micro_batch * lh, sq, s);
  to_bf16(c.probs, scratch_b_, dims_.micro_batch * lh * ss, s);
  for (int b = 0; b < dims_.micro_batch; ++b) {
    const __nv_bfloat16* v = scratch_a_ + static_cast<std::size_t>(b) * sq * w + 2 * hl;
    batched(blas_, scratch_b_ + b * lh * ss, sq, ss, false, v, w, dh, false,
            c.ctx + static_cast<std::size_t>(b) * sq * hl, hl, dh, sq, dh, sq, 1.f, lh);
  }
}

void DeviceStage::attention_backward(Layer& c, const float* d_ctx, cudaStream_t s) {
  const int sq = dims_.seq, dh = dims_.head_dim(), hl = dims_.local_hidden(),
            lh = dims_.local_heads(), w = 3 * hl, nb = dims_.micro_batch;
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  const long long ss = static_cast<long long>(sq) * sq;
  PW_CUBLAS_CHECK(cublasSetStream(blas_, s));
  to_bf16(c.qkv, scratch_a_, static_cast<std::int64_t>(dims_.tokens()) * w, s);
  to_bf16(d_ctx, scratch_b_, static_cast<std::int64_t>(dims_.tokens()) * hl, s);
  to_bf16(c.probs, scratch_c_, nb * lh * ss, s);
  for (int b = 0; b < nb; ++b) {
    const __nv_bfloat16* qkv = scratch_a_ + static_cast<std::size_t>(b) * sq * w;
    const __nv_bfloat16* d_o = scratch_b_ + static_cast<std::size_t>(b) * sq * hl;
    // dP_h = dO_h V_h^T
    batched(blas_, d_o, hl, dh, false, qkv + 2 * hl, w, dh, true, tmp2_ + b * lh * ss, sq, ss, sq,
            sq, dh, 1.f, lh);
    // dV_h = P_h^T dO_h
    batched(blas_, scratch_c_ + b * lh * ss, sq, ss, true, d_o, hl, dh, false,
            c.d_qkv + static_cast<std::size_t>(b) * sq * w + 2 * hl, w, dh, sq, dh, sq, 1.f, lh);
  }
  softmax_backward(c.probs, tmp2_, nb * lh, sq, scale, s);  // tmp2_ = dS, scale included
  to_bf16(tmp2_, scratch_c_, nb * lh * ss, s);
  for (int b = 0; b < nb; ++b) {
    const __nv_bfloat16* qkv = scratch_a_ + static_cast<std::size_t>(b) * sq * w;
    const __nv_bfloat16* d_s = scratch_c_ + b * lh * ss;
    float* out = c.d_qkv + static_cast<std::size_t>(b) * sq * w;
    batched(blas_, d_s, sq, ss, false, qkv + hl, w, dh, false, out, w, dh, sq, dh, sq, 1.f, lh);
    batched(blas_, d_s, sq, ss, true, qkv, w, dh, false, out + hl, w, dh, sq, dh, sq, 1.f, lh);
  }
}

void DeviceStage::layer_forward(int l, const float* x, Layer& c, float* out, cudaStream_t s) {
  const int n = dims_.tokens(), h = dims_.hidden, hl = dims_.local_hidden(), fl = dims_.local_ffn();
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  if (c.x != x)
    PW_CUDA_CHECK(cudaMemcpyAsync(c.x, x, nh * sizeof(float), cudaMemcpyDeviceToDevice, s));
  layer_norm_forward(c.x, p(l, kLn1G).w, p(l, kLn1B).w, c.xhat1, c.rstd1, c.a, n, h, s);
  gemm_w(c.a, false, p(l, kWqkv), false, c.qkv, n, 3 * hl, h, s);
  add_bias(c.qkv, p(l, kBqkv).w, n, 3 * hl, s);
  attention_forward(c, s);
  gemm_w(c.ctx, false, p(l, kWo), false, tmp_, n, h, hl, s);
  tp_->all_reduce(tmp_, nh, s);
  add(c.x1, c.x, tmp_, p(l, kBo).w, n, h, s);
  layer_norm_forward(c.x1, p(l, kLn2G).w, p(l, kLn2B).w, c.xhat2, c.rstd2, c.a2, n, h, s);
  gemm_w(c.a2, false, p(l, kW1), false, c.u, n, fl, h, s);
  add_bias(c.u, p(l, kB1).w, n, fl, s);
  gelu_forward(c.u, c.g, static_cast<std::int64_t>(n) * fl, s);
  gemm_w(c.g, false, p(l, kW2), false, tmp_, n, h, fl, s);
  tp_->all_reduce(tmp_, nh, s);
  add(out, c.x1, tmp_, p(l, kB2).w, n, h, s);
}

void DeviceStage::layer_backward(int l, const float* dout, Layer& c, float* dx, cudaStream_t s) {
  const int n = dims_.tokens(), h = dims_.hidden, hl = dims_.local_hidden(), fl = dims_.local_ffn();
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  PW_CUDA_CHECK(cudaMemcpyAsync(c.d_z, dout, nh * sizeof(float), cudaMemcpyDeviceToDevice, s));
  gemm_w(dout, false, p(l, kW2), true, tmp_, n, fl, h, s);  // dg = dout W2^T
  gelu_backward(c.u, tmp_, c.d_u, static_cast<std::int64_t>(n) * fl, s);
  gemm_w(c.d_u, false, p(l, kW1), true, c.d_a2, n, h, fl, s);
  tp_->all_reduce(c.d_a2, nh, s);
  PW_CUDA_CHECK(cudaMemcpyAsync(c.d_y, dout, nh * sizeof(float), cudaMemcpyDeviceToDevice, s));
  layer_norm_backward(c.d_a2, c.xhat2, c.rstd2, p(l, kLn2G).w, c.d_y, n, h, true, s);
  gemm_w(c.d_y, false, p(l, kWo), true, tmp_, n, hl, h, s);  // d_ctx
  attention_backward(c, tmp_, s);
  gemm_w(c.d_qkv, false, p(l, kWqkv), true, c.d_a, n, h, 3 * hl, s);
  tp_->all_reduce(c.d_a, nh, s);
  PW_CUDA_CHECK(cudaMemcpyAsync(dx, c.d_y, nh * sizeof(float), cudaMemcpyDeviceToDevice, s));
  layer_norm_backward(c.d_a, c.xhat1, c.rstd1, p(l, kLn1G).w, dx, n, h, true, s);
}

void DeviceStage::layer_weight_grads(int l, const Layer& c, cudaStream_t s) {
  const int n = dims_.tokens(), h = dims_.hidden, hl = dims_.local_hidden(), fl = dims_.local_ffn();
  gemm(c.g, true, c.d_z, false, p(l, kW2).g, fl, h, n, 1.f, s);
  column_sum(c.d_z, nullptr, p(l, kB2).g, n, h, s);
  gemm(c.a2, true, c.d_u, false, p(l, kW1).g, h, fl, n, 1.f, s);
  column_sum(c.d_u, nullptr, p(l, kB1).g, n, fl, s);
  column_sum(c.d_a2, c.xhat2, p(l, kLn2G).g, n, h, s);
  column_sum(c.d_a2, nullptr, p(l, kLn2B).g, n, h, s);
  gemm(c.ctx, true, c.d_y, false, p(l, kWo).g, hl, h, n, 1.f, s);
  column_sum(c.d_y, nullptr, p(l, kBo).g, n, h, s);
  gemm(c.a, true, c.d_qkv, false, p(l, kWqkv).g, h, 3 * hl, n, 1.f, s);
  column_sum(c.d_qkv, nullptr, p(l, kBqkv).g, n, 3 * hl, s);
  column_sum(c.d_a, c.xhat1, p(l, kLn1G).g, n, h, s);
  column_sum(c.d_a, nullptr, p(l, kLn1B).g, n, h, s);
}

void DeviceStage::forward(int mb, const float* input, std::int64_t global_mb, cudaStream_t s) {
  Micro& m = mb_[mb];
  m.global_mb = global_mb;
  const int n = dims_.tokens(), h = dims_.hidden;
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  if (has_embedding_) {
    const std::vector<int> tok = microbatch_tokens(dims_, global_mb);
    PW_CUDA_CHECK(
        cudaMemcpyAsync(m.tokens, tok.data(), tok.size() * sizeof(int), cudaMemcpyHostToDevice, s));
    const Param& e = params_[embedding_param_];
    embed(m.tokens, e.w, params_[embedding_param_ + 1].w, m.input, n, h, dims_.seq, s);
  } else if (input != m.input) {
    PW_CUDA_CHECK(cudaMemcpyAsync(m.input, input, nh * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }
  const float* x = m.input;
  for (int l = 0; l < num_layers_; ++l) {
    // Each layer writes its output into the next layer's saved input (or the stage output).
    float* out = l + 1 < num_layers_ ? m.layers[l + 1].x : m.output;
    layer_forward(l, x, m.layers[l], out, s);
    x = out;
  }
  if (num_layers_ == 0)
    PW_CUDA_CHECK(
        cudaMemcpyAsync(m.output, m.input, nh * sizeof(float), cudaMemcpyDeviceToDevice, s));
  if (!has_head_) return;
  const std::vector<int> target = microbatch_targets(dims_, global_mb);
  PW_CUDA_CHECK(cudaMemcpyAsync(m.targets, target.data(), target.size() * sizeof(int),
                                cudaMemcpyHostToDevice, s));
  gemm_w(m.output, false, params_[head_param_], false, m.logits, n, dims_.vocab, h, s);
  cross_entropy(m.logits, m.targets, m.loss, m.d_logits, n, dims_.vocab, loss_scale_, s);
}

void DeviceStage::backward_input(int mb, const float* d_output, cudaStream_t s) {
  Micro& m = mb_[mb];
  const int n = dims_.tokens(), h = dims_.hidden;
  const std::size_t nh = static_cast<std::size_t>(n) * h;
  float* final_dst = has_embedding_ ? m.d_embed : m.d_input;
  // Ping-pong between tmp-free buffers: layer l's gradient lands in d_input/d_embed at the end.
  float* cur = final_dst;
  if (has_head_)
    gemm_w(m.d_logits, false, params_[head_param_], true, cur, n, h, dims_.vocab, s);
  else
    PW_CUDA_CHECK(cudaMemcpyAsync(cur, d_output, nh * sizeof(float), cudaMemcpyDeviceToDevice, s));
  for (int l = num_layers_ - 1; l >= 0; --l) {
    // layer_backward copies dout into d_z first, so reading and writing `cur` is safe.
    layer_backward(l, cur, m.layers[l], cur, s);
  }
}

void DeviceStage::backward_weight(int mb, cudaStream_t s) {
  Micro& m = mb_[mb];
  for (int l = 0; l < num_layers_; ++l) layer_weight_grads(l, m.layers[l], s);
  const int n = dims_.tokens(), h = dims_.hidden;
  if (has_head_)
    gemm(m.output, true, m.d_logits, false, params_[head_param_].g, h, dims_.vocab, n, 1.f, s);
  if (has_embedding_)
    embed_backward(m.tokens, m.d_embed, params_[embedding_param_].g,
                   params_[embedding_param_ + 1].g, n, h, dims_.seq, s);
}

void DeviceStage::download_grads(StageModel& model) const {
  std::vector<float> host(num_params_);
  PW_CUDA_CHECK(
      cudaMemcpy(host.data(), grads_, num_params_ * sizeof(float), cudaMemcpyDeviceToHost));
  std::size_t k = 0;
  for (Tensor& t : model.tensors())
    for (Eigen::Index i = 0; i < t.grad.size(); ++i) t.grad.data()[i] = host[k++];
}

void DeviceStage::zero_grads(cudaStream_t s) {
  PW_CUDA_CHECK(cudaMemsetAsync(grads_, 0, num_params_ * sizeof(float), s));
}

void DeviceStage::sgd_step(float lr, cudaStream_t s) {
  sgd(weights_, grads_, static_cast<std::int64_t>(num_params_), lr, s);
  to_bf16(weights_, weights_bf16_, static_cast<std::int64_t>(num_params_), s);
}

}  // namespace pw::exec::cuda
