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

}  // namespace pw::hw
