#pragma once
/// The cluster as a graph (Boost.Graph): GPUs, NVSwitches, host PCIe switches, NICs, leaf and
/// spine switches, joined by directed links (every physical link is two, one per direction).
/// Links have dense ids 0..num_links()-1 with a capacity (bytes/s) and a latency, so the
/// discrete-event simulator can run max-min fair flows over the link ids of a route.
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"
#include "hwmodels/link.h"

namespace pw::hw {

struct HardwareProfile;

/// Dense link id (index into Topology's link arrays).
using LinkId = std::uint32_t;

/// Vertex kinds of the cluster graph.
enum class VertexKind { kGpu, kNvSwitch, kHostSwitch, kNic, kLeaf, kSpine };
const char* vertex_kind_name(VertexKind k);

/// Where a link sits, for reporting and for collective step classes.
enum class LinkRole { kIntraNode, kGpuToNic, kNicToLeaf, kLeafToSpine };
const char* link_role_name(LinkRole r);  ///< "in node", "GPU-NIC", "NIC-leaf", "leaf-spine"

/// Compact description of a cluster, expanded into the graph.
struct TopologySpec {
  int nodes = 1;
  NodeSpec node;
  FabricSpec fabric;
  /// Capacity divisor per NIC (global index node * nics_per_node + rail) for its NIC <-> leaf
  /// link, both directions (2 = a link running at half its rate; a flapping or downtrained
  /// port). Empty: every NIC at the profile's rate.
  std::vector<double> nic_slowdown;
  /// Compute-time factor per GPU (global index; 1.25 = every pass and optimizer step takes 25%
  /// longer: a throttled GPU). Empty: every GPU at the profile's rate.
  std::vector<double> gpu_slowdown;
  /// Failed NICs (global index; 1 = down). A GPU whose rail's NIC is down sends and receives
  /// through the next working NIC of its node (NCCL's PXN: over NVLink to the GPU that owns it,
  /// or through the host switch where NICs hang off the host), sharing that port with its owner.
  /// Empty: every NIC up.
  std::vector<std::uint8_t> nic_failed;
  int num_failed_nics() const {
    int n = 0;
    for (std::uint8_t f : nic_failed) n += f;
    return n;
  }
  /// Other jobs' traffic: (source GPU, destination GPU) pairs, each a flow that runs for the
  /// whole iteration and takes its max-min fair share of every link on its route.
  std::vector<std::pair<int, int>> background_flows;
  /// Faulty leaf <-> spine links (both directions): degraded ones run at capacity / slowdown;
  /// failed ones carry nothing, and traffic between two leaves whose routed spine is cut on
  /// either side takes the next spine both reach (the subnet manager's re-route). Empty: every
  /// link up at full rate.
  struct SpineLinkFault {
    int leaf = 0, spine = 0;
    double slowdown = 1;  ///< capacity divisor (degraded)
    bool failed = false;
  };
  std::vector<SpineLinkFault> spine_link_faults;
  int num_failed_spine_links() const {
    int n = 0;
    for (const SpineLinkFault& f : spine_link_faults) n += f.failed;
    return n;
  }
  /// Every GPU and NIC alike: what simulating one GPU per pipeline rank relies on.
  bool symmetric() const {
    return nic_slowdown.empty() && gpu_slowdown.empty() && nic_failed.empty() &&
           background_flows.empty() && spine_link_faults.empty();
  }
};

/// Leaf and spine switch counts of a spec's fabric (no spines when one leaf serves every NIC).
struct FabricSize {
  int leaves = 0, spines = 0;
};
FabricSize fabric_size(const TopologySpec& spec);

/// Builds a TopologySpec from a profile and a node count (the profile's node and fabric).
TopologySpec topology_spec(const HardwareProfile& profile, int nodes);

struct VertexInfo {
  VertexKind kind = VertexKind::kGpu;
  int index = 0;  ///< index within its kind (global GPU index for GPUs)
  int node = -1;  ///< node of node-local vertices, -1 for leaf and spine switches
};

struct EdgeInfo {
  LinkId id = 0;
};

using ClusterGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexInfo, EdgeInfo>;

/// Bottleneck and latency of a route.
struct PathInfo {
  BytesPerSec bottleneck{};  ///< smallest link capacity on the route (0 for an empty route)
  TimePs latency = 0;        ///< sum of link latencies
  int hops = 0;              ///< number of links
  bool crosses_spine = false;
};

/// An immutable cluster graph with O(1)-per-hop routing.
class Topology {
 public:
  /// Expands `spec`; requires nodes >= 1, gpus_per_node >= 1, nics_per_node >= 1.
  explicit Topology(const TopologySpec& spec);

