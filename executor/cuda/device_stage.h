#pragma once
/// One pipeline stage of one tensor-parallel rank on a GPU: the same transformer block as the CPU
/// StageModel (executor/model.h), with fp32 master weights and activations, bf16 copies of the
/// GEMM operands and cuBLAS GEMMs in bf16 with fp32 accumulation (cublasGemmEx), the element-wise
/// parts as small kernels (kernels.cuh), and the Megatron all-reduces through NCCL on a separate
/// stream ordered with events. Weights are initialised from the CPU model (same seed: the same
/// weights up to fp32 rounding). All per-microbatch buffers are allocated once, at construction.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <vector>

#include "executor/model.h"

namespace pw::exec::cuda {

/// An NCCL group with its own stream; size 1 means no communication.
struct NcclGroup {
  ncclComm_t comm = nullptr;
  int size = 1;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  bool always = false;  ///< call NCCL even for one rank (single-GPU mode's collectives)
  /// In-place sum of `n` floats, ordered after the work on `compute` and before what follows it.
  void all_reduce(float* buf, std::size_t n, cudaStream_t compute);
};

class DeviceStage {
 public:
  DeviceStage(const StageModel& init, const ModelDims& dims, bool has_embedding, bool has_head,
              int num_microbatches, float loss_scale, cublasHandle_t blas, NcclGroup* tp);
  ~DeviceStage();
  DeviceStage(const DeviceStage&) = delete;
  DeviceStage& operator=(const DeviceStage&) = delete;

  /// F, B, W, R of microbatch `mb` on `stream` (everything is asynchronous). `input` and
  /// `d_output` are device pointers (tokens x hidden) ignored on the embedding/head stage.
  void forward(int mb, const float* input, std::int64_t global_mb, cudaStream_t stream);
  void backward_input(int mb, const float* d_output, cudaStream_t stream);
  void backward_weight(int mb, cudaStream_t stream);

  /// R: the GPU keeps every activation, so a recompute re-runs the forward on the saved input.
  void recompute(int mb, cudaStream_t stream) {
    forward(mb, mb_[mb].input, mb_[mb].global_mb, stream);
  }
  float* output(int mb) { return mb_[mb].output; }
  float* input_grad(int mb) { return mb_[mb].d_input; }
  /// Per-token loss shares of `mb` on the device (tokens floats), head stage only.
  const float* loss(int mb) const { return mb_[mb].loss; }
  /// All gradients, contiguous (one NCCL call reduces the whole stage).
  float* grads() { return grads_; }
  std::size_t num_params() const { return num_params_; }
  void zero_grads(cudaStream_t stream);
  /// Copies the gradients into `model`'s tensors (same layout as the StageModel it came from).
  void download_grads(StageModel& model) const;
  /// w -= lr * g, then refresh the bf16 copies.
  void sgd_step(float lr, cudaStream_t stream);

 private:
  struct Layer {
    float *x, *xhat1, *rstd1, *a, *qkv, *probs, *ctx, *x1, *xhat2, *rstd2, *a2, *u, *g;
    float *d_qkv, *d_a, *d_y, *d_a2, *d_u, *d_z;
  };
  struct Micro {
    float *input, *output, *d_input, *d_embed, *logits, *d_logits, *loss;
    int *tokens, *targets;
    std::int64_t global_mb = -1;
    std::vector<Layer> layers;
  };
  struct Param {
    int rows, cols;
    float *w, *g;
    __nv_bfloat16* wb;
  };
  const Param& p(int local_layer, int id) const {
    return params_[first_layer_param_ + local_layer * kNumLayerParams + id];
  }
  float* alloc(std::size_t n);
  void layer_forward(int l, const float* x, Layer& c, float* out, cudaStream_t s);
  void layer_backward(int l, const float* dout, Layer& c, float* dx, cudaStream_t s);
  void layer_weight_grads(int l, const Layer& c, cudaStream_t s);
  /// C = op(A) op(B) (+ beta C), row-major, fp32 operands converted to bf16 first.
  void gemm(const float* a, bool ta, const float* b, bool tb, float* c, int m, int n, int k,
            float beta, cudaStream_t s);
  /// As gemm with B a weight (its bf16 copy is used).
  void gemm_w(const float* a, bool ta, const Param& w, bool tb, float* c, int m, int n, int k,
              cudaStream_t s);
  void attention_forward(Layer& c, cudaStream_t s);
  void attention_backward(Layer& c, const float* d_ctx, cudaStream_t s);

  ModelDims dims_;
  bool has_embedding_, has_head_;
  float loss_scale_;
  int num_layers_ = 0;
  cublasHandle_t blas_;
  NcclGroup* tp_;
  std::vector<Param> params_;
  int first_layer_param_ = 0, embedding_param_ = -1, head_param_ = -1;
  float* grads_ = nullptr;
  float* weights_ = nullptr;
  __nv_bfloat16* weights_bf16_ = nullptr;
  std::size_t num_params_ = 0;
  std::vector<Micro> mb_;
  std::vector<void*> allocations_;
  __nv_bfloat16 *scratch_a_ = nullptr, *scratch_b_ = nullptr, *scratch_c_ = nullptr;
  std::size_t scratch_elems_ = 0;
  float* tmp_ = nullptr;   ///< tokens x max(3 hl, ffn_local, hidden, vocab) fp32 temporary
  float* tmp2_ = nullptr;  ///< attention score gradients
};

}  // namespace pw::exec::cuda
