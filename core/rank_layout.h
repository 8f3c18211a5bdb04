#pragma once
/// The one rank layout of the project (hwmodels, the simulator, plans and the executor's MPI
/// ranks): tensor/pipeline/data-parallel groups onto GPUs (ranks), in Megatron's default order
/// (tp fastest, then dp, then pp): rank = t_rank + t * (d_rank + d * p_rank), GPU index = rank,
/// GPUs numbered node by node. A TP group is t consecutive GPUs, so it stays inside a node whenever
/// t divides gpus_per_node; a DP group strides by t; a PP group strides by t * d.
/// With context parallelism (Megatron's order tp, cp, dp, pp) the "data rank" coordinate is the
/// combined data x context rank c + cp * d (dp = cp x data-parallel size): the DP group is then
/// Megatron's data-and-context group, over which gradients are reduced and the distributed
/// optimizer shards, and a CP group is cp consecutive data ranks. Expert parallelism (MoE) lays
/// the same ranks out as expert-TP (fastest), EP, expert-DP within each pipeline stage.
#include <string>
#include <vector>

namespace pw {

/// The rank-to-GPU map of a t x p x d job.
struct RankLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;  ///< data x context ranks (cp * data-parallel size)
  int gpus_per_node = 8;
  int cp = 1;   ///< context-parallel size (divides dp)
  int ep = 1;   ///< expert-parallel size
  int etp = 1;  ///< expert-tensor-parallel size (etp * ep divides tp * dp)

  int num_ranks() const { return tp * pp * dp; }
  /// Global rank (= GPU index) of coordinates (tensor rank, data rank, pipeline rank).
  int gpu(int t_rank, int d_rank, int p_rank) const { return t_rank + tp * (d_rank + dp * p_rank); }
  /// GPUs of the TP group of (d_rank, p_rank), in tensor-rank order.
  std::vector<int> tp_group(int d_rank, int p_rank) const;
  /// GPUs of the DP group of (t_rank, p_rank), in data-rank order.
  std::vector<int> dp_group(int t_rank, int p_rank) const;
  /// GPUs of the CP group of (t_rank, d_rank, p_rank) (cp consecutive data ranks).
  std::vector<int> cp_group(int t_rank, int d_rank, int p_rank) const;
  /// GPUs of the EP group of the rank at (t_rank, d_rank, p_rank).
  std::vector<int> ep_group(int t_rank, int d_rank, int p_rank) const;
  /// Expert-data-parallel size: ranks holding the same experts, tp * dp / (etp * ep).
  int expert_dp() const { return tp * dp / (etp * ep); }
  /// GPUs of the expert-data-parallel group of the rank at (t_rank, d_rank, p_rank): the ranks
  /// of its stage holding the same experts (same expert-TP and EP rank), over which expert
  /// gradients are reduced and the distributed optimizer shards expert state.
  std::vector<int> expert_dp_group(int t_rank, int d_rank, int p_rank) const;
  /// Index of that group among its stage's etp * ep expert-data-parallel groups.
  int expert_dp_index(int t_rank, int d_rank) const { return (t_rank + tp * d_rank) % (etp * ep); }
  /// True when expert gradients reduce over other ranks than the dense ones (an expert-DP group
  /// is not the DP group: EP > 1, or expert-TP other than TP).
  bool expert_dp_differs() const { return ep > 1 || etp != tp; }
  /// GPUs of the pipeline of (t_rank, d_rank), stage 0 first.
  std::vector<int> pp_group(int t_rank, int d_rank) const;
  /// GPUs of pipeline rank `p_rank`, in rank order: Megatron's tensor-and-data-parallel group
  /// with context parallelism (its FP8 amax reduction group).
  std::vector<int> stage_group(int p_rank) const;
  /// Coordinates of global rank `rank` (inverse of gpu()).
  void coords(int rank, int* t_rank, int* d_rank, int* p_rank) const {
    *t_rank = rank % tp;
    *d_rank = (rank / tp) % dp;
    *p_rank = rank / (tp * dp);
  }
  /// True if every TP group lies inside one node.
  bool tp_groups_within_nodes() const;
};

struct ParallelConfig;
/// The layout of a configuration: dp = context_parallel x data_parallel, with cp, ep and etp.
RankLayout rank_layout_of(const ParallelConfig& c, int gpus_per_node);

/// Builds and checks a layout: t * p * d must equal `total_gpus`; errors are ConfigError(file,
/// key, ...) naming the sizes and the expected product.
RankLayout make_rank_layout(int tp, int pp, int dp, int gpus_per_node, int total_gpus,
                            const std::string& file, const std::string& key);

}  // namespace pw
