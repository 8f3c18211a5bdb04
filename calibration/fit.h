#pragma once
/// Fitting cost models to raw measurements (Eigen least squares). Every fit minimises relative
/// residuals (each point weighted by 1/measured time), because sizes span many decades and an
/// unweighted fit would ignore every small message. Goodness of fit is reported two ways:
/// R^2 of log(time) (1 = perfect; meaningful across decades) and the worst relative residual
/// |predicted - measured| / measured with the point where it occurs.
#include <functional>
#include <string>
#include <vector>

#include "calibration/raw_results.h"
#include "hwmodels/gpu_model.h"

namespace pw::calibration {

/// Quality of one fit.
struct FitQuality {
  int points = 0;
  double r2_log = 0;          ///< R^2 of log(predicted) against log(measured)
  double worst_residual = 0;  ///< max |pred - meas| / meas over the points
  std::string worst_at;       ///< description of the worst point ("bytes=4096", "m=..,n=..,k=..")
  double median_residual = 0;
};

/// t(S) = alpha + S * beta for a transfer or collective of S bytes.
struct AlphaBetaFit {
  double alpha_s = 0;          ///< latency, seconds
  double beta_s_per_byte = 0;  ///< inverse bandwidth
  FitQuality quality;
  double bandwidth() const { return beta_s_per_byte > 0 ? 1.0 / beta_s_per_byte : 0.0; }
  double predict(double bytes) const { return alpha_s + bytes * beta_s_per_byte; }
};

/// Fits alpha and beta; alpha is clamped at 0 (then beta refitted alone) when noise would make
/// it negative. Throws ConfigError(source, key, ...) with fewer than 2 distinct sizes.
AlphaBetaFit fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds,
                            const std::string& source, const std::string& key);

/// GEMM model for one dtype, in hwmodels' form (hw::GpuModel::gemm_time):
/// t = kernel_latency + flops / (peak * max_efficiency * best_tile(wave x padding x tile
/// efficiency) * k / (k + k_half)). The tiles and SM count are given; max_efficiency, k_half and
/// kernel_latency are fitted (k_half by grid search, the other two by relative least squares).
struct GemmFit {
  std::string dtype;
  double peak_flops = 0;  ///< reference peak (datasheet on a GPU; the fitted asymptote on a CPU)
  double max_efficiency = 0;  ///< in (0, 1]
  double k_half = 0;
  double kernel_latency_s = 0;
  hw::GpuSpec spec;  ///< the GPU spec these parameters describe (for predictions)
  FitQuality quality;
  /// Predicted seconds of `g` under the fitted model (without any measured table).
  double predict(const GemmSample& g) const;
};

/// Fits every dtype present in `gemms` (sorted by dtype name). `base` gives the SM count and
/// candidate tiles; `peak_flops(dtype)` the reference peak (return 0 to use the fitted asymptote
/// as the peak, with max_efficiency 1: what the CPU does). Throws ConfigError(source, ...) when a
/// dtype has fewer than 2 shapes or its times do not grow with work.
std::vector<GemmFit> fit_gemms(const std::vector<GemmSample>& gemms, const hw::GpuSpec& base,
                               const std::function<double(const std::string&)>& peak_flops,
                               const std::string& source);

/// Fused attention of one pass and dtype in hwmodels' form (hw::GpuModel::fused_attention_time):
/// t = kernel_latency + flops / (peak * efficiency), flops by hw::fused_attention_flops. The
/// kernel latency is the GEMM fit's of the same dtype (else the first GEMM fit's); the efficiency
/// is fitted by relative least squares.
struct AttentionFit {
  std::string pass;  ///< forward | backward
  std::string dtype;
  double peak_flops = 0;
  double efficiency = 0;  ///< the profile's gpu.attention.fwd_efficiency / bwd_efficiency
  double kernel_latency_s = 0;
  FitQuality quality;
  double predict(const AttentionSample& a) const {
    return kernel_latency_s + a.flops() / (peak_flops * efficiency);
  }
};

/// Alpha-beta fit of one named series (a memory kernel, a link or a collective).
struct SeriesFit {
  std::string name;  ///< "copy", "mpi_p2p", "nccl all_reduce x8", ...
  std::string kind;  ///< memory | transfer | collective
  std::string op;    ///< kernel, link or collective op
  std::string library;
  int ranks = 0;
  AlphaBetaFit fit;
  double bus_factor = 1;        ///< nccl-tests busbw factor (collectives), 1 otherwise
  double peak_measured_bw = 0;  ///< largest bytes/median time seen (algbw), B/s
};

