// Heterogeneity and faults of a scenario's cluster (hwmodels/scenario_faults.h).
#include "hwmodels/scenario_faults.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pw::hw {
namespace {

// A list of fixed-size lists of numbers under `key` ([[0, 64], [3, 9]]); the first `integers`
// entries of each must be integers. Anything else fails naming the key with `expected`.
std::vector<std::vector<double>> number_tuples(const ConfigMap& c, const char* key, std::size_t n,
                                               const char* expected, std::size_t integers = 99) {
  const YAML::Node list = c.raw(key);
  if (!list.IsSequence()) c.fail(key, expected);
  std::vector<std::vector<double>> out;
  for (const auto& item : list) {
    if (!item.IsSequence() || item.size() != n) c.fail(key, expected);
    std::vector<double> v(n);
    try {
      for (std::size_t k = 0; k < n; ++k)
        v[k] = k < integers ? static_cast<double>(item[k].as<long long>()) : item[k].as<double>();
    } catch (const YAML::Exception&) {
      c.fail(key, expected);
    }
    out.push_back(std::move(v));
  }
  return out;
}

// Faulty leaf <-> spine links: failed_spine_links [[leaf, spine], ...] and degraded_spine_links
// [[leaf, spine, factor], ...]. Every two leaves must keep a spine both reach.
void parse_spine_link_faults(const ConfigMap& c, TopologySpec* t) {
  const FabricSize size = fabric_size(*t);
  auto check = [&](const char* key, long long leaf, long long spine) {
    if (size.spines == 0)
      c.fail(key, fmt::format("the cluster's {} nodes sit on one leaf switch: there is no spine "
                              "link to list",
                              t->nodes));
    if (leaf < 0 || leaf >= size.leaves || spine < 0 || spine >= size.spines)
      c.fail(key, fmt::format("[{}, {}] is outside the fabric's {} leaves x {} spines", leaf, spine,
                              size.leaves, size.spines));
    // Once per link across both keys (twice would multiply a factor or count a failure twice).
    for (const TopologySpec::SpineLinkFault& f : t->spine_link_faults)
      if (f.leaf == leaf && f.spine == spine)
        c.fail(key, fmt::format("[{}, {}] is listed more than once (failed_spine_links and "
                                "degraded_spine_links together); expected each link once",
                                leaf, spine));
  };
  if (c.has("degraded_spine_links")) {
    for (const std::vector<double>& v :
         number_tuples(c, "degraded_spine_links", 3,
                       "expected a list of [leaf, spine, factor] (e.g. [[0, 3, 4]]: the link "
                       "at a quarter rate)",
                       2)) {
      check("degraded_spine_links", static_cast<long long>(v[0]), static_cast<long long>(v[1]));
      if (!(v[2] >= 1.0 && v[2] <= 100.0))
        c.fail("degraded_spine_links",
               fmt::format("factor {} for [{}, {}]: expected a number from 1 (full speed) to 100",
                           v[2], v[0], v[1]));
      t->spine_link_faults.push_back({static_cast<int>(v[0]), static_cast<int>(v[1]), v[2], false});
    }
  }
  if (!c.has("failed_spine_links")) return;
  std::vector<std::uint8_t> failed;
  for (const std::vector<double>& v : number_tuples(
           c, "failed_spine_links", 2, "expected a list of [leaf, spine] pairs (e.g. [[0, 3]])")) {
    check("failed_spine_links", static_cast<long long>(v[0]), static_cast<long long>(v[1]));
    if (failed.empty()) failed.assign(static_cast<std::size_t>(size.leaves) * size.spines, 0);
    failed[static_cast<std::size_t>(v[0]) * size.spines + static_cast<std::size_t>(v[1])] = 1;
    t->spine_link_faults.push_back({static_cast<int>(v[0]), static_cast<int>(v[1]), 1.0, true});
  }
  if (failed.empty()) return;  // [] is a healthy fabric
  // Two leaves are cut apart when no spine has both links up.
  for (int a = 0; a < size.leaves; ++a) {
    bool any = false;
    for (int sp = 0; sp < size.spines; ++sp) any = any || failed[a * size.spines + sp];
    if (!any) continue;
    for (int b = 0; b < size.leaves; ++b) {
      if (b == a) continue;
      bool path = false;
      for (int sp = 0; sp < size.spines && !path; ++sp)
        path = !failed[a * size.spines + sp] && !failed[b * size.spines + sp];
      if (!path)
        c.fail("failed_spine_links",
               fmt::format("leaves {} and {} share no spine with both links up; every two leaves "
                           "need one to reach each other",
                           a, b));
    }
  }
}

}  // namespace

