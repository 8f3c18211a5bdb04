#pragma once
/// The cluster section's heterogeneity and fault keys, read into the topology: slow_gpus,
/// slow_nodes and degraded_nics ({index: factor}), failed_nics ([index, ...]), background_flows
/// ([[source GPU, destination GPU], ...]), failed_spine_links ([[leaf, spine], ...]) and
/// degraded_spine_links ([[leaf, spine, factor], ...]). Every bad value is a ConfigError naming
/// the file and key. Part of the scenario loader (hwmodels/scenario.cc), kept apart as one idea.
#include "hwmodels/config_map.h"
#include "hwmodels/topology.h"

namespace pw::hw {

/// Reads the fault keys of cluster section `c` into `t` (nodes, GPUs per node and the fabric
/// already set: the indices are checked against them).
void parse_cluster_faults(const ConfigMap& c, TopologySpec* t);

}  // namespace pw::hw
