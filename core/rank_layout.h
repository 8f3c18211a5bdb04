#pragma once
/// The one rank layout of the project (hwmodels, the simulator, plans and the executor's MPI
/// ranks): tensor/pipeline/data-parallel groups onto GPUs (ranks), in Megatron's default order
/// (tp fastest, then dp, then pp): rank = t_rank + t * (d_rank + d * p_rank), GPU index = rank,
/// GPUs numbered node by node. A TP group is t consecutive GPUs, so it stays inside a node whenever
/// t divides gpus_per_node; a DP group strides by t; a PP group strides by t * d.
#include <string>
#include <vector>

namespace pw {

/// The rank-to-GPU map of a t x p x d job.
struct RankLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int gpus_per_node = 8;

  int num_ranks() const { return tp * pp * dp; }
  /// Global rank (= GPU index) of coordinates (tensor rank, data rank, pipeline rank).
  int gpu(int t_rank, int d_rank, int p_rank) const { return t_rank + tp * (d_rank + dp * p_rank); }
  /// GPUs of the TP group of (d_rank, p_rank), in tensor-rank order.
  std::vector<int> tp_group(int d_rank, int p_rank) const;
  /// GPUs of the DP group of (t_rank, p_rank), in data-rank order.
  std::vector<int> dp_group(int t_rank, int p_rank) const;
  /// GPUs of the pipeline of (t_rank, d_rank), stage 0 first.
  std::vector<int> pp_group(int t_rank, int d_rank) const;
  /// Coordinates of global rank `rank` (inverse of gpu()).
  void coords(int rank, int* t_rank, int* d_rank, int* p_rank) const {
    *t_rank = rank % tp;
    *d_rank = (rank / tp) % dp;
    *p_rank = rank / (tp * dp);
  }
  /// True if every TP group lies inside one node.
  bool tp_groups_within_nodes() const;
};

/// Builds and checks a layout: t * p * d must equal `total_gpus`; errors are ConfigError(file,
/// key, ...) naming the sizes and the expected product.
RankLayout make_rank_layout(int tp, int pp, int dp, int gpus_per_node, int total_gpus,
                            const std::string& file, const std::string& key);

}  // namespace pw
