#include "calibration/gemm_shapes.h"

#include <algorithm>

#include "core/error.h"

namespace pw::calibration {

std::vector<GemmShape> layer_gemms(const LayerShape& l, bool backward) {
  PW_ASSERT(l.hidden > 0 && l.heads > 0 && l.seq > 0 && l.micro_batch > 0 && l.tensor_parallel > 0,
            "layer shape must be positive");
  std::int64_t h = l.hidden, t = l.tensor_parallel, s = l.seq, b = l.micro_batch;
  std::int64_t f = l.ffn > 0 ? l.ffn : 4 * h;
  std::int64_t tokens = s * b, head_dim = h / l.heads, heads_local = l.heads / t;
  std::vector<GemmShape> fwd = {
      {"qkv", tokens, 3 * h / t, h, 1},
      {"proj", tokens, h, h / t, 1},
      {"mlp_up", tokens, f / t, h, 1},
      {"mlp_down", tokens, h, f / t, 1},
      {"attn_score", s, s, head_dim, b * std::max<std::int64_t>(heads_local, 1)},
      {"attn_context", s, head_dim, s, b * std::max<std::int64_t>(heads_local, 1)},
  };
  if (!backward) return fwd;
  std::vector<GemmShape> out;
  for (const auto& g : fwd) {
    out.push_back(g);
    out.push_back({g.op + "_dgrad", g.m, g.k, g.n, g.batch});
    out.push_back({g.op + "_wgrad", g.k, g.n, g.m, g.batch});
  }
  return out;
}

std::vector<GemmShape> gemm_sweep(const std::vector<int>& hiddens, const std::vector<int>& tokens,
                                  int head_dim, bool backward) {
  std::vector<GemmShape> out;
  for (int h : hiddens) {
    for (int t : tokens) {
      LayerShape l{h, std::max(1, h / head_dim), 0, t, 1, 1};
      for (auto& g : layer_gemms(l, backward)) {
        bool seen = std::any_of(out.begin(), out.end(), [&](const GemmShape& o) {
          return o.m == g.m && o.n == g.n && o.k == g.k && o.batch == g.batch;
        });
        if (!seen) out.push_back(g);
      }
    }
  }
  return out;
}

}  // namespace pw::calibration
