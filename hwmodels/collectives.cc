#include "hwmodels/collectives.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "core/error.h"
#include "hwmodels/profile.h"
#include "hwmodels/topology.h"

namespace pw::hw {

const char* collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all-reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce-scatter";
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kAllToAll:
      return "all-to-all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kSendRecv:
      return "send-recv";
  }
  return "?";
}

namespace {
constexpr std::pair<const char*, CollectiveKind> kNcclTests[] = {
    {"all_reduce", CollectiveKind::kAllReduce},
    {"all_gather", CollectiveKind::kAllGather},
    {"reduce_scatter", CollectiveKind::kReduceScatter},
    {"alltoall", CollectiveKind::kAllToAll},
    {"sendrecv", CollectiveKind::kSendRecv},
};
}  // namespace

const char* nccl_tests_name(CollectiveKind k) {
  for (const auto& [name, kind] : kNcclTests)
    if (kind == k) return name;
  return nullptr;
}

bool parse_nccl_tests_name(const std::string& name, CollectiveKind* out) {
  for (const auto& [n, kind] : kNcclTests)
    if (name == n || name == std::string(n) + "_perf") {
      *out = kind;
      return true;
    }
  return false;
}

std::string nccl_tests_names() {
  std::string out;
  for (const auto& [name, kind] : kNcclTests) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

const char* collective_algo_name(CollectiveAlgo a) {
  switch (a) {
    case CollectiveAlgo::kAuto:
      return "auto";
    case CollectiveAlgo::kRing:
      return "ring";
    case CollectiveAlgo::kTree:
      return "tree";
    case CollectiveAlgo::kHierarchical:
      return "hierarchical";
    case CollectiveAlgo::kNvls:
      return "nvls";
  }
  return "?";
}

double bus_factor(CollectiveKind k, int n) {
  if (n <= 1) return 1.0;
  double nn = n;
  switch (k) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (nn - 1) / nn;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll:
      return (nn - 1) / nn;
    default:
      return 1.0;
  }
}

double algbw(Bytes s, TimePs t) { return t > 0 ? s.value / ps_to_seconds(t) : 0.0; }

double busbw(CollectiveKind k, int n, Bytes s, TimePs t) { return algbw(s, t) * bus_factor(k, n); }

double SizeCorrection::at(double s) const {
  if (bytes.empty()) return 1.0;
  if (s <= bytes.front()) return factor.front();
  if (s >= bytes.back()) return factor.back();
  const std::size_t hi =
      static_cast<std::size_t>(std::upper_bound(bytes.begin(), bytes.end(), s) - bytes.begin());
  const std::size_t lo = hi - 1;
  const double x = std::log(s / bytes[lo]) / std::log(bytes[hi] / bytes[lo]);
  return factor[lo] * std::pow(factor[hi] / factor[lo], x);
}

double size_correction(const HardwareProfile& profile, CollectiveKind kind, bool multi_node,
                       double bytes) {
  for (const CollectiveSizeCorrection& c : profile.collective_size_corrections)
    if (c.kind == kind && c.multi_node == multi_node) return c.table.at(bytes);
  return 1.0;
}

GroupNetwork describe_group(const Topology& topo, const HardwareProfile& profile,
                            const std::vector<int>& gpus) {
  GroupNetwork net;
  net.n = static_cast<int>(gpus.size());
  net.nvls = profile.node.nvls;
  net.nvls_efficiency = profile.node.nvls_efficiency;
  net.step_latency = profile.collective_step_latency;
  if (!profile.collective_protocols.empty()) {
    net.num_protocols = static_cast<int>(
        std::min<std::size_t>(profile.collective_protocols.size(), net.protocol_latency.size()));
    for (int i = 0; i < net.num_protocols; ++i) {
      net.protocol_latency[i] = profile.collective_protocols[i].step_latency;
      net.protocol_efficiency[i] = profile.collective_protocols[i].bandwidth_efficiency;
    }
  }
  if (gpus.empty()) return net;
  std::map<int, std::vector<int>> by_node;
  for (int g : gpus) by_node[topo.node_of_gpu(g)].push_back(g);
  net.nodes = static_cast<int>(by_node.size());
  for (const CollectiveSizeCorrection& c : profile.collective_size_corrections)
    if (c.multi_node == (net.nodes > 1)) net.correction[static_cast<int>(c.kind)] = c.table;
  for (const auto& [node, list] : by_node) {
    net.ranks_per_node = std::max(net.ranks_per_node, static_cast<int>(list.size()));
  }
  // Intra-node: the slowest pair of neighbours on any node.
  double intra = 0;
  for (const auto& [node, list] : by_node) {
    for (std::size_t i = 0; i + 1 < list.size(); ++i) {
      PathInfo p = topo.path_info(list[i], list[i + 1]);
      intra = intra == 0 ? p.bottleneck.value : std::min(intra, p.bottleneck.value);
      net.intra_latency = std::max(net.intra_latency, p.latency);
    }
  }
  net.intra_bw = {intra};
  if (net.nodes < 2) return net;
  // Inter-node: the first GPU to a GPU of the next node on the same rail if there is one.
  const auto& first = by_node.begin()->second;
  const auto& second = std::next(by_node.begin())->second;
  int src = first.front();
  int dst = second.front();
  for (int g : second) {
    if (topo.rail_of_gpu(g) == topo.rail_of_gpu(src)) {
      dst = g;
      break;
    }
  }
  PathInfo p = topo.path_info(src, dst);
  std::set<int> rails;
  for (int g : first) rails.insert(topo.rail_of_gpu(g));
  double oversub = p.crosses_spine ? topo.spec().fabric.oversubscription : 1.0;
  net.single_nic_bw = {p.bottleneck.value};
  net.inter_bw = {p.bottleneck.value * static_cast<double>(rails.size()) / oversub};
  net.inter_latency = p.latency;
  return net;
}

