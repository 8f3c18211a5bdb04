// The mixture-of-experts MLP of StageModel (executor/model.h): routing, the expert-parallel
// dispatch and combine, the experts' passes and their weight gradients.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "executor/mlp.h"
#include "executor/model.h"

namespace pw::exec {

void StageModel::exchange(const Mat& send, const std::vector<int>& send_counts, Mat& recv,
                          std::vector<int>& recv_counts) {
  if (dims_.ep == 1) {  // every expert is local: the exchange is the identity
    recv = send;
    recv_counts = send_counts;
    return;
  }
  PW_ASSERT(ep_ != nullptr, "expert parallelism needs an all-to-all");
  ep_->all_to_all(send, send_counts, dims_.local_experts(), recv, recv_counts);
}

Mat StageModel::moe_forward(int l, LayerCache& c) {
  const int n_tok = dims_.tokens(), k = dims_.topk, n_exp = dims_.experts, h = dims_.hidden;
  const int local = dims_.local_experts(), fl = dims_.local_moe_ffn(), pairs = n_tok * k;
  // Route: each token's k largest logits (ties to the lower expert), gates = their softmax.
  const Mat logits = c.a2 * layer_tensor(l, kRouter).value;
  c.route.resize(static_cast<std::size_t>(pairs));
  c.gates.resize(n_tok, k);
  std::vector<int> order(static_cast<std::size_t>(n_exp));
  for (int i = 0; i < n_tok; ++i) {
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int x, int y) {
      return logits(i, x) > logits(i, y) || (logits(i, x) == logits(i, y) && x < y);
    });
    const double mx = logits(i, order[0]);
    for (int j = 0; j < k; ++j) {
      c.route[i * k + j] = order[j];
      c.gates(i, j) = std::exp(logits(i, order[j]) - mx);
    }
    c.gates.row(i) /= c.gates.row(i).sum();
  }
  // With a capacity factor each expert keeps the pairs of its largest gates (ties to the earlier
  // pair), ceil(cf x pairs / experts) of them; the others are dropped (pos -1).
  std::vector<char> kept(static_cast<std::size_t>(pairs), 1);
  if (dims_.capacity_factor > 0) {
    // An expert never gets more than all the pairs: a larger capacity (any factor >= experts)
    // drops nothing, and is clamped before it is made an integer.
    const auto cap = static_cast<std::size_t>(std::min<double>(
        pairs, std::ceil(dims_.capacity_factor * static_cast<double>(pairs) / n_exp)));
    std::vector<std::vector<int>> by_expert(static_cast<std::size_t>(n_exp));
    for (int q = 0; q < pairs; ++q) by_expert[c.route[q]].push_back(q);
    for (std::vector<int>& qs : by_expert) {
      if (qs.size() <= cap) continue;
      std::stable_sort(qs.begin(), qs.end(),
                       [&](int x, int y) { return c.gates(x / k, x % k) > c.gates(y / k, y % k); });
      for (std::size_t r = cap; r < qs.size(); ++r) kept[qs[r]] = 0;
    }
  }
  // Dispatch order: pairs by expert (so by the rank that owns it), then token, then slot.
  c.send_counts.assign(static_cast<std::size_t>(n_exp), 0);
  for (int q = 0; q < pairs; ++q)
    if (kept[q]) ++c.send_counts[c.route[q]];
  std::vector<int> next(static_cast<std::size_t>(n_exp), 0);
  std::exclusive_scan(c.send_counts.begin(), c.send_counts.end(), next.begin(), 0);
  c.pos.assign(static_cast<std::size_t>(pairs), -1);
  Mat send(std::accumulate(c.send_counts.begin(), c.send_counts.end(), 0), h);
  for (int q = 0; q < pairs; ++q) {
    if (!kept[q]) continue;
    c.pos[q] = next[c.route[q]]++;
    send.row(c.pos[q]) = c.a2.row(q / k);
  }
  Mat recv;
  exchange(send, c.send_counts, recv, c.recv_counts);
  // The received rows come by source rank, each source's by local expert: gather each expert's.
  const int sources = static_cast<int>(c.recv_counts.size()) / local;
  c.expert_off.assign(static_cast<std::size_t>(local) + 1, 0);
  for (int src = 0; src < sources; ++src)
    for (int e = 0; e < local; ++e) c.expert_off[e + 1] += c.recv_counts[src * local + e];
  std::partial_sum(c.expert_off.begin(), c.expert_off.end(), c.expert_off.begin());
  c.perm.resize(static_cast<std::size_t>(recv.rows()));
  std::vector<int> fill(c.expert_off.begin(), c.expert_off.end() - 1);
  int row = 0;
  for (int src = 0; src < sources; ++src)
    for (int e = 0; e < local; ++e)
      for (int r = 0; r < c.recv_counts[src * local + e]; ++r) c.perm[fill[e]++] = row++;
  c.xe.resize(recv.rows(), h);
  for (std::size_t r = 0; r < c.perm.size(); ++r) c.xe.row(r) = recv.row(c.perm[r]);
  // Each local expert's MLP on its rows.
  const Mat& w1 = layer_tensor(l, kW1).value;
  const Mat& w2 = layer_tensor(l, kW2).value;
  c.u.resize(c.xe.rows(), dims_.local_mlp(layer_begin_ + l));
  c.g.resize(c.xe.rows(), fl);
  Mat ye(c.xe.rows(), h);
  for (int e = 0; e < local; ++e) {
    const int r0 = c.expert_off[e], n = c.expert_off[e + 1] - r0;
    if (n == 0) continue;
    c.u.middleRows(r0, n).noalias() = c.xe.middleRows(r0, n) * w1.middleRows(e * h, h);
    c.g.middleRows(r0, n) = mlp_activation(c.u.middleRows(r0, n), dims_.swiglu);
    ye.middleRows(r0, n).noalias() = c.g.middleRows(r0, n) * w2.middleRows(e * fl, fl);
  }
  // Combine: the outputs go back to their sources in the order those sent them.
  Mat back(ye.rows(), h);
  for (std::size_t r = 0; r < c.perm.size(); ++r) back.row(c.perm[r]) = ye.row(r);
  std::vector<int> counts;
  exchange(back, c.recv_counts, c.ypair, counts);
  Mat out = Mat::Zero(n_tok, h);
  for (int q = 0; q < pairs; ++q)
    if (c.pos[q] >= 0) out.row(q / k) += c.gates(q / k, q % k) * c.ypair.row(c.pos[q]);
  return out;
}

