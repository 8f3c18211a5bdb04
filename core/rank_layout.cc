#include "core/rank_layout.h"

#include <fmt/format.h>

#include "core/error.h"

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
  return RankLayout{tp, pp, dp, gpus_per_node};
}

}  // namespace pw
