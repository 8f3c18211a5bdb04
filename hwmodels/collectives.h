#pragma once
/// Collective communication costs: all-reduce, reduce-scatter, all-gather, all-to-all, broadcast,
/// reduce and send/recv of S bytes over n ranks with ring, tree, hierarchical (intra-node then
/// inter-node) and NVLink SHARP algorithms, in alpha-beta form over the bottleneck links of the
/// group's placement. Sizes follow nccl-tests: S is the all-reduce/broadcast buffer, the total
/// (gathered) size for all-gather/reduce-scatter, and the per-rank send buffer for all-to-all.
/// Every algorithm is expressed as steps, and its time is the sum of its step times, so the
/// discrete-event simulator can decompose a collective into flows and agree with this model.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/units.h"

namespace pw::hw {

class Topology;
struct HardwareProfile;

enum class CollectiveKind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kReduce,
  kSendRecv
};
enum class CollectiveAlgo { kAuto, kRing, kTree, kHierarchical, kNvls };
inline constexpr int kNumCollectiveKinds = 7;

/// Measured / modelled time of one collective by message size: what `calibrate
/// --from-nccl-tests` finds the (algorithm, protocol) model misses at each size of the user's
/// own log (NCCL's channel counts and algorithm switches, a transport's slow ramp). The model's
/// time at size S is multiplied by factor(S): the log of the factor is interpolated linearly in
/// log S between the logged sizes and held at the end factors outside them. Empty: 1.
struct SizeCorrection {
  std::vector<double> bytes;   ///< ascending, > 0
  std::vector<double> factor;  ///< > 0, one per size
  bool empty() const { return bytes.empty(); }
  double at(double s) const;
};

const char* collective_kind_name(CollectiveKind k);  ///< "all-reduce", ...
/// nccl-tests' name of the kinds it has a test of here (its binary without `_perf`: all_reduce,
/// all_gather, reduce_scatter, alltoall, sendrecv); nullptr for the others. The one table that
/// nccl-tests logs and profiles' `collectives.size_corrections` are read and written with.
const char* nccl_tests_name(CollectiveKind k);
/// The kind nccl-tests calls `name` (with or without `_perf`); false when it is none of them.
bool parse_nccl_tests_name(const std::string& name, CollectiveKind* out);
/// "all_reduce, all_gather, reduce_scatter, alltoall, sendrecv", for messages.
std::string nccl_tests_names();
const char* collective_algo_name(CollectiveAlgo a);  ///< "auto", "ring", "tree", ...

/// nccl-tests bus-bandwidth factor: 2(n-1)/n all-reduce; (n-1)/n all-gather, reduce-scatter,
/// all-to-all; 1 broadcast, reduce, send/recv.
double bus_factor(CollectiveKind k, int n);
/// algbw = S / t in bytes/s (0 if t == 0).
double algbw(Bytes s, TimePs t);
/// busbw = algbw * bus_factor.
double busbw(CollectiveKind k, int n, Bytes s, TimePs t);

/// The network a communication group sees, reduced to what the alpha-beta model needs.
struct GroupNetwork {
  int n = 1;               ///< ranks
  int nodes = 1;           ///< distinct nodes spanned
  int ranks_per_node = 1;  ///< ranks of the group on each node (groups are assumed uniform)
  BytesPerSec intra_bw{};  ///< per-rank bottleneck bandwidth between ranks on one node
  TimePs intra_latency = 0;
  /// Aggregate scale-out bandwidth of one node for this group: distinct NICs used x effective NIC
  /// bandwidth, divided by the oversubscription when routes cross the spine layer.
  BytesPerSec inter_bw{};
  BytesPerSec single_nic_bw{};  ///< one rank pair across nodes (one NIC, one route)
  TimePs inter_latency = 0;
  bool nvls = false;
  double nvls_efficiency = 0;
  TimePs step_latency = 0;  ///< software cost per algorithm step
  /// The profile's NCCL protocols (HardwareProfile::collective_protocols): each adds its latency
  /// to every step and scales every step's bandwidth; one neutral protocol when none is given.
  int num_protocols = 1;
  std::array<TimePs, 3> protocol_latency{};
  std::array<double, 3> protocol_efficiency{1.0, 1.0, 1.0};
  /// The profile's size corrections for this group's scope (one node, or several), per kind
  /// (HardwareProfile::collective_size_corrections); every time the model gives is multiplied
  /// by them.
  std::array<SizeCorrection, kNumCollectiveKinds> correction{};
};

/// Describes the group `gpus` (global GPU indices, in rank order) on `topo`; the NVLS and
/// step-latency fields come from `profile`.
GroupNetwork describe_group(const Topology& topo, const HardwareProfile& profile,
                            const std::vector<int>& gpus);

/// Which links a step loads.
enum class StepLinks { kIntraNode, kInterNode, kBottleneck };
/// Who each rank talks to in a step.
enum class StepPattern {
  kRing,      ///< rank r sends to r+1 (within the step's sub-group) and receives from r-1
  kTree,      ///< up or down a (double) binary tree, pipelined
  kPairwise,  ///< rank r sends to r+k for the step's k (all-to-all rounds)
  kSwitch,    ///< every rank sends to and receives from the switch (NVLS in-switch reduction)
  kPoint,     ///< one sender, one receiver
};