TimePs CollectiveStep::time() const {
  if (repeat <= 0) return 0;
  PW_ASSERT(bandwidth.value > 0, "collective step without bandwidth");
  double per = static_cast<double>(latency_hops) * ps_to_seconds(hop_latency) +
               bytes_per_rank.value / bandwidth.value;
  return seconds_to_ps(per * repeat);
}

TimePs steps_time(const std::vector<CollectiveStep>& steps) {
  TimePs total = 0, last = 0;
  for (const CollectiveStep& s : steps) {
    TimePs t = s.time();
    if (s.overlaps_previous) {
      total += std::max<TimePs>(0, t - last);
      last = std::max(last, t);
    } else {
      total += t;
      last = t;
    }
  }
  return total;
}

namespace {

using K = CollectiveKind;

struct Links {
  StepLinks links;
  BytesPerSec bw;
  TimePs hop;
};

Links intra_links(const GroupNetwork& net) {
  return {StepLinks::kIntraNode, net.intra_bw, net.intra_latency + net.step_latency};
}

// A flat ring or tree over all ranks: limited by the slower of the intra-node neighbours and the
// node's aggregate NIC bandwidth (NCCL runs one channel per NIC, each crossing once per node).
Links flat_links(const GroupNetwork& net) {
  if (net.nodes <= 1) return intra_links(net);
  double bw = net.inter_bw.value;
  if (net.ranks_per_node > 1) bw = std::min(bw, net.intra_bw.value);
  return {StepLinks::kBottleneck,
          {bw},
          std::max(net.intra_latency, net.inter_latency) + net.step_latency};
}

CollectiveStep step(StepPattern pat, const Links& l, int group, int repeat, int hops, double bytes,
                    bool overlap = false) {
  return CollectiveStep{pat, l.links, group, repeat, hops, {bytes}, l.bw, l.hop, overlap};
}

std::vector<CollectiveStep> ring_steps(K kind, double s, const GroupNetwork& net) {
  const int n = net.n;
  Links l = flat_links(net);
  switch (kind) {
    case K::kAllReduce:
      return {step(StepPattern::kRing, l, n, n - 1, 1, s / n),
              step(StepPattern::kRing, l, n, n - 1, 1, s / n)};
    case K::kReduceScatter:
    case K::kAllGather:
      return {step(StepPattern::kRing, l, n, n - 1, 1, s / n)};
    case K::kBroadcast:
    case K::kReduce:
      return {step(StepPattern::kRing, l, n, 1, n - 1, s)};
    case K::kSendRecv: {
      Links p = net.nodes > 1 ? Links{StepLinks::kInterNode, net.single_nic_bw,
                                      net.inter_latency + net.step_latency}
                              : intra_links(net);
      return {step(StepPattern::kPoint, p, 2, 1, 1, s)};
    }
    case K::kAllToAll: {
      std::vector<CollectiveStep> out;
      int k = net.ranks_per_node;
      if (k > 1) out.push_back(step(StepPattern::kPairwise, intra_links(net), n, k - 1, 1, s / n));
      if (net.nodes > 1) {
        Links inter{
            StepLinks::kInterNode, {net.inter_bw.value / k}, net.inter_latency + net.step_latency};
        out.push_back(step(StepPattern::kPairwise, inter, n, n - k, 1, s / n, !out.empty()));
      }
      return out;
    }
  }
  return {};
}

std::vector<CollectiveStep> tree_steps(K kind, double s, const GroupNetwork& net) {
  int depth = static_cast<int>(std::ceil(std::log2(static_cast<double>(net.n))));
  Links l = flat_links(net);
  if (kind == K::kAllReduce) {
    return {step(StepPattern::kTree, l, net.n, 1, depth, s),
            step(StepPattern::kTree, l, net.n, 1, depth, s)};
  }
  if (kind == K::kBroadcast || kind == K::kReduce) {
    return {step(StepPattern::kTree, l, net.n, 1, depth, s)};
  }
  return ring_steps(kind, s, net);
}

std::vector<CollectiveStep> hierarchical_steps(K kind, double s, const GroupNetwork& net) {
  const int k = net.ranks_per_node;
  const int nodes = net.nodes;
  Links intra = intra_links(net);
  // Each of the k ranks of a node drives its share of the node's NICs.
  Links inter{
      StepLinks::kInterNode, {net.inter_bw.value / k}, net.inter_latency + net.step_latency};
  auto intra_ring = [&] { return step(StepPattern::kRing, intra, k, k - 1, 1, s / k); };
  switch (kind) {
    case K::kAllReduce:
      return {intra_ring(),
              step(StepPattern::kRing, inter, nodes, 2 * (nodes - 1), 1, s / k / nodes),
              intra_ring()};
    case K::kReduceScatter:
      return {intra_ring(), step(StepPattern::kRing, inter, nodes, nodes - 1, 1, s / k / nodes)};
    case K::kAllGather:
      return {step(StepPattern::kRing, inter, nodes, nodes - 1, 1, s / k / nodes), intra_ring()};
    case K::kBroadcast:
    case K::kReduce:
      return {step(StepPattern::kRing, {StepLinks::kInterNode, net.inter_bw, inter.hop}, nodes, 1,
                   nodes - 1, s),
              step(StepPattern::kRing, intra, k, 1, k - 1, s)};
    default:
      return ring_steps(kind, s, net);
  }
}

bool applicable(K kind, CollectiveAlgo algo, const GroupNetwork& net) {
  switch (algo) {
    case CollectiveAlgo::kNvls:
      return kind == K::kAllReduce && net.nvls && net.nodes == 1 && net.n > 1;
    case CollectiveAlgo::kHierarchical:
      return net.nodes > 1 && net.ranks_per_node > 1 && kind != K::kAllToAll &&
             kind != K::kSendRecv;
    case CollectiveAlgo::kTree:
      return kind == K::kAllReduce || kind == K::kBroadcast || kind == K::kReduce;
    default:
      return true;
  }
}

std::vector<CollectiveStep> algo_steps(K kind, CollectiveAlgo algo, double s,
                                       const GroupNetwork& net) {
  if (!applicable(kind, algo, net)) algo = CollectiveAlgo::kRing;
  switch (algo) {
    case CollectiveAlgo::kNvls: {
      Links l{StepLinks::kIntraNode,
              {net.intra_bw.value * net.nvls_efficiency},
              net.intra_latency + net.step_latency};
      return {step(StepPattern::kSwitch, l, net.n, 1, 2, s)};
    }
    case CollectiveAlgo::kTree:
      return tree_steps(kind, s, net);
    case CollectiveAlgo::kHierarchical:
      return hierarchical_steps(kind, s, net);
    default:
      return ring_steps(kind, s, net);
  }
}

// The algorithm's steps under protocol `proto`: its latency on every hop, its efficiency on
// every step's bandwidth.
std::vector<CollectiveStep> steps_for(K kind, CollectiveAlgo algo, double s,
                                      const GroupNetwork& net, int proto) {
  std::vector<CollectiveStep> steps = algo_steps(kind, algo, s, net);
  for (CollectiveStep& st : steps) {
    st.hop_latency += net.protocol_latency[proto];
    st.bandwidth.value *= net.protocol_efficiency[proto];
  }
  return steps;
}

// The fastest protocol for `algo` at size s (the first on ties).
int best_protocol(K kind, CollectiveAlgo algo, double s, const GroupNetwork& net, TimePs* time) {
  int best = 0;
  TimePs best_t = steps_time(steps_for(kind, algo, s, net, 0));
  for (int p = 1; p < net.num_protocols; ++p) {
    const TimePs t = steps_time(steps_for(kind, algo, s, net, p));
    if (t < best_t) best_t = t, best = p;
  }
  if (time) *time = best_t;
  return best;
}

}  // namespace

