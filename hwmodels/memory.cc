#include "hwmodels/memory.h"

#include <algorithm>

#include "core/error.h"

namespace pw::hw {

ModelStateBytes model_state_bytes(double params, int zero_stage, int dp, bool offload) {
  PW_ASSERT(zero_stage >= 0 && zero_stage <= 3 && dp >= 1, "bad ZeRO configuration");
  const double d = dp;
  ModelStateBytes s;
  s.weights = {2.0 * params / (zero_stage >= 3 ? d : 1.0)};
  s.gradients = {2.0 * params / (zero_stage >= 2 ? d : 1.0)};
  Bytes opt{12.0 * params / (zero_stage >= 1 ? d : 1.0)};
  if (offload) {
    s.host_optimizer = opt;
  } else {
    s.optimizer = opt;
  }
  return s;
}

double held_layer_microbatches(int num_layers, int stage, int pp, int vp, long long microbatches) {
  const double chunk_layers = double(num_layers) / double(pp * vp);
  long long chunks = vp == 1 ? pp - stage
                             : static_cast<long long>(pp - stage - 1) * 2 +
                                   static_cast<long long>(vp - 1) * pp + 1;
  chunks = std::min(chunks, microbatches * vp);
  return double(chunks) * chunk_layers;
}

StageMemory stage_memory(const ModelShape& m, const ParallelConfig& par, int stage, Bytes capacity,
                         bool flash_attention) {
  const int p = par.pipeline_parallel;
  const int v = std::max(1, par.virtual_stages);
  PW_ASSERT(stage >= 0 && stage < p, "stage out of range");
  WorkloadOptions o = workload_options(par, flash_attention);
  const bool first = stage == 0, last = stage == p - 1;
  const long long micro = std::max<long long>(
      1, par.global_batch_size / std::max(1LL, 1LL * par.micro_batch_size * par.data_parallel));
  StageMemory out;
  const int layers = m.num_layers / p;  // per device, all its chunks
  out.params = stage_parameter_count(m, par.tensor_parallel, layers, first, last, p);
  out.state =
      model_state_bytes(out.params, par.zero_stage, par.data_parallel, par.optimizer_offload);
  out.in_flight = held_layer_microbatches(m.num_layers, stage, p, v, micro);
  out.activations = layer_activation_bytes(m, o) * out.in_flight;
  const double sbh = double(m.seq_length) * par.micro_batch_size * m.hidden_size;
  const double sp_div = o.sequence_parallel ? 1.0 / par.tensor_parallel : 1.0;
  const double chunk_layers = double(m.num_layers) / double(p * v);
  const double microbatches_held = chunk_layers > 0 ? out.in_flight / chunk_layers / v : 0;
  if (first) out.embedding_extra = {sbh * sp_div * std::max(1.0, microbatches_held)};
  if (last) {
    const double logits =
        double(m.seq_length) * par.micro_batch_size * m.vocab_size / par.tensor_parallel;
    out.logits = {4.0 * logits + 2.0 * sbh * sp_div};
  }
  out.total = out.state.total() + out.activations + out.embedding_extra + out.logits;
  out.capacity = capacity;
  out.fits = out.total <= capacity;
  return out;
}

}  // namespace pw::hw