/// One step of a collective algorithm: every participating rank moves `bytes_per_rank` over
/// `links` following `pattern`, `repeat` times in sequence. Step time =
/// repeat * (latency_hops * (link latency + step latency) + bytes_per_rank / bandwidth).
struct CollectiveStep {
  StepPattern pattern = StepPattern::kRing;
  StepLinks links = StepLinks::kIntraNode;
  int group_size = 1;  ///< ranks in each sub-group running this step (k intra-node, nodes inter)
  int repeat = 1;
  int latency_hops = 1;
  Bytes bytes_per_rank{};
  BytesPerSec bandwidth{};         ///< per-rank bandwidth this step is modelled at
  TimePs hop_latency = 0;          ///< link latency + software step latency
  bool overlaps_previous = false;  ///< runs concurrently with the previous step (time = max)
  TimePs time() const;
};

/// The steps of `kind` over `net` with `algo` (kAuto = the fastest applicable) under the fastest
/// of the network's protocols for that algorithm (its latency in every hop_latency, its
/// efficiency in every bandwidth). Algorithms not
/// applicable to the kind fall back to ring (NVLS: all-reduce on one node only; hierarchical:
/// all-reduce, reduce-scatter, all-gather, broadcast across >= 2 nodes with >= 2 ranks per node).
/// n == 1 or S == 0 gives no steps.
std::vector<CollectiveStep> collective_steps(CollectiveKind kind, CollectiveAlgo algo, Bytes s,
                                             const GroupNetwork& net);
/// Sum of step times (concurrent steps count once).
TimePs steps_time(const std::vector<CollectiveStep>& steps);
/// Time of the collective.
TimePs collective_time(CollectiveKind kind, CollectiveAlgo algo, Bytes s, const GroupNetwork& net);
/// kAuto's time of one kind on one network as a function of the size S: every algorithm's time
/// is alpha + beta * S (CollectiveStep::time is linear in bytes_per_rank, which is linear in S),
/// and kAuto picks the fastest, so the time is the minimum of a few lines. For screens that price
/// millions of sizes without building steps; seconds() equals collective_time to within the
/// picosecond rounding of its steps (it is never above it by more than one picosecond per step).
struct CollectiveLine {
  SizeCorrection correction;  ///< the kind's size correction on this network (times it applies)
  int count = 0;  ///< (algorithm, protocol) pairs (0: the group has one rank, every size takes 0)
  std::array<double, 12> alpha{}, beta{};  ///< seconds, seconds per byte
  /// Seconds per byte the group's first rank sends on each of its two routes under this pair:
  /// [0] to the group's next rank (intra-node and flat steps), [1] to its peer on the next node
  /// (inter-node steps); one route when the group has one rank per node. The simulator's flows
  /// of those steps take that long alone and share the route's links with each other.
  std::array<std::array<double, 2>, 12> route{};
  double seconds(double bytes) const {
    if (count == 0 || bytes <= 0) return 0;
    double best = alpha[0] + beta[0] * bytes;
    for (int i = 1; i < count; ++i) best = std::min(best, alpha[i] + beta[i] * bytes);
    return correction.empty() ? best : best * correction.at(bytes);
  }
  /// How long each of the first rank's two routes is busy with one collective of `bytes` under
  /// the pair kAuto picks at that size (per route the least among pairs within rounding of the
  /// fastest, so a near tie the simulator breaks the other way never raises it). Summed over a
  /// rank's collectives on one group, per route, a time its iteration cannot beat.
  std::array<double, 2> route_seconds(double bytes) const {
    std::array<double, 2> out{0, 0};
    if (count == 0 || bytes <= 0) return out;
    double best = alpha[0] + beta[0] * bytes;
    for (int i = 1; i < count; ++i) best = std::min(best, alpha[i] + beta[i] * bytes);
    const double tie = best * 1e-6 + 1e-9;
    const double c = correction.empty() ? 1.0 : correction.at(bytes);
    out = {1e300, 1e300};
    for (int i = 0; i < count; ++i)
      if (alpha[i] + beta[i] * bytes <= best + tie)
        for (int k = 0; k < 2; ++k) out[k] = std::min(out[k], route[i][k] * bytes * c);
    return out;
  }
};
CollectiveLine collective_line(CollectiveKind kind, const GroupNetwork& net);

/// A time no schedule of the all-to-all can beat on `net`: the bytes each node must send off
/// node (its ranks_per_node ranks each send S x (n - ranks_per_node) / n) over the node's
/// aggregate scale-out bandwidth, or each rank's on-node share over the intra-node bandwidth,
/// whichever is longer; no latency. Screens use it as a lower bound where the simulator times the
/// exchange with flows. 0 for other kinds.
TimePs all_to_all_bandwidth_bound(CollectiveKind kind, Bytes s, const GroupNetwork& net);
/// The same for one send/recv of `s` between neighbours of `net` (a context-parallel ring
/// step): `s` over the slowest pair's bandwidth (one NIC across nodes, else the intra-node
/// links), no latency.
TimePs send_recv_bandwidth_bound(Bytes s, const GroupNetwork& net);

/// The profile's size correction of `kind` at `bytes` for a group on one node (`multi_node`
/// false) or across nodes: 1 when the profile has none (HardwareProfile::
/// collective_size_corrections). The one lookup every tier uses (describe_group fills
/// GroupNetwork::correction from it; the simulator's point-to-point transfers ask it directly).
double size_correction(const HardwareProfile& profile, CollectiveKind kind, bool multi_node,
                       double bytes);

/// The algorithm kAuto resolves to for this kind, size and network (and, in `*protocol` when
/// given, the index of the protocol it runs under).
CollectiveAlgo choose_algorithm(CollectiveKind kind, Bytes s, const GroupNetwork& net,
                                int* protocol = nullptr);

}  // namespace pw::hw