CollectiveAlgo choose_algorithm(CollectiveKind kind, Bytes s, const GroupNetwork& net,
                                int* protocol) {
  CollectiveAlgo best = CollectiveAlgo::kRing;
  TimePs best_t = 0;
  int best_p = best_protocol(kind, best, s.value, net, &best_t);
  for (CollectiveAlgo a :
       {CollectiveAlgo::kTree, CollectiveAlgo::kHierarchical, CollectiveAlgo::kNvls}) {
    if (!applicable(kind, a, net)) continue;
    TimePs t = 0;
    const int p = best_protocol(kind, a, s.value, net, &t);
    if (t < best_t) {
      best_t = t;
      best = a;
      best_p = p;
    }
  }
  if (protocol) *protocol = best_p;
  return best;
}

std::vector<CollectiveStep> collective_steps(CollectiveKind kind, CollectiveAlgo algo, Bytes s,
                                             const GroupNetwork& net) {
  if (net.n <= 1 || s.value <= 0) return {};
  int proto = 0;
  if (algo == CollectiveAlgo::kAuto)
    algo = choose_algorithm(kind, s, net, &proto);
  else
    proto = best_protocol(kind, algo, s.value, net, nullptr);
  std::vector<CollectiveStep> steps = steps_for(kind, algo, s.value, net, proto);
  // The size correction scales every step's time alike (its latency and its transfer), so the
  // simulator's flows of a step take the corrected time too. It does not change the choice
  // above: every (algorithm, protocol) pair of the kind gets the same factor at this size.
  const SizeCorrection& corr = net.correction[static_cast<int>(kind)];
  if (!corr.empty()) {
    const double c = corr.at(s.value);
    for (CollectiveStep& st : steps) {
      st.hop_latency = static_cast<TimePs>(std::llround(static_cast<double>(st.hop_latency) * c));
      st.bandwidth.value /= c;
    }
  }
  return steps;
}