  const TopologySpec& spec() const { return spec_; }
  const ClusterGraph& graph() const { return graph_; }
  int num_gpus() const { return static_cast<int>(gpu_vertex_.size()); }
  int num_nodes() const { return spec_.nodes; }
  int node_of_gpu(int gpu) const { return gpu / spec_.node.gpus_per_node; }
  /// Node-local NIC index GPU `gpu` sends through (its rail).
  int rail_of_gpu(int gpu) const;
  int num_leaves() const { return num_leaves_; }
  int num_spines() const { return num_spines_; }

  std::size_t num_links() const { return link_capacity_.size(); }
  /// Effective capacity (datasheet bandwidth x efficiency) of a link, bytes/s per direction.
  BytesPerSec link_capacity(LinkId l) const { return {link_capacity_[l]}; }
  TimePs link_latency(LinkId l) const { return link_latency_[l]; }
  LinkType link_type(LinkId l) const { return link_type_[l]; }
  LinkRole link_role(LinkId l) const { return link_role_[l]; }
  /// Flat arrays for the simulator (indexed by LinkId).
  const std::vector<double>& link_capacities() const { return link_capacity_; }
  const std::vector<TimePs>& link_latencies() const { return link_latency_; }

  /// Appends to `out` the links from GPU `src` to GPU `dst` (none when src == dst).
  /// Deterministic: inter-leaf traffic picks its spine by a hash of (src, dst) (static ECMP).
  void route(int src, int dst, std::vector<LinkId>* out) const;
  std::vector<LinkId> route(int src, int dst) const;
  /// Bottleneck capacity, latency and hop count of route(src, dst).
  PathInfo path_info(int src, int dst) const;
  /// Graphviz DOT text of the whole graph (vertices labelled by kind, edges by link type).
  std::string to_graphviz() const;
  /// Human-readable name of a vertex ("gpu3", "nvswitch0", "nic1.5", "leaf2", "spine0").
  std::string vertex_name(std::size_t v) const;
  /// "source -> target" of a link by vertex names ("nic1.1 -> leaf0"); a scan of the graph's
  /// edges, for naming a few links in a report.
  std::string link_name(LinkId l) const;

 private:
  std::size_t add_vertex(VertexKind kind, int index, int node);
  /// Adds both directions; returns the id of the a->b link (b->a is id + 1).
  LinkId add_link(std::size_t a, std::size_t b, const LinkSpec& spec, LinkRole role);
  int leaf_of_nic(int node, int rail) const;

  TopologySpec spec_;
  ClusterGraph graph_;
  std::vector<std::size_t> gpu_vertex_;
  std::vector<double> link_capacity_;
  std::vector<TimePs> link_latency_;
  std::vector<LinkType> link_type_;
  std::vector<LinkRole> link_role_;
  // Per GPU: up (GPU -> switch) link to the intra-node switch; down = up + 1.
  std::vector<LinkId> gpu_intra_up_;
  // Per GPU: GPU -> host switch (PCIe); reverse = +1.
  std::vector<LinkId> gpu_host_up_;
  // Per (node, rail): GPU-or-host -> NIC link (direct when one NIC per GPU), NIC -> leaf link.
  std::vector<LinkId> to_nic_;
  std::vector<LinkId> nic_up_;
  // Per (leaf, spine): leaf -> spine link; reverse = +1.
  std::vector<LinkId> leaf_spine_;
  // Per (leaf, spine): 1 when that link failed (empty: none did).
  std::vector<std::uint8_t> spine_failed_;
  bool nic_per_gpu_ = true;
  int num_leaves_ = 0;
  int num_spines_ = 0;
};

}  // namespace pw::hw
