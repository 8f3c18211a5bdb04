#include "core/rank_layout.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/plan.h"

namespace pw {

std::vector<int> RankLayout::tp_group(int d_rank, int p_rank) const {
  std::vector<int> g;
  for (int t = 0; t < tp; ++t) g.push_back(gpu(t, d_rank, p_rank));
  return g;
}

std::vector<int> RankLayout::dp_group(int t_rank, int p_rank) const {
  std::vector<int> g;
  for (int d = 0; d < dp; ++d) g.push_back(gpu(t_rank, d, p_rank));
  return g;
}

std::vector<int> RankLayout::cp_group(int t_rank, int d_rank, int p_rank) const {
  std::vector<int> g;
  const int base = d_rank - d_rank % cp;
  for (int c = 0; c < cp; ++c) g.push_back(gpu(t_rank, base + c, p_rank));
  return g;
}

std::vector<int> RankLayout::ep_group(int t_rank, int d_rank, int p_rank) const {
  // Within a stage the local index i = t_rank + tp * d_rank runs over expert-TP fastest, then EP.
  const int stage = tp * dp * p_rank;
  const int i = t_rank + tp * d_rank;
  const int e_tp = i % etp, e_dp = i / (etp * ep);
  std::vector<int> g;
  for (int e = 0; e < ep; ++e) g.push_back(stage + e_tp + etp * (e + ep * e_dp));
  return g;
}

std::vector<int> RankLayout::expert_dp_group(int t_rank, int d_rank, int p_rank) const {
  // The same local order as ep_group: expert-TP fastest, then EP, then expert-DP.
  const int stage = tp * dp * p_rank;
  const int i = expert_dp_index(t_rank, d_rank);
  std::vector<int> g;
  for (int k = 0; k < expert_dp(); ++k) g.push_back(stage + i + etp * ep * k);
  return g;
}

std::vector<int> RankLayout::stage_group(int p_rank) const {
  std::vector<int> g(static_cast<std::size_t>(tp) * dp);
  for (int i = 0; i < tp * dp; ++i) g[i] = gpu(i % tp, i / tp, p_rank);
  return g;
}

std::vector<int> RankLayout::pp_group(int t_rank, int d_rank) const {
  std::vector<int> g;
  for (int p = 0; p < pp; ++p) g.push_back(gpu(t_rank, d_rank, p));
  return g;
}

bool RankLayout::tp_groups_within_nodes() const {
  for (int p = 0; p < pp; ++p) {
    for (int d = 0; d < dp; ++d) {
      auto g = tp_group(d, p);
      if (g.front() / gpus_per_node != g.back() / gpus_per_node) return false;
    }
  }
  return true;
}

RankLayout rank_layout_of(const ParallelConfig& c, int gpus_per_node) {
  RankLayout l;
  l.tp = c.tensor_parallel;
  l.pp = c.pipeline_parallel;
  l.dp = c.context_parallel * c.data_parallel;
  l.gpus_per_node = gpus_per_node;
  l.cp = c.context_parallel;
  l.ep = c.expert_parallel;
  l.etp = c.expert_tp();
  return l;
}

RankLayout make_rank_layout(int tp, int pp, int dp, int gpus_per_node, int total_gpus,
                            const std::string& file, const std::string& key) {
  if (tp < 1 || pp < 1 || dp < 1) {
    throw ConfigError(file, key,
                      fmt::format("parallel sizes t={} p={} d={}; expected each >= 1", tp, pp, dp));
  }
  if (tp * pp * dp != total_gpus) {
    throw ConfigError(file, key,
                      fmt::format("t*p*d = {}*{}*{} = {} does not match the {} GPUs of the "
                                  "cluster; expected t*p*d = {}",
                                  tp, pp, dp, tp * pp * dp, total_gpus, total_gpus));
  }
  RankLayout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.gpus_per_node = gpus_per_node;
  return l;
}

}  // namespace pw
