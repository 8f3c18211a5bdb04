#pragma once
/// Link classes of a cluster (NVLink/NVSwitch, PCIe, InfiniBand/RoCE, Ethernet) and the fabric
/// description (fat tree or rail-optimised, oversubscription) a topology is built from.
#include <string>
#include <vector>

#include "core/units.h"

namespace pw::hw {

/// Physical link technologies.
enum class LinkType { kNvlink, kNvswitch, kPcie, kInfiniband, kRoce, kEthernet };

/// "nvlink", "nvswitch", "pcie", "infiniband", "roce", "ethernet".
const char* link_type_name(LinkType t);
/// All link type names, in enum order (for error messages).
std::vector<std::string> link_type_names();
/// Parses a link type name; returns false if unknown.
bool parse_link_type(const std::string& name, LinkType* out);

/// One link class: bandwidth per direction (full duplex), latency per hop and the share of the
/// bandwidth a bulk transfer reaches (protocol and software overhead).
struct LinkSpec {
  LinkType type = LinkType::kNvlink;
  BytesPerSec bandwidth{};  ///< per direction, datasheet
  TimePs latency = 0;       ///< per traversal (ps)
  double efficiency = 1.0;  ///< achieved / datasheet for large transfers, in (0, 1]
  /// bandwidth * efficiency: what a long flow over an uncontended link reaches.
  BytesPerSec effective() const { return {bandwidth.value * efficiency}; }
};

/// Layouts of the scale-out network.
enum class FabricKind {
  kFatTree,        ///< all NICs of a node on the same leaf; leaves joined by spines
  kRailOptimized,  ///< NIC r of every node in a group on leaf r of that group (one leaf per rail)
};
const char* fabric_kind_name(FabricKind k);

/// The scale-out network between nodes.
/// Readers refuse more downlink ports per leaf than this (4x today's largest switch radix; the
/// spines and leaf <-> spine links grow with it).
inline constexpr int kMaxLeafPorts = 2048;

struct FabricSpec {
  FabricKind kind = FabricKind::kRailOptimized;
  double oversubscription = 1.0;  ///< leaf downlink / uplink bandwidth, >= 1
  int leaf_ports = 32;            ///< downlink ports per leaf switch, 1..kMaxLeafPorts
  LinkSpec switch_link{LinkType::kInfiniband, {25e9}, 500'000, 0.92};  ///< leaf <-> spine
};

/// What is inside one node.
struct NodeSpec {
  int gpus_per_node = 8;
  /// GPU <-> GPU inside the node: kNvswitch (all GPUs through a switch), kNvlink (same, folded
  /// into one switch vertex) or kPcie (through the host PCIe switch). Bandwidth is per GPU.
  LinkSpec intra;
  bool nvls = false;  ///< NVLink SHARP (in-switch reduction) available
  /// NVLS all-reduce algbw / effective intra bandwidth (in-switch reduction throughput).
  double nvls_efficiency = 0.0;
  LinkSpec pcie;  ///< GPU <-> NIC / host
  LinkSpec nic;   ///< NIC <-> leaf, per NIC
  int nics_per_node = 8;
  /// The hosts' memory bandwidth per node (all CPU sockets' channels; 0: not given) and the share
  /// of it that an offloaded optimizer's CPU Adam sustains (profile keys
  /// node.host_memory_bandwidth_gb_per_s and node.host_memory_efficiency; hw::cpu_adam_rate).
  BytesPerSec host_memory_bandwidth{0};
  double host_memory_efficiency = 0;
};

}  // namespace pw::hw
