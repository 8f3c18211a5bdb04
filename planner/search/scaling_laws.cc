#include "planner/search/scaling_laws.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace pw {

double critical_batch_tokens(double loss, const ScalingLawConstants& k) {
  return k.b_star / std::pow(loss, 1.0 / k.a_b);
}

double loss_floor(double params, const ScalingLawConstants& k) {
  return std::pow(k.n_c / params, k.a_n);
}

double min_steps(double params, double loss, const ScalingLawConstants& k) {
  const double excess = loss - loss_floor(params, k);
  if (excess <= 0) return std::numeric_limits<double>::infinity();
  return k.s_c / std::pow(excess, 1.0 / k.a_s);
}

double steps_at_batch(double s_min, double b_crit, double batch_tokens) {
  return s_min * (1.0 + b_crit / batch_tokens);
}

double tokens_at_batch(double s_min, double b_crit, double batch_tokens) {
  return s_min * b_crit * (1.0 + batch_tokens / b_crit);
}

double chinchilla_loss(double params, double tokens, const ScalingLawConstants& k) {
  return k.chin_e + k.chin_a / std::pow(params, k.chin_alpha) +
         k.chin_b / std::pow(tokens, k.chin_beta);
}

TrainingNeed training_need(double params, const TrainingTarget& target, double batch_tokens,
                           const ScalingLawConstants& k) {
  TrainingNeed need;
  if (target.loss > 0) {
    need.b_crit = critical_batch_tokens(target.loss, k);
    const double s_min = min_steps(params, target.loss, k);
    if (!std::isfinite(s_min)) {
      need.feasible = false;
      need.reason = fmt::format(
          "target loss {:.3f} is at or below the floor {:.3f} that a {:.3g}-parameter model can "
          "reach (Kaplan L(N, S_min))",
          target.loss, loss_floor(params, k), params);
      return need;
    }
    need.steps = steps_at_batch(s_min, need.b_crit, batch_tokens);
    need.tokens = need.steps * batch_tokens;
    return need;
  }
  // Token budget: the batch only decides how many steps the budget takes; B_crit is reported at
  // the loss the budget is expected to reach.
  need.b_crit = critical_batch_tokens(chinchilla_loss(params, target.tokens, k), k);
  need.tokens = target.tokens;
  need.steps = target.tokens / batch_tokens;
  return need;
}

}  // namespace pw