Mat StageModel::moe_backward_input(int l, const Mat& dout, LayerCache& c) {
  const int n_tok = dims_.tokens(), k = dims_.topk, h = dims_.hidden;
  const int local = dims_.local_experts(), fl = dims_.local_moe_ffn(), pairs = n_tok * k;
  // Gate gradients: dout . (the expert's output), whose TP slices are partial sums.
  Mat d_gates = Mat::Zero(n_tok, k);  // a dropped pair's output is 0 whatever its gate
  for (int q = 0; q < pairs; ++q)
    if (c.pos[q] >= 0) d_gates(q / k, q % k) = dout.row(q / k).dot(c.ypair.row(c.pos[q]));
  all_reduce(d_gates);
  // Back through the softmax over the k chosen logits: dl_j = g_j (dg_j - sum_i g_i dg_i).
  c.d_router = Mat::Zero(n_tok, dims_.experts);
  for (int i = 0; i < n_tok; ++i) {
    const double dot = c.gates.row(i).dot(d_gates.row(i));
    for (int j = 0; j < k; ++j)
      c.d_router(i, c.route[i * k + j]) = c.gates(i, j) * (d_gates(i, j) - dot);
  }
  // The expert outputs' gradients go to the experts' ranks in the dispatch order.
  Mat send(c.ypair.rows(), h);
  for (int q = 0; q < pairs; ++q)
    if (c.pos[q] >= 0) send.row(c.pos[q]) = c.gates(q / k, q % k) * dout.row(q / k);
  Mat recv;
  std::vector<int> counts;
  exchange(send, c.send_counts, recv, counts);
  c.d_ye.resize(recv.rows(), h);
  for (std::size_t r = 0; r < c.perm.size(); ++r) c.d_ye.row(r) = recv.row(c.perm[r]);
  const Mat& w1 = layer_tensor(l, kW1).value;
  const Mat& w2 = layer_tensor(l, kW2).value;
  c.d_u.resize(c.u.rows(), c.u.cols());
  Mat dxe(c.xe.rows(), h);
  for (int e = 0; e < local; ++e) {
    const int r0 = c.expert_off[e], n = c.expert_off[e + 1] - r0;
    if (n == 0) continue;
    const Mat dg = c.d_ye.middleRows(r0, n) * w2.middleRows(e * fl, fl).transpose();
    c.d_u.middleRows(r0, n) = mlp_activation_backward(c.u.middleRows(r0, n), dg, dims_.swiglu);
    dxe.middleRows(r0, n).noalias() = c.d_u.middleRows(r0, n) * w1.middleRows(e * h, h).transpose();
  }
  // Back to the sources; a token's input gradient sums its k pairs (in slot order).
  Mat back(dxe.rows(), h);
  for (std::size_t r = 0; r < c.perm.size(); ++r) back.row(c.perm[r]) = dxe.row(r);
  Mat d_pairs;
  exchange(back, c.recv_counts, d_pairs, counts);
  Mat d_a2 = Mat::Zero(n_tok, h);
  for (int q = 0; q < pairs; ++q)
    if (c.pos[q] >= 0) d_a2.row(q / k) += d_pairs.row(c.pos[q]);
  return d_a2;
}

void StageModel::moe_weight_grads(int l, const LayerCache& c) {
  const int h = dims_.hidden, fl = dims_.local_moe_ffn();
  Mat& g1 = layer_tensor(l, kW1).grad;
  Mat& g2 = layer_tensor(l, kW2).grad;
  for (int e = 0; e < dims_.local_experts(); ++e) {
    const int r0 = c.expert_off[e], n = c.expert_off[e + 1] - r0;
    if (n == 0) continue;
    g1.middleRows(e * h, h).noalias() +=
        c.xe.middleRows(r0, n).transpose() * c.d_u.middleRows(r0, n);
    g2.middleRows(e * fl, fl).noalias() +=
        c.g.middleRows(r0, n).transpose() * c.d_ye.middleRows(r0, n);
  }
}

}  // namespace pw::exec
