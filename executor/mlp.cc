#include "executor/mlp.h"

#include <cmath>

namespace pw::exec {
namespace {

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double silu_grad(double x) {
  const double sg = 1.0 / (1.0 + std::exp(-x));
  return sg * (1.0 + x * (1.0 - sg));
}

double gelu(double u) { return 0.5 * u * (1.0 + std::tanh(kGeluC * (u + 0.044715 * u * u * u))); }

double gelu_grad(double u) {
  const double t = std::tanh(kGeluC * (u + 0.044715 * u * u * u));
  return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * kGeluC * (1.0 + 3 * 0.044715 * u * u);
}

}  // namespace

Mat mlp_activation(const Mat& u, bool swiglu) {
  if (!swiglu) return u.unaryExpr([](double v) { return gelu(v); });
  const Eigen::Index f = u.cols() / 2;
  return u.leftCols(f).unaryExpr([](double v) { return silu(v); }).cwiseProduct(u.rightCols(f));
}

Mat mlp_activation_backward(const Mat& u, const Mat& dg, bool swiglu) {
  if (!swiglu) return dg.array() * u.unaryExpr([](double v) { return gelu_grad(v); }).array();
  const Eigen::Index f = u.cols() / 2;
  const auto gate = u.leftCols(f), up = u.rightCols(f);
  Mat du(u.rows(), u.cols());
  du.leftCols(f) =
      dg.array() * up.array() * gate.unaryExpr([](double v) { return silu_grad(v); }).array();
  du.rightCols(f) = dg.array() * gate.unaryExpr([](double v) { return silu(v); }).array();
  return du;
}

}  // namespace pw::exec
