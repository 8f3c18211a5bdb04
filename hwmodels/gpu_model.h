#pragma once
/// GPU compute model: peak FLOP/s per data type, HBM capacity and bandwidth, GEMM efficiency by
/// shape (fitted formula with wave quantisation over the SMs and a choice of tile sizes, optionally
/// corrected by a measured table that calibration fills in), streaming memory-bound kernel time
/// (optimizer step, copies) and element-wise kernel time (the layer model's memory-bound ops),
/// which may have its own measured throughput.
#include <array>
#include <string>
#include <vector>

#include "core/units.h"

namespace pw::hw {

/// Element types with distinct tensor-core peaks. kFp64 (appended last, so the others keep their
/// indices) is what the executor's CPU backend computes in.
enum class DType { kFp32, kTf32, kFp16, kBf16, kFp8, kFp64 };
inline constexpr int kNumDTypes = 6;

/// "fp32", "tf32", "fp16", "bf16", "fp8", "fp64".
const char* dtype_name(DType d);
/// Bytes per element (fp64 8, fp32/tf32 4, fp16/bf16 2, fp8 1).
int dtype_bytes(DType d);
/// Parses a dtype name; returns false if unknown.
bool parse_dtype(const std::string& name, DType* out);

/// One output tile shape the GEMM library may pick, with the share of the tensor-core peak a full
/// wave of such tiles reaches (larger tiles reuse operands better).
struct GemmTile {
  int m = 128;
  int n = 128;
  double efficiency = 1.0;  ///< in (0, 1], relative to GpuSpec::gemm_max_efficiency
};

/// One measured GEMM throughput (from calibration).
struct GemmSample {
  long long m = 0, n = 0, k = 0;
  DType dtype = DType::kBf16;
  double tflops = 0;  ///< achieved TFLOP/s
};

/// Datasheet and fitted parameters of one GPU (plain data, loaded from a profile).
struct GpuSpec {
  std::string name;
  int sm_count = 108;
  std::array<double, kNumDTypes> peak_flops{};  ///< dense FLOP/s per DType (0 = unsupported)
  Bytes hbm_capacity{80e9};
  /// HBM no training state may use: CUDA context, NCCL buffers, cuBLAS workspaces and allocator
  /// slack (profile key gpu.reserved_memory_gb; 0 when absent). Every tier checks fit against
  /// usable_memory().
  Bytes reserved_memory{0};
  /// hbm_capacity - reserved_memory: the one capacity every tier checks memory against.
  Bytes usable_memory() const { return hbm_capacity - reserved_memory; }
  BytesPerSec hbm_bandwidth{2.039e12};
  double hbm_efficiency = 0.8;  ///< achieved / datasheet HBM bandwidth for streaming kernels
  /// hbm_bandwidth x hbm_efficiency (bytes/s): the one streaming rate of memory-bound kernels,
  /// the optimizer step and the GEMMs' memory roofline.
  double streaming_rate() const { return hbm_bandwidth.value * hbm_efficiency; }
  /// Achieved throughput of the layer model's element-wise kernels (LayerNorm, GeLU, softmax,
  /// dropout, residual adds, cross-entropy), in model bytes per second; no efficiency applies.
  /// 0 (the default, and a profile without gpu.elementwise_gb_per_s) = hbm_bandwidth x
  /// hbm_efficiency, the streaming figure. Calibration of the CPU backend sets it: there the
  /// executor's scalar element-wise code runs far below the machine's streaming bandwidth.
  BytesPerSec elementwise_bandwidth{0};
  /// The same for the backward passes' element-wise kernels (B and W); 0 (the default, and a
  /// profile without gpu.elementwise_bwd_gb_per_s) = the forward's figure. Calibration of the
  /// CPU backend sets it: the executor's backward element-wise code moves 1.5x the forward's
  /// model bytes around the same transcendental functions, so its throughput in model bytes
  /// differs from the forward's, where a GPU's bandwidth-bound kernels need one figure.
  BytesPerSec elementwise_bwd_bandwidth{0};
  TimePs kernel_latency = 3'000'000;  ///< fixed launch + tail cost per kernel (ps)
  double gemm_max_efficiency = 0.8;   ///< best achieved / peak for large, well-shaped GEMMs
  /// The same for FP8 GEMMs against the FP8 peak (profile gemm.fp8_max_efficiency; 0 = the
  /// BF16 figure). FP8 kernels reach a smaller share of their doubled peak.
  double gemm_max_efficiency_fp8 = 0;
  /// Fused (flash) attention kernels: achieved share of the 16-bit peak in the forward and the
  /// backward kernel on long sequences (profile gpu.attention.fwd_efficiency / bwd_efficiency).
  /// 0 = price the attention core as batched GEMMs.
  double attention_fwd_efficiency = 0;
  double attention_bwd_efficiency = 0;
  double gemm_k_half = 256;          ///< K at which the K-loop pipeline reaches half efficiency
  std::vector<GemmTile> tiles;       ///< candidate tiles; empty = {256x128, 128x128, 128x64, 64x64}
  std::vector<GemmSample> measured;  ///< optional calibration table
};

/// GEMM and memory-bound kernel times for one GPU. Immutable after construction; cheap queries.
class GpuModel {
 public:
  explicit GpuModel(GpuSpec spec);

  const GpuSpec& spec() const { return spec_; }
  FlopsPerSec peak(DType d) const { return {spec_.peak_flops[static_cast<int>(d)]}; }

  /// Achieved / peak throughput of C[m x n] = A[m x k] B[k x n] (`batch` independent GEMMs of
  /// that shape in one launch); in (0, 1]. Fitted formula, corrected by the measured table when
  /// it has samples for `d`.
  double gemm_efficiency(long long m, long long n, long long k, DType d, long long batch = 1) const;
  /// Time of 2*m*n*k*batch FLOPs at the modelled efficiency, plus the kernel latency. Zero-sized
  /// GEMMs take 0.
  TimePs gemm_time(long long m, long long n, long long k, DType d, long long batch = 1) const;
  /// Time of a streaming memory-bound kernel (optimizer step, copies) moving `bytes` (reads +
  /// writes) at hbm_bandwidth x hbm_efficiency, plus the kernel latency; 0 bytes take 0.
  TimePs memory_bound_time(Bytes bytes) const;
  /// Time of one of the layer model's element-wise kernels moving `bytes` (reads + writes) at
  /// the element-wise throughput (elementwise_bandwidth; hbm_bandwidth x hbm_efficiency when it
  /// is 0, bit-for-bit memory_bound_time then), plus the kernel latency; 0 bytes take 0.
  /// `backward`: a kernel of a B or W pass (elementwise_bwd_bandwidth where the profile gives it).
  TimePs elementwise_time(Bytes bytes, bool backward) const;
  /// Time of `flops` of a fused attention kernel (forward or backward) at the profile's attention
  /// efficiency of the `d` peak, plus the kernel latency; -1 when the profile gives none.
  TimePs fused_attention_time(Flops flops, DType d, bool backward) const;
  /// The throughput elementwise_time divides by (bytes per second).
  double elementwise_rate(bool backward) const;
  /// The fitted formula alone (no measured correction).
  double fitted_gemm_efficiency(long long m, long long n, long long k, long long batch = 1) const;

 private:
  double measured_correction(long long m, long long n, long long k, DType d) const;

  GpuSpec spec_;
};

/// Default candidate tiles (cuBLAS/CUTLASS-like shapes with their relative efficiencies).
std::vector<GemmTile> default_gemm_tiles();

}  // namespace pw::hw
