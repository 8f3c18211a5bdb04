#pragma once
/// GPT-style transformer workload: the GEMMs and memory-bound ops of one layer per pass (F,
/// B-input, B-weight, recompute) on one tensor-parallel rank, the TP collectives each pass issues,
/// embedding and logits on the first and last stages, stage costs for any layer range, parameter
/// counts and FLOPs per iteration. Activations are 16-bit (bf16); logits are kept in fp32.
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/units.h"
#include "hwmodels/collectives.h"
#include "hwmodels/gpu_model.h"

namespace pw::hw {

enum class Recompute { kNone, kSelective, kFull };
/// "none" | "selective" | "full"; returns false if unknown.
bool parse_recompute(const std::string& s, Recompute* out);
const char* recompute_name(Recompute r);

/// Passes of a stage, as the schedule IR splits them.
enum class Pass { kForward, kBackwardInput, kBackwardWeight, kRecompute };

/// What the workload depends on besides the model shape.
struct WorkloadOptions {
  int tp = 1;
  int micro_batch = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  bool flash_attention = false;  ///< fused attention: no s^2 tensors stored or streamed
  DType dtype = DType::kBf16;
};

/// Builds options from the IR's ParallelConfig (recompute string already validated).
WorkloadOptions workload_options(const ParallelConfig& p, bool flash_attention = false);

/// One kernel of a pass on one TP rank. GEMMs have a shape (C[m x n] = A[m x k] B[k x n], `batch`
/// of them); memory-bound ops have only bytes. `flops` = 2*m*n*k*batch for GEMMs.
struct LayerOp {
  const char* name = "";
  bool gemm = false;
  long long m = 0, n = 0, k = 0, batch = 1;
  Flops flops{};
  Bytes bytes{};  ///< HBM traffic (memory-bound ops)
};

/// One TP collective a pass issues (per microbatch, over the TP group); `bytes` is the nccl-tests
/// size (whole buffer for all-reduce, gathered size for all-gather/reduce-scatter).
struct TpComm {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes{};
  int count = 1;
  const char* where = "";
};

/// The kernels of one transformer layer's `pass` on one TP rank for one microbatch. The
/// recompute pass is the attention core (selective) or the whole forward (full); empty for none.
/// W holds the weight GEMMs and the parameter reductions: qkv/proj/mlp_up/mlp_down bias
/// gradients (`*_bias_grad`, read tokens x width, write width) and the two layer norms'
/// gamma/beta gradients (`layernorm{1,2}_param_grad`, read 2 x tokens x h, write 2h); tokens
/// outside the TP region are divided by t with sequence parallelism.
std::vector<LayerOp> layer_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass);
/// TP collectives of one layer's `pass` (none when tp == 1).
std::vector<TpComm> layer_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass);
/// Kernels of the embedding (first stage) for `pass`.
std::vector<LayerOp> embedding_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass);
/// Kernels of the final layer norm, logits GEMM and cross-entropy (last stage) for `pass` (W:
/// the logits weight gradient and the final layer norm's gamma/beta gradients).
std::vector<LayerOp> head_ops(const ModelShape& m, const WorkloadOptions& o, Pass pass);
std::vector<TpComm> embedding_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass);
std::vector<TpComm> head_tp_comms(const ModelShape& m, const WorkloadOptions& o, Pass pass);

/// Sum of the ops' FLOPs.
Flops total_flops(const std::vector<LayerOp>& ops);
/// Sum of the ops' times on `gpu`: GEMMs by GpuModel::gemm_time, memory-bound ops by
/// GpuModel::elementwise_time (the element-wise throughput, not the streaming bandwidth).
TimePs ops_time(const std::vector<LayerOp>& ops, const GpuModel& gpu, DType dtype);

/// Activation bytes one layer holds from F until B, per microbatch per TP rank (Korthikanti et
/// al.: s*b*h*(10 + 24/t + 5as/(ht)) without SP, s*b*h*(34/t + 5as/(ht)) with; selective
/// recompute or flash attention drop the 5as/(ht) term; full recompute keeps the layer input,
/// 2sbh, or 2sbh/t with SP).
Bytes layer_activation_bytes(const ModelShape& m, const WorkloadOptions& o);
/// Activation bytes one layer holds from B until W (weight-GEMM inputs and output gradients):
/// s*b*h*(8 + 24/t) without SP, 32*s*b*h/t with (32sbh at t = 1, as in the zero-bubble paper).
/// Assumes ffn = 4h; a different ffn scales the MLP part.
Bytes layer_weight_grad_bytes(const ModelShape& m, const WorkloadOptions& o);

/// Costs of one pipeline stage (layers [layer_begin, layer_end), plus the embedding if first
/// and the head if last) per microbatch on one TP rank. Times are compute only; TP collectives
/// are listed per pass (time them with tp_comm_time).
struct StageCosts {
  TimePs f = 0, b = 0, w = 0, r = 0;  ///< forward, input-gradient, weight-gradient, recompute
  Flops f_flops{}, b_flops{}, w_flops{}, r_flops{};
  std::vector<TpComm> comm_f, comm_b, comm_w, comm_r;
  Bytes comm_bytes_f{}, comm_bytes_b{};  ///< sum of TP collective sizes in F and B
  Bytes m_b{};                           ///< activations held from F until B
  Bytes m_w{};                           ///< activations held from B until W
  Bytes m_r{};        ///< extra activations the recompute pass re-creates (released by B)
  Bytes p2p_bytes{};  ///< activation sent to the next stage per microbatch (b*s*h*2 / t with SP)
};

StageCosts stage_costs(const ModelShape& m, const GpuModel& gpu, const WorkloadOptions& o,
                       int layer_begin, int layer_end, bool is_first, bool is_last);
/// Time of a list of TP collectives on a TP group.
TimePs tp_comm_time(const std::vector<TpComm>& comms, const GroupNetwork& tp_group);

/// Parameters of the model (all layers, embedding, positions, final norm; tied output layer):
/// L*(4h^2 + 2hf + 9h + f) + V*h + s*h + 2h, i.e. 12Lh^2(1 + 13/(12h) + (V+s)/(12Lh)) + 2h
/// for f = 4h.
double parameter_count(const ModelShape& m);
/// Parameters of one transformer layer: 4h^2 + 2hf + 9h + f (QKV, projection and MLP weights
/// and biases, two layer norms).
double layer_parameter_count(const ModelShape& m);
/// L x layer_parameter_count: the N of scaling laws (embeddings excluded).
double non_embedding_parameter_count(const ModelShape& m);
/// Parameters held by one TP rank of a stage (tied embedding copy on the last stage when p > 1).
double stage_parameter_count(const ModelShape& m, int tp, int layers, bool is_first, bool is_last,
                             int pp);

/// FLOPs of one iteration of `global_batch` sequences: model FLOPs (F + B + W) and hardware
/// FLOPs (plus recomputation). Summed from the ops, so it reproduces 72*B*s*L*h^2*(1 + s/(6h) +
/// V/(12Lh)) and, with full recompute, 96*B*s*L*h^2*(1 + s/(6h) + V/(16Lh)).
struct IterationFlops {
  double model = 0;
  double hardware = 0;
};
IterationFlops iteration_flops(const ModelShape& m, const WorkloadOptions& o,
                               long long global_batch);

/// ffn_hidden_size, defaulting to 4 * hidden_size when 0.
inline int ffn_size(const ModelShape& m) {
  return m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size;
}

}  // namespace pw::hw
