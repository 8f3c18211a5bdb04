#include "hwmodels/memory.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pw::hw {

ModelStateBytes model_state_bytes(double params, int zero_stage, int dp, bool offload,
                                  double grad_bytes) {
  PW_ASSERT(zero_stage >= 0 && zero_stage <= 3 && dp >= 1, "bad ZeRO configuration");
  const double d = dp;
  ModelStateBytes s;
  s.weights = {2.0 * params / (zero_stage >= 3 ? d : 1.0)};
  s.gradients = {grad_bytes * params / (zero_stage >= 2 ? d : 1.0)};
  Bytes opt{12.0 * params / (zero_stage >= 1 ? d : 1.0)};
  if (offload) {
    s.host_optimizer = opt;
  } else {
    s.optimizer = opt;
  }
  return s;
}

ModelStateBytes model_state_bytes(double params, double expert_params, int zero_stage, int dp,
                                  int expert_dp, bool offload, bool fp8, double grad_bytes,
                                  double layer_params) {
  ModelStateBytes s =
      model_state_bytes(params - expert_params, zero_stage, dp, offload, grad_bytes);
  if (expert_params > 0) {
    const ModelStateBytes e =
        model_state_bytes(expert_params, zero_stage, expert_dp, offload, grad_bytes);
    s.weights += e.weights;
    s.gradients += e.gradients;
    s.optimizer += e.optimizer;
    s.host_optimizer += e.host_optimizer;
  }
  if (fp8) s.weights += Bytes{kFp8WeightBytesPerParam * layer_params};
  return s;
}

double grad_bucket_params(int zero_stage, bool overlap_grad_reduce, int dp, bool first_stage,
                          double bucket_size) {
  if (zero_stage == 3) return kDeepSpeedReduceBucketParams;
  if (!overlap_grad_reduce || !first_stage) return 0;
  if (bucket_size > 0) return bucket_size;
  return std::max(kMegatronMinBucketParams, kMegatronBucketParamsPerDpRank * dp);
}

int grad_bucket_count(double stage_params, int zero_stage, bool overlap_grad_reduce, int dp,
                      bool first_stage, double bucket_size) {
  const double bucket =
      grad_bucket_params(zero_stage, overlap_grad_reduce, dp, first_stage, bucket_size);
  if (bucket <= 0) return 1;
  return static_cast<int>(std::clamp(std::ceil(stage_params / bucket), 1.0, 65536.0));
}

bool param_gather_aligned(int pipeline_parallel, int chunks_per_device, bool align) {
  return align && pipeline_parallel > 1 && chunks_per_device > 1;
}

double exposed_param_gather_seconds(double first_bucket_s, double chunk_s, double fill_step_s,
                                    int pipeline_parallel, bool aligned) {
  if (pipeline_parallel <= 1) return first_bucket_s;
  if (aligned) return std::max(first_bucket_s, chunk_s - fill_step_s);
  return first_bucket_s + (pipeline_parallel - 1) * chunk_s;
}

double Zero3PassGathers::largest_bytes() const {
  double m = first_bytes;
  for (const GatherRun& g : rest) m = std::max(m, g.bytes);
  return m;
}

int Zero3PassGathers::count() const {
  int n = first_bytes > 0 ? 1 : 0;
  for (const GatherRun& g : rest) n += g.count;
  return n;
}

Zero3PassGathers zero3_pass_gathers(const std::string& gather, double stage_params, int layers,
                                    const std::vector<double>& tensors) {
  Zero3PassGathers out;
  auto add = [&](double bytes) {
    if (out.first_bytes == 0) {
      out.first_bytes = bytes;
      return;
    }
    for (GatherRun& g : out.rest)
      if (g.bytes == bytes) {
        ++g.count;
        return;
      }
    out.rest.push_back({bytes, 1});
  };
  if (gather == "layer") {
    out.first_bytes = zero3_layer_bytes(stage_params, layers);
    if (layers > 1) out.rest.push_back({out.first_bytes, layers - 1});
  } else if (gather == "tensor") {
    double pack = 0;
    for (double n : tensors) {
      if (n < kDeepSpeedPersistenceThreshold) continue;
      pack += n;
      if (pack >= kDeepSpeedPrefetchBucketParams) {
        add(2.0 * pack);
        pack = 0;
      }
    }
    if (pack > 0) add(2.0 * pack);
  }
  return out;
}

}  // namespace pw::hw
