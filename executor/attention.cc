// Causal self-attention of StageModel (executor/model.h): rotary positions, grouped keys and
// values, the per-head query/key norms (Qwen3, OLMo 2: Megatron's qk_layernorm) and a sliding
// window (Mistral: Megatron's window_size).
#include <algorithm>
#include <cmath>

#include "executor/model.h"

namespace pw::exec {

namespace {

// Rotary positions on columns [0, width) of `m` (heads of `dh` columns each; row i is position
// i % seq): pair (2j, 2j+1) turns by pos * 10000^(-2j/dh); `inverse` turns back (the transpose,
// which is also how a gradient passes through the rotation).
void rotate(Mat& m, int width, int dh, int seq, bool inverse) {
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    const double pos = static_cast<double>(i % seq);
    for (int j = 0; 2 * j < dh; ++j) {
      const double theta = pos * std::pow(10000.0, -2.0 * j / dh);
      const double cs = std::cos(theta), sn = inverse ? -std::sin(theta) : std::sin(theta);
      for (int c = 2 * j; c < width; c += dh) {
        const double x0 = m(i, c), x1 = m(i, c + 1);
        m(i, c) = x0 * cs - x1 * sn;
        m(i, c + 1) = x0 * sn + x1 * cs;
      }
    }
  }
}

}  // namespace

void StageModel::attention_forward(LayerCache& c) const {
  const int s = dims_.seq, dh = dims_.head_dim(), ql = dims_.local_hidden(), kl = dims_.local_kv();
  const int lh = dims_.local_heads(), per_group = lh / dims_.local_kv_heads();
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  if (dims_.rope) {  // queries and keys rotated by position; values as projected
    c.qk_rot = c.qkv;
    rotate(c.qk_rot, ql + kl, dh, s, false);
  }
  const Mat& src = dims_.rope ? c.qk_rot : c.qkv;
  c.probs.resize(static_cast<Eigen::Index>(dims_.micro_batch) * lh * s, s);
  c.ctx.resize(dims_.tokens(), ql);
  for (int b = 0; b < dims_.micro_batch; ++b) {
    for (int hd = 0; hd < lh; ++hd) {
      const int g = hd / per_group;  // the key/value head this query head shares
      const auto q = src.block(b * s, hd * dh, s, dh);
      const auto k = src.block(b * s, ql + g * dh, s, dh);
      const auto v = src.block(b * s, ql + kl + g * dh, s, dh);
      auto p = c.probs.block((b * lh + hd) * s, 0, s, s);
      p.noalias() = (q * k.transpose()) * scale;
      for (int i = 0; i < s; ++i) {  // causal softmax over keys lo..i (0..i without a window)
        const int lo = dims_.window > 0 ? std::max(0, i - dims_.window) : 0, n = i + 1 - lo;
        const double mx = p.row(i).segment(lo, n).maxCoeff();
        p.row(i).segment(lo, n) = (p.row(i).segment(lo, n).array() - mx).exp();
        p.row(i).segment(lo, n) /= p.row(i).segment(lo, n).sum();
        p.row(i).head(lo).setZero();
        p.row(i).tail(s - i - 1).setZero();
      }
      c.ctx.block(b * s, hd * dh, s, dh).noalias() = p * v;
    }
  }
}

Mat StageModel::attention_backward(const LayerCache& c, const Mat& d_ctx) const {
  const int s = dims_.seq, dh = dims_.head_dim(), ql = dims_.local_hidden(), kl = dims_.local_kv();
  const int lh = dims_.local_heads(), per_group = lh / dims_.local_kv_heads();
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  const Mat& src = dims_.rope ? c.qk_rot : c.qkv;
  // Key and value gradients sum over the query heads of their group.
  Mat d_qkv = Mat::Zero(dims_.tokens(), ql + 2 * kl);
  for (int b = 0; b < dims_.micro_batch; ++b) {
    for (int hd = 0; hd < lh; ++hd) {
      const int g = hd / per_group;
      const auto q = src.block(b * s, hd * dh, s, dh);
      const auto k = src.block(b * s, ql + g * dh, s, dh);
      const auto v = src.block(b * s, ql + kl + g * dh, s, dh);
      const auto p = c.probs.block((b * lh + hd) * s, 0, s, s);
      const auto d_o = d_ctx.block(b * s, hd * dh, s, dh);
      const Mat d_p = d_o * v.transpose();
      const Eigen::VectorXd dot = (d_p.array() * p.array()).rowwise().sum();
      const Mat d_s = (p.array() * (d_p.array().colwise() - dot.array())).matrix() * scale;
      d_qkv.block(b * s, hd * dh, s, dh).noalias() = d_s * k;
      d_qkv.block(b * s, ql + g * dh, s, dh).noalias() += d_s.transpose() * q;
      d_qkv.block(b * s, ql + kl + g * dh, s, dh).noalias() += p.transpose() * d_o;
    }
  }
  if (dims_.rope) rotate(d_qkv, ql + kl, dh, s, true);  // back through the rotation
  return d_qkv;
}

}  // namespace pw::exec
