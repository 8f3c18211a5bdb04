#pragma once
/// The GEMM shapes one GPT-style transformer layer issues (Megatron layout, tensor parallel t),
/// used by both the CPU and the CUDA microbenchmarks so that they measure what the executor runs.
#include <cstdint>
#include <string>
#include <vector>

namespace pw::calibration {

/// A layer configuration to take shapes from.
struct LayerShape {
  int hidden = 0;           ///< h
  int heads = 1;            ///< a (h must be divisible by a)
  int ffn = 0;              ///< 0 = 4h
  int seq = 0;              ///< s
  int micro_batch = 1;      ///< b
  int tensor_parallel = 1;  ///< t
};

/// One GEMM C[m x n] = A[m x k] B[k x n], `batch` times.
struct GemmShape {
  std::string op;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  friend bool operator==(const GemmShape& a, const GemmShape& b) {  // header is also C++17 (nvcc)
    return a.op == b.op && a.m == b.m && a.n == b.n && a.k == b.k && a.batch == b.batch;
  }
};

/// Forward GEMMs of one layer: qkv (T x 3h/t x h), proj (T x h x h/t), mlp_up (T x f/t x h),
/// mlp_down (T x h x f/t), attn_score (s x s x h/a, batch b*a/t), attn_context (s x h/a x s,
/// batch b*a/t), with T = s*b tokens. With `backward`, each also gives its input-gradient
/// ("<op>_dgrad": m x k x n) and weight-gradient ("<op>_wgrad": k x n x m) GEMM.
std::vector<GemmShape> layer_gemms(const LayerShape& layer, bool backward);

/// Appends layer_gemms of every (hidden, tokens) pair, dropping duplicates (first kept).
/// Heads = hidden / head_dim; seq = tokens (micro batch 1).
std::vector<GemmShape> gemm_sweep(const std::vector<int>& hiddens, const std::vector<int>& tokens,
                                  int head_dim, bool backward);

}  // namespace pw::calibration
