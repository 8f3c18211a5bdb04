#include "hwmodels/gpu_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pw::hw {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kFp32:
      return "fp32";
    case DType::kTf32:
      return "tf32";
    case DType::kFp16:
      return "fp16";
    case DType::kBf16:
      return "bf16";
    case DType::kFp8:
      return "fp8";
    case DType::kFp64:
      return "fp64";
  }
  return "?";
}

int dtype_bytes(DType d) {
  switch (d) {
    case DType::kFp32:
    case DType::kTf32:
      return 4;
    case DType::kFp16:
    case DType::kBf16:
      return 2;
    case DType::kFp8:
      return 1;
    case DType::kFp64:
      return 8;
  }
  return 2;
}

bool parse_dtype(const std::string& name, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == dtype_name(static_cast<DType>(i))) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

std::vector<GemmTile> default_gemm_tiles() {
  return {{256, 128, 1.0}, {128, 128, 0.95}, {128, 64, 0.85}, {64, 64, 0.7}};
}

GpuModel::GpuModel(GpuSpec spec) : spec_(std::move(spec)) {
  if (spec_.tiles.empty()) spec_.tiles = default_gemm_tiles();
  PW_ASSERT(spec_.sm_count > 0, "GPU needs SMs");
}

double GpuModel::fitted_gemm_efficiency(long long m, long long n, long long k,
                                        long long batch) const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 1.0;
  // Pick the tile the library would: the one with the best wave-quantised throughput. A wave is
  // sm_count tiles running together; a partial last wave leaves SMs idle.
  double best = 0;
  for (const GemmTile& t : spec_.tiles) {
    long long tiles = ((m + t.m - 1) / t.m) * ((n + t.n - 1) / t.n) * batch;
    long long waves = (tiles + spec_.sm_count - 1) / spec_.sm_count;
    double wave_eff = static_cast<double>(tiles) / static_cast<double>(waves * spec_.sm_count);
    // Padding: a tile computes its full t.m x t.n even at the matrix edge.
    double pad_eff =
        static_cast<double>(m * n * batch) /
        static_cast<double>(((m + t.m - 1) / t.m) * t.m * (((n + t.n - 1) / t.n) * t.n) * batch);
    best = std::max(best, t.efficiency * wave_eff * pad_eff);
  }
  double k_eff = static_cast<double>(k) / (static_cast<double>(k) + spec_.gemm_k_half);
  return std::clamp(spec_.gemm_max_efficiency * best * k_eff, 1e-4, 1.0);
}

double GpuModel::measured_correction(long long m, long long n, long long k, DType d) const {
  // Inverse-distance weighting, in log2(m, n, k) space, of measured / fitted efficiency: the
  // fitted formula keeps the wave-quantisation shape, the table moves its level locally.
  double num = 0, den = 0;
  double peak_tf = spec_.peak_flops[static_cast<int>(d)] / 1e12;
  for (const GemmSample& s : spec_.measured) {
    if (s.dtype != d || peak_tf <= 0) continue;
    double ratio = (s.tflops / peak_tf) / fitted_gemm_efficiency(s.m, s.n, s.k);
    double dm = std::log2(double(m) / double(s.m));
    double dn = std::log2(double(n) / double(s.n));
    double dk = std::log2(double(k) / double(s.k));
    double dist2 = dm * dm + dn * dn + dk * dk;
    if (dist2 < 1e-12) return ratio;
    num += ratio / dist2;
    den += 1.0 / dist2;
  }
  return den > 0 ? num / den : 1.0;
}

double GpuModel::gemm_efficiency(long long m, long long n, long long k, DType d,
                                 long long batch) const {
  double eff = fitted_gemm_efficiency(m, n, k, batch);
  if (d == DType::kFp8 && spec_.gemm_max_efficiency_fp8 > 0)
    eff *= spec_.gemm_max_efficiency_fp8 / spec_.gemm_max_efficiency;
  if (!spec_.measured.empty()) eff *= measured_correction(m, n, k, d);
  return std::clamp(eff, 1e-4, 1.0);
}

TimePs GpuModel::gemm_time(long long m, long long n, long long k, DType d, long long batch) const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  double peak_flops = spec_.peak_flops[static_cast<int>(d)];
  PW_ASSERT(peak_flops > 0, std::string("no peak FLOP/s for ") + dtype_name(d));
  double flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
  double secs = flops / (peak_flops * gemm_efficiency(m, n, k, d, batch));
  // Memory roofline: the kernel reads both operands and writes its result at least once (FP8
  // GEMMs write 16-bit results), at the streaming rate memory_bound_time uses. Binds for thin
  // GEMMs: many small experts, a router, non-fused attention's probabilities x values.
  const double in = dtype_bytes(d), out = d == DType::kFp8 ? 2.0 : in;
  const double bytes = double(batch) * ((double(m) * double(k) + double(k) * double(n)) * in +
                                        double(m) * double(n) * out);
  secs = std::max(secs, bytes / spec_.streaming_rate());
  return seconds_to_ps(secs) + spec_.kernel_latency;
}

TimePs GpuModel::fused_attention_time(Flops flops, DType d, bool backward) const {
  const double eff = backward ? spec_.attention_bwd_efficiency : spec_.attention_fwd_efficiency;
  const double peak = spec_.peak_flops[static_cast<int>(d)];
  if (eff <= 0 || peak <= 0) return -1;
  if (flops.value <= 0) return 0;
  return seconds_to_ps(flops.value / (peak * eff)) + spec_.kernel_latency;
}

TimePs GpuModel::memory_bound_time(Bytes bytes) const {
  if (bytes.value <= 0) return 0;
  double bw = spec_.streaming_rate();
  return seconds_to_ps(bytes.value / bw) + spec_.kernel_latency;
}

double GpuModel::elementwise_rate(bool backward) const {
  if (backward && spec_.elementwise_bwd_bandwidth.value > 0)
    return spec_.elementwise_bwd_bandwidth.value;
  // The same product as memory_bound_time when unset, so profiles without the field give the
  // same picoseconds as before it existed.
  return spec_.elementwise_bandwidth.value > 0 ? spec_.elementwise_bandwidth.value
                                               : spec_.streaming_rate();
}

TimePs GpuModel::elementwise_time(Bytes bytes, bool backward) const {
  if (bytes.value <= 0) return 0;
  return seconds_to_ps(bytes.value / elementwise_rate(backward)) + spec_.kernel_latency;
}

}  // namespace pw::hw