TimePs collective_time(CollectiveKind kind, CollectiveAlgo algo, Bytes s, const GroupNetwork& net) {
  return steps_time(collective_steps(kind, algo, s, net));
}

CollectiveLine collective_line(CollectiveKind kind, const GroupNetwork& net) {
  CollectiveLine line;
  if (net.n <= 1) return line;
  line.correction = net.correction[static_cast<int>(kind)];
  for (CollectiveAlgo a : {CollectiveAlgo::kRing, CollectiveAlgo::kTree,
                           CollectiveAlgo::kHierarchical, CollectiveAlgo::kNvls}) {
    if (a != CollectiveAlgo::kRing && !applicable(kind, a, net)) continue;
    for (int proto = 0; proto < net.num_protocols; ++proto) {
      // At S = 1 byte each step moves bytes_per_rank(1) per repeat: beta is their sum over the
      // bandwidth; alpha the latency terms. Concurrent steps (all-to-all) take the larger.
      double alpha = 0, beta = 0, last_a = 0, last_b = 0;
      std::array<double, 2> route{0, 0};
      for (const CollectiveStep& st : steps_for(kind, a, 1.0, net, proto)) {
        const double sa = st.repeat * st.latency_hops * ps_to_seconds(st.hop_latency);
        const double sb = st.repeat * st.bytes_per_rank.value / st.bandwidth.value;
        // The simulator sends the first rank's intra-node and flat steps to the group's next
        // rank (on its node when it has several ranks there), inter-node steps to its peer on
        // the next node; with one rank per node both are one route. Concurrent steps both
        // count: they share the route.
        const bool one_route = net.ranks_per_node == 1;
        if (st.links != StepLinks::kInterNode || one_route) route[0] += sb;
        if (st.links == StepLinks::kInterNode || one_route) route[1] += sb;
        if (st.overlaps_previous) {
          alpha += std::max(0.0, sa - last_a);
          beta += std::max(0.0, sb - last_b);
        } else {
          alpha += sa;
          beta += sb;
        }
        last_a = sa;
        last_b = sb;
      }
      line.alpha[line.count] = alpha;
      line.beta[line.count] = beta;
      line.route[line.count] = route;
      ++line.count;
    }
  }
  return line;
}

TimePs all_to_all_bandwidth_bound(CollectiveKind kind, Bytes s, const GroupNetwork& net) {
  if (kind != CollectiveKind::kAllToAll || net.n <= 1 || s.value <= 0) return 0;
  const double n = net.n, r = std::max(1, net.ranks_per_node);
  double secs = 0;
  if (net.nodes > 1 && net.inter_bw.value > 0)
    secs = r * s.value * (n - r) / n / net.inter_bw.value;
  if (r > 1 && net.intra_bw.value > 0)
    secs = std::max(secs, s.value * (r - 1) / n / net.intra_bw.value);
  // The simulator's exchange carries the size correction (collective_steps): so does its bound.
  return seconds_to_ps(secs * net.correction[static_cast<int>(kind)].at(s.value));
}

TimePs send_recv_bandwidth_bound(Bytes s, const GroupNetwork& net) {
  if (net.n <= 1 || s.value <= 0) return 0;
  const double bw = net.nodes > 1 ? net.single_nic_bw.value : net.intra_bw.value;
  if (bw <= 0) return 0;
  const int k = static_cast<int>(CollectiveKind::kSendRecv);
  return seconds_to_ps(s.value / bw * net.correction[k].at(s.value));
}

}  // namespace pw::hw
