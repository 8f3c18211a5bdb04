#pragma once
/// Raw calibration measurements: what the microbenchmarks record before any fitting. They travel
/// as JSON (format "pipewright-calibration-raw", version 1) with the provenance of the machine, so
/// a profile can be refitted later (`pipewright calibrate --from-raw`) without measuring again.
/// All times are seconds; all sizes are bytes; rates are derived, never stored as the truth.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pw::calibration {

/// Summary of repeated timings of one measurement (after warm-up), as nccl-tests reports them.
struct Timing {
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  int iterations = 0;  ///< timed iterations the summary is taken over
  /// Relative spread (max - min) / median; 0 when the median is 0.
  double spread() const { return median_s > 0 ? (max_s - min_s) / median_s : 0.0; }
};

/// Summarises `samples` (seconds; taken by value because it is sorted). Empty input gives {}.
Timing summarize(std::vector<double> samples);

/// Where and how the measurements were taken.
struct RawProvenance {
  std::string backend;      ///< "cpu" or "cuda"
  std::string device;       ///< device name (GPU name, or CPU model name)
  std::string host;         ///< host name
  std::string driver;       ///< driver version ("" on the CPU)
  std::string cuda;         ///< CUDA runtime version ("" on the CPU)
  std::string cublas;       ///< cuBLAS version ("" on the CPU)
  std::string nccl;         ///< NCCL version ("" on the CPU)
  std::string mpi;          ///< MPI library version ("" if MPI was not measured)
  std::string eigen;        ///< Eigen version ("" on the GPU)
  std::string compiler;     ///< compiler that built the benchmarks
  std::string clocks;       ///< SM/memory clocks (GPU) or nominal CPU frequency, free text
  std::string date;         ///< ISO 8601 UTC time the run started
  std::string command;      ///< command line of the run
  int device_count = 1;     ///< GPUs (or MPI ranks) the collectives spanned
  int compute_units = 1;    ///< SMs on a GPU; threads used on the CPU (wave quantisation unit)
  double memory_bytes = 0;  ///< device memory capacity (GPU) or host RAM (CPU)
  /// Theoretical memory bandwidth, B/s, from the memory clock and bus width (0 = unknown: CPU).
  double memory_bandwidth = 0;
  /// Theoretical dense peak per dtype ("bf16", "fp16", "tf32", "fp32"), FLOP/s, from the SM
  /// count, clock and compute capability (empty on the CPU, whose peak is fitted).
  std::map<std::string, double> peak_flops;
  bool quick = false;  ///< measured with --quick
};

/// One GEMM: C[m x n] = A[m x k] * B[k x n], `batch` times (batched attention GEMMs).
struct GemmSample {
  std::string op;     ///< which layer GEMM: qkv, proj, mlp_up, mlp_down, attn_score, attn_context
  std::string dtype;  ///< fp64 | fp32 | tf32 | fp16 | bf16
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  Timing time;
  double flops() const { return 2.0 * static_cast<double>(m) * n * k * batch; }
};

/// One memory-bound kernel moving `bytes` (reads + writes) through memory.
struct MemorySample {
  std::string kernel;  ///< copy | scale | read | gelu | add | layernorm | softmax ...
  std::string dtype;   ///< element type the kernel ran on
  double bytes = 0;    ///< bytes read plus bytes written
  Timing time;
};

/// One pass of one transformer layer as the CPU executor runs it (executor/model.h, one thread,
/// micro batch 1, ffn = 4h): the whole pass, GEMMs and element-wise work together.
struct LayerSample {
  std::string pass;  ///< forward | backward_input | backward_weight
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t seq = 0;
  Timing time;
};

/// One fused (flash) attention kernel call: its kernels' summed time (a backward runs several).
/// `heads` is batch x query heads; FLOPs follow hwmodels (hw::fused_attention_flops: half the
/// keys under a causal mask), so the fitted efficiency is the profile's gpu.attention figure.
struct AttentionSample {
  std::string pass;   ///< forward | backward
  std::string dtype;  ///< bf16 | fp16
  std::int64_t heads = 0;
  std::int64_t seq_q = 0;
  std::int64_t seq_k = 0;
  std::int64_t head_dim = 0;
  bool causal = true;
  Timing time;
  double flops() const;
};

/// One point-to-point transfer of `bytes` over `link` (one direction, one message).
struct TransferSample {
  std::string link;  ///< h2d_pinned | d2h_pinned | mpi_p2p | nccl_p2p
  double bytes = 0;
  Timing time;
};

/// One collective (nccl-tests convention: `bytes` is the total data size S of the operation).
struct CollectiveSample {
  std::string library;  ///< nccl | mpi
  std::string op;       ///< all_reduce | all_gather | reduce_scatter | broadcast | send_recv
  int ranks = 0;
  double bytes = 0;
  Timing time;
  std::int64_t wrong = 0;  ///< elements that failed the correctness check (run apart from timing)
  double algbw() const { return time.median_s > 0 ? bytes / time.median_s : 0.0; }
  /// Bus bandwidth, B/s, with the nccl-tests factors for `op` over `ranks`.
  double busbw() const;
};

/// CPU: one core's speed, timed pinned to it: the executor's layer forward (h = 256, 128 tokens,
/// micro batch 1), GEMMs and element-wise work together, as a rank's passes mix them.
struct CoreProbe {
  int core = 0;  ///< the core's number (as taskset and sched_getaffinity count)
  Timing time;
};

/// Every measurement of one calibration run.
struct RawResults {
  RawProvenance provenance;
  double launch_latency_s = 0;  ///< empty-kernel launch (GPU) or call overhead (CPU)
  std::vector<GemmSample> gemms;
  std::vector<MemorySample> memory;
  std::vector<LayerSample> layers;         ///< CPU: executor layer passes (absent in older files)
  std::vector<AttentionSample> attention;  ///< fused attention from a trace (absent elsewhere)
  std::vector<TransferSample> transfers;
  std::vector<CollectiveSample> collectives;
  /// CPU: each core the run could use, probed (absent in older files and on the GPU), and the
  /// core every benchmark then ran pinned to: the slowest (-1: not pinned).
  std::vector<CoreProbe> core_probes;
  int pinned_core = -1;
};

/// The nccl-tests bus-bandwidth factor for `op` over `ranks` (1 for unknown ops).
double busbw_factor(const std::string& op, int ranks);

/// Serialises to pretty JSON; deterministic (fixed key order, fixed float formatting).
std::string raw_to_json(const RawResults& raw);

/// Parses raw results; `source` names the file in errors. Throws ConfigError naming the field
/// when the format is wrong, a field is missing or negative, or the version is unknown.
RawResults raw_from_json(const std::string& text, const std::string& source);

}  // namespace pw::calibration