void parse_cluster_faults(const ConfigMap& c, TopologySpec* topology) {
  TopologySpec& t = *topology;
  // Slow GPUs and degraded NICs: {index: factor} maps. A node's factor applies to each of its
  // GPUs (a GPU listed in both takes the product); factor = how much longer every pass takes
  // (1.25: 25% slower). A NIC's factor divides its port's rate (2: half speed), both directions.
  const int gpus = t.nodes * t.node.gpus_per_node;
  const int nics = t.nodes * t.node.nics_per_node;
  for (const char* key : {"slow_nodes", "slow_gpus", "degraded_nics"}) {
    if (!c.has(key)) continue;
    const bool nodes = std::string(key) == "slow_nodes";
    const bool nic = std::string(key) == "degraded_nics";
    const YAML::Node m = c.raw(key);
    if (!m.IsMap()) c.fail(key, "expected a map of index: factor (e.g. {3: 1.25})");
    if (nic && t.nic_slowdown.empty()) t.nic_slowdown.assign(nics, 1.0);
    if (!nic && t.gpu_slowdown.empty()) t.gpu_slowdown.assign(gpus, 1.0);
    for (const auto& kv : m) {
      long long index = -1;
      double factor = 0;
      try {
        index = kv.first.as<long long>();
        factor = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        c.fail(key, "expected integer indices and numeric factors (e.g. {3: 1.25})");
      }
      const int count = nic ? nics : nodes ? t.nodes : gpus;
      if (index < 0 || index >= count)
        c.fail(key, fmt::format("index {} is outside the cluster's {} {}", index, count,
                                nic     ? "NICs"
                                : nodes ? "nodes"
                                        : "GPUs"));
      if (!(factor >= 1.0 && factor <= 100.0))
        c.fail(key, fmt::format("factor {} for index {}: expected a number from 1 (full speed) "
                                "to 100",
                                factor, index));
      if (nic) {
        t.nic_slowdown[index] *= factor;
        continue;
      }
      const int per = nodes ? t.node.gpus_per_node : 1;
      for (int g = static_cast<int>(index) * per; g < (index + 1) * per; ++g)
        t.gpu_slowdown[g] *= factor;
    }
  }
  // Failed NICs: a list of global NIC indices (node x nics_per_node + rail); each node keeps one.
  if (c.has("failed_nics")) {
    const YAML::Node list = c.raw("failed_nics");
    if (!list.IsSequence()) c.fail("failed_nics", "expected a list of NIC indices (e.g. [9, 12])");
    t.nic_failed.assign(nics, 0);
    for (const auto& item : list) {
      long long index = -1;
      try {
        index = item.as<long long>();
      } catch (const YAML::Exception&) {
        c.fail("failed_nics", "expected integer NIC indices (e.g. [9, 12])");
      }
      if (index < 0 || index >= nics)
        c.fail("failed_nics",
               fmt::format("index {} is outside the cluster's {} NICs", index, nics));
      t.nic_failed[index] = 1;
    }
    const int per = t.node.nics_per_node;
    for (int node = 0; node < t.nodes; ++node) {
      bool any = false;
      for (int r = 0; r < per; ++r) any = any || !t.nic_failed[node * per + r];
      if (!any)
        c.fail("failed_nics", fmt::format("every NIC of node {} (indices {}..{}) is listed; a node "
                                          "needs one working NIC to reach the others",
                                          node, node * per, node * per + per - 1));
    }
    if (t.num_failed_nics() == 0) t.nic_failed.clear();  // [] is a healthy cluster
  }
  // Other jobs' traffic: [[source GPU, destination GPU], ...], each a flow for the whole run.
  if (c.has("background_flows")) {
    for (const std::vector<double>& pair :
         number_tuples(c, "background_flows", 2,
                       "expected a list of [source GPU, destination GPU] pairs (e.g. [[0, 64]])")) {
      const long long a = static_cast<long long>(pair[0]), b = static_cast<long long>(pair[1]);
      if (a < 0 || a >= gpus || b < 0 || b >= gpus)
        c.fail("background_flows",
               fmt::format("[{}, {}] names a GPU outside the cluster's {}", a, b, gpus));
      if (a == b)
        c.fail("background_flows", fmt::format("[{}, {}]: a flow needs two different GPUs", a, b));
      t.background_flows.push_back({static_cast<int>(a), static_cast<int>(b)});
    }
  }
  parse_spine_link_faults(c, &t);
}

}  // namespace pw::hw
