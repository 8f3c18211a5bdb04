#pragma once
/// Scaling laws for choosing the global batch and estimating time to train (Kaplan et al. 2020,
/// with Chinchilla's L(N, D) for token budgets). Losses are in nats per token, batches and
/// budgets in tokens, parameter counts exclude embeddings where the law says so.
#include <string>

namespace pw {

/// Constants of the laws (defaults: Kaplan et al. 2020 and Hoffmann et al. 2022).
struct ScalingLawConstants {
  double b_star = 2.1e8;  ///< critical-batch scale B*, tokens
  double a_b = 0.21;      ///< critical-batch exponent a_B
  double n_c = 6.5e13;    ///< L(N, S_min) parameter scale (non-embedding parameters)
  double a_n = 0.077;     ///< L(N, S_min) parameter exponent
  double s_c = 2.1e3;     ///< L(N, S_min) step scale
  double a_s = 0.76;      ///< L(N, S_min) step exponent
  double chin_e = 1.69, chin_a = 406.4, chin_b = 410.7, chin_alpha = 0.34, chin_beta = 0.28;
};

/// Kaplan critical batch B_crit(L) = B* / L^(1/a_B), in tokens. `loss` must be positive.
double critical_batch_tokens(double loss, const ScalingLawConstants& k = {});

/// Loss floor that no number of steps reaches for `params` non-embedding parameters:
/// (N_c / N)^a_N.
double loss_floor(double params, const ScalingLawConstants& k = {});

/// Minimum number of optimizer steps S_min to reach `loss` (at B >> B_crit), from
/// L(N, S_min) = (N_c/N)^a_N + (S_c/S_min)^a_S. Returns +infinity when `loss` is at or below
/// the floor for this model size.
double min_steps(double params, double loss, const ScalingLawConstants& k = {});

/// Steps needed at global batch `batch_tokens`, from (S/S_min - 1)(E/E_min - 1) = 1 with
/// E = B*S and E_min = B_crit*S_min: S = S_min (1 + B_crit / B).
double steps_at_batch(double s_min, double b_crit, double batch_tokens);

/// Tokens processed at batch B: E = E_min (1 + B / B_crit), E_min = B_crit * S_min.
double tokens_at_batch(double s_min, double b_crit, double batch_tokens);

/// Chinchilla loss after `tokens` training tokens with `params` parameters:
/// E + A/N^alpha + B/D^beta.
double chinchilla_loss(double params, double tokens, const ScalingLawConstants& k = {});

/// What a training target is: a loss to reach, or a token budget to spend.
struct TrainingTarget {
  double loss = 0;    ///< > 0: train until this loss (Kaplan S_min / B_crit trade-off)
  double tokens = 0;  ///< > 0: train on this many tokens (batch capped by B_crit at the loss
                      ///< Chinchilla predicts for that budget)
  bool empty() const { return loss <= 0 && tokens <= 0; }
};

/// The number of steps and tokens a target needs at a given batch, and the critical batch it
/// was derived from. `feasible` is false (with `reason`) when the loss is below the floor.
struct TrainingNeed {
  bool feasible = true;
  std::string reason;
  double b_crit = 0;  ///< tokens
  double steps = 0;
  double tokens = 0;
};

/// Steps and tokens to reach `target` at global batch `batch_tokens` for a model of `params`
/// non-embedding parameters.
TrainingNeed training_need(double params, const TrainingTarget& target, double batch_tokens,
                           const ScalingLawConstants& k = {});

}  // namespace pw