/// Everything fitted from one raw file.
struct FitResult {
  RawProvenance provenance;
  double launch_latency_s = 0;
  /// CPU: the cores probed and the one the benchmarks ran on (RawResults; empty / -1 if none).
  std::vector<CoreProbe> core_probes;
  int pinned_core = -1;
  std::vector<GemmFit> gemms;
  std::vector<AttentionFit> attention;  ///< by (pass, dtype); empty without attention samples
  RawResults raw;                       ///< the measurements fitted (for tables)
  std::vector<SeriesFit> memory;        ///< one per memory kernel
  /// Streaming memory bandwidth, the profile's hbm figure (what hwmodels times the optimizer
  /// step, copies and offload with), in the bytes the measured kernels moved. When the
  /// element-wise throughput is fitted on its own (`elementwise`), the "copy" kernel's fit; else
  /// every memory kernel pooled (GPU).
  /// CPU with the executor's Adam step measured ("adam_step" kernel, newer raw files): that
  /// kernel's fit, already in the workload model's bytes (memory_in_model_bytes).
  AlphaBetaFit memory_pooled;
  std::string memory_source;  ///< "executor Adam step" | "copy kernel" | "all memory kernels"
  /// memory_pooled counts the workload model's bytes (hw::kAdamBytesPerParam per parameter),
  /// so the profile writer takes it as it is; false: the measured kernels' own bytes, which
  /// ProfileOptions::memory_bytes_ratio converts.
  bool memory_in_model_bytes = false;
  /// Element-wise throughput of the layer model's memory-bound ops, in the workload model's
  /// bytes (the profile's gpu.elementwise_gb_per_s). CPU with layer samples: the throughput that
  /// makes hwmodels' layer model reproduce the executor's measured F and B passes (one
  /// parameter, relative least squares over the passes: pass = modelled GEMMs + memory-bound
  /// ops x kernel latency + model bytes / throughput; alpha 0). Else the "layer_mix" kernel when
  /// measured (older raw files). has_elementwise is false when neither was measured (GPU): the
  /// layer model then uses the streaming figure.
  bool has_elementwise = false;
  AlphaBetaFit elementwise;
  /// CPU with layer samples since 2026-11-30: `elementwise` is fitted to the F passes alone and
  /// this to the B passes (the profile's gpu.elementwise_bwd_gb_per_s, for B and W): the
  /// executor's backward moves 1.5x the forward's model bytes around the same tanh and exp, so
  /// one throughput left F 12% under and B over. false: one figure for every pass.
  bool has_elementwise_bwd = false;
  AlphaBetaFit elementwise_bwd;
  std::string elementwise_source;  ///< "executor layer passes" | "layer_mix"
  /// CPU with layer samples: hwmodels' layer model (hw::layer_ops with the fitted GEMMs, the
  /// kernel latency and `elementwise`) against the executor's measured layer passes, one entry
  /// per pass (forward, backward_input, backward_weight). Empty otherwise.
  std::vector<std::pair<std::string, FitQuality>> layer_checks;
  std::vector<SeriesFit> transfers;    ///< one per link
  std::vector<SeriesFit> collectives;  ///< one per (library, op, ranks)
  /// Fits whose worst residual exceeds this get their measured table written to the profile.
  double table_threshold = 0.10;
};

/// Fits all models; `base` and `peak_flops` as for fit_gemms. Throws ConfigError(source, ...)
/// when a section has too few points to fit, or when the element-wise throughput is fitted but
/// no "copy" kernel was measured for the streaming bandwidth.
FitResult fit_all(const RawResults& raw, const hw::GpuSpec& base,
                  const std::function<double(const std::string&)>& peak_flops,
                  const std::string& source);

/// hwmodels' GPU that predicts with GEMM fit `g`: its formula at its peak for every dtype (the
/// CPU computes all of them in fp64), its kernel latency, and the measured table of `samples`
/// when the fit is worse than `table_threshold` (as the profile will carry it).
hw::GpuSpec fitted_gpu(const GemmFit& g, const std::vector<GemmSample>& samples,
                       double table_threshold);

/// CPU: the probed cores and the one the benchmarks ran on, as one report line ("cores 0: 2.33 ms,
/// 1: 1.87 ms (...) -> benchmarks pinned to core 0, the slowest (1.25x the fastest)"); empty
/// when the run probed none.
std::string cores_line(const FitResult& fit);

/// Human-readable fit report (one line per fit: parameters, R^2 of log time, worst residual).
std::string fit_report(const FitResult& fit);

}  // namespace pw::calibration
