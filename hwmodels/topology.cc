#include "hwmodels/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "hwmodels/profile.h"

namespace pw::hw {

const char* vertex_kind_name(VertexKind k) {
  switch (k) {
    case VertexKind::kGpu:
      return "gpu";
    case VertexKind::kNvSwitch:
      return "nvswitch";
    case VertexKind::kHostSwitch:
      return "host";
    case VertexKind::kNic:
      return "nic";
    case VertexKind::kLeaf:
      return "leaf";
    case VertexKind::kSpine:
      return "spine";
  }
  return "?";
}

TopologySpec topology_spec(const HardwareProfile& profile, int nodes) {
  TopologySpec spec;
  spec.nodes = nodes;
  spec.node = profile.node;
  spec.fabric = profile.fabric;
  return spec;
}

std::size_t Topology::add_vertex(VertexKind kind, int index, int node) {
  return boost::add_vertex(VertexInfo{kind, index, node}, graph_);
}

LinkId Topology::add_link(std::size_t a, std::size_t b, const LinkSpec& spec, LinkRole role) {
  auto id = static_cast<LinkId>(link_capacity_.size());
  for (int dir = 0; dir < 2; ++dir) {
    boost::add_edge(dir == 0 ? a : b, dir == 0 ? b : a, EdgeInfo{id + LinkId(dir)}, graph_);
    link_capacity_.push_back(spec.effective().value);
    link_latency_.push_back(spec.latency);
    link_type_.push_back(spec.type);
    link_role_.push_back(role);
  }
  return id;
}

int Topology::rail_of_gpu(int gpu) const {
  int local = gpu % spec_.node.gpus_per_node;
  int nics = spec_.node.nics_per_node;
  if (nic_per_gpu_) return local;
  return static_cast<int>(static_cast<long long>(local) * nics / spec_.node.gpus_per_node) % nics;
}

int Topology::leaf_of_nic(int node, int rail) const {
  const FabricSpec& f = spec_.fabric;
  int nics = spec_.node.nics_per_node;
  if (f.kind == FabricKind::kFatTree) return node / std::max(1, f.leaf_ports / nics);
  return (node / f.leaf_ports) * nics + rail;
}

Topology::Topology(const TopologySpec& spec) : spec_(spec) {
  const NodeSpec& ns = spec_.node;
  const FabricSpec& fs = spec_.fabric;
  PW_ASSERT(spec_.nodes >= 1 && ns.gpus_per_node >= 1 && ns.nics_per_node >= 1,
            "topology needs nodes, GPUs and NICs");
  PW_ASSERT(fs.leaf_ports >= 1 && fs.oversubscription >= 1.0, "bad fabric");
  nic_per_gpu_ = ns.nics_per_node == ns.gpus_per_node;
  const int g_per = ns.gpus_per_node;
  const int nics = ns.nics_per_node;
  const bool switched = ns.intra.type != LinkType::kPcie;
  const FabricSize size = fabric_size(spec_);
  num_leaves_ = size.leaves;
  num_spines_ = size.spines;
  gpu_intra_up_.resize(static_cast<std::size_t>(spec_.nodes) * g_per);
  gpu_host_up_.resize(gpu_intra_up_.size());
  to_nic_.resize(static_cast<std::size_t>(spec_.nodes) * nics);
  nic_up_.resize(to_nic_.size());

  std::vector<std::size_t> leaf_v(num_leaves_);
  for (int l = 0; l < num_leaves_; ++l) leaf_v[l] = add_vertex(VertexKind::kLeaf, l, -1);
  std::vector<std::size_t> spine_v(num_spines_);
  for (int s = 0; s < num_spines_; ++s) spine_v[s] = add_vertex(VertexKind::kSpine, s, -1);

  for (int node = 0; node < spec_.nodes; ++node) {
    std::size_t host = add_vertex(VertexKind::kHostSwitch, node, node);
    std::size_t nvs = switched ? add_vertex(VertexKind::kNvSwitch, node, node) : host;
    std::size_t first_gpu = gpu_vertex_.size();
    for (int i = 0; i < g_per; ++i) {
      int gpu = node * g_per + i;
      std::size_t v = add_vertex(VertexKind::kGpu, gpu, node);
      gpu_vertex_.push_back(v);
      gpu_host_up_[gpu] = add_link(v, host, ns.pcie, LinkRole::kIntraNode);
      gpu_intra_up_[gpu] =
          switched ? add_link(v, nvs, ns.intra, LinkRole::kIntraNode) : gpu_host_up_[gpu];
    }
    for (int r = 0; r < nics; ++r) {
      std::size_t nic = add_vertex(VertexKind::kNic, node * nics + r, node);
      std::size_t near = nic_per_gpu_ ? gpu_vertex_[first_gpu + r] : host;
      to_nic_[node * nics + r] = add_link(near, nic, ns.pcie, LinkRole::kGpuToNic);
      LinkSpec port = ns.nic;
      const std::size_t k = static_cast<std::size_t>(node) * nics + r;
      if (k < spec_.nic_slowdown.size()) port.efficiency /= spec_.nic_slowdown[k];
      nic_up_[node * nics + r] =
          add_link(nic, leaf_v[leaf_of_nic(node, r)], port, LinkRole::kNicToLeaf);
    }
  }
  const std::size_t leaf_spine_links = static_cast<std::size_t>(num_leaves_) * num_spines_;
  leaf_spine_.resize(leaf_spine_links);
  std::vector<double> divisor(leaf_spine_links, 1.0);
  for (const TopologySpec::SpineLinkFault& f : spec_.spine_link_faults) {
    PW_ASSERT(f.leaf >= 0 && f.leaf < num_leaves_ && f.spine >= 0 && f.spine < num_spines_,
              "spine link fault outside the fabric");
    const std::size_t k = static_cast<std::size_t>(f.leaf) * num_spines_ + f.spine;
    divisor[k] *= f.slowdown;
    if (!f.failed) continue;
    if (spine_failed_.empty()) spine_failed_.assign(leaf_spine_links, 0);
    spine_failed_[k] = 1;
  }
  for (int l = 0; l < num_leaves_; ++l) {
    for (int s = 0; s < num_spines_; ++s) {
      LinkSpec up = fs.switch_link;
      up.efficiency /= divisor[static_cast<std::size_t>(l) * num_spines_ + s];
      leaf_spine_[l * num_spines_ + s] =
          add_link(leaf_v[l], spine_v[s], up, LinkRole::kLeafToSpine);
    }
  }
}

FabricSize fabric_size(const TopologySpec& spec) {
  const FabricSpec& fs = spec.fabric;
  const int nics = spec.node.nics_per_node;
  FabricSize out;
  if (fs.kind == FabricKind::kFatTree) {
    const int per_leaf = std::max(1, fs.leaf_ports / nics);
    out.leaves = (spec.nodes + per_leaf - 1) / per_leaf;
  } else {
    out.leaves = ((spec.nodes + fs.leaf_ports - 1) / fs.leaf_ports) * nics;
  }
  out.spines = out.leaves > 1
                   ? std::max(1, static_cast<int>(std::ceil(fs.leaf_ports / fs.oversubscription)))
                   : 0;
  return out;
}

void Topology::route(int src, int dst, std::vector<LinkId>* out) const {
  PW_ASSERT(src >= 0 && src < num_gpus() && dst >= 0 && dst < num_gpus(), "GPU out of range");
  if (src == dst) return;
  const int nics = spec_.node.nics_per_node;
  int a = node_of_gpu(src), b = node_of_gpu(dst);
  if (a == b) {
    out->push_back(gpu_intra_up_[src]);
    out->push_back(gpu_intra_up_[dst] + 1);
    return;
  }
  // A failed NIC's traffic leaves by the next working NIC of the node (the loader guarantees one).
  auto working_rail = [&](int node, int rail) {
    if (spec_.nic_failed.empty()) return rail;
    for (int k = 0; k < nics; ++k) {
      const int r = (rail + k) % nics;
      if (!spec_.nic_failed[static_cast<std::size_t>(node) * nics + r]) return r;
    }
    return rail;
  };
  const int g_per = spec_.node.gpus_per_node;
  int ra = working_rail(a, rail_of_gpu(src)), rb = working_rail(b, rail_of_gpu(dst));
  if (!nic_per_gpu_) {
    out->push_back(gpu_host_up_[src]);
  } else if (ra != rail_of_gpu(src)) {  // over NVLink to the GPU that owns the NIC
    out->push_back(gpu_intra_up_[src]);
    out->push_back(gpu_intra_up_[a * g_per + ra] + 1);
  }
  out->push_back(to_nic_[a * nics + ra]);
  out->push_back(nic_up_[a * nics + ra]);
  int la = leaf_of_nic(a, ra), lb = leaf_of_nic(b, rb);
  if (la != lb) {
    // Destination-mod-k routing (InfiniBand's fat-tree routing engine): the spine is chosen by
    // the destination port's index on its leaf, so the flows into one leaf's ports take distinct
    // spines and a permutation (a pipeline shift, a ring step) is non-blocking, as the fabric is.
    const FabricSpec& f = spec_.fabric;
    const int port = f.kind == FabricKind::kFatTree
                         ? (b % std::max(1, f.leaf_ports / nics)) * nics + rb
                         : b % f.leaf_ports;
    int s = port % num_spines_;
    // A failed leaf <-> spine link on either side: the next spine both leaves reach (the loader
    // guarantees one).
    if (!spine_failed_.empty()) {
      for (int k = 0; k < num_spines_; ++k) {
        const int c = (s + k) % num_spines_;
        if (!spine_failed_[static_cast<std::size_t>(la) * num_spines_ + c] &&
            !spine_failed_[static_cast<std::size_t>(lb) * num_spines_ + c]) {
          s = c;
          break;
        }
      }
    }
    out->push_back(leaf_spine_[la * num_spines_ + s]);
    out->push_back(leaf_spine_[lb * num_spines_ + s] + 1);
  }
  out->push_back(nic_up_[b * nics + rb] + 1);
  out->push_back(to_nic_[b * nics + rb] + 1);
  if (!nic_per_gpu_) {
    out->push_back(gpu_host_up_[dst] + 1);
  } else if (rb != rail_of_gpu(dst)) {
    out->push_back(gpu_intra_up_[b * g_per + rb]);
    out->push_back(gpu_intra_up_[dst] + 1);
  }
}

std::vector<LinkId> Topology::route(int src, int dst) const {
  std::vector<LinkId> out;
  route(src, dst, &out);
  return out;
}

PathInfo Topology::path_info(int src, int dst) const {
  PathInfo p;
  std::vector<LinkId> links = route(src, dst);
  p.hops = static_cast<int>(links.size());
  double bw = links.empty() ? 0.0 : link_capacity_[links[0]];
  for (LinkId l : links) {
    bw = std::min(bw, link_capacity_[l]);
    p.latency += link_latency_[l];
    p.crosses_spine = p.crosses_spine || link_role_[l] == LinkRole::kLeafToSpine;
  }
  p.bottleneck = {bw};
  return p;
}

std::string Topology::vertex_name(std::size_t v) const {
  const VertexInfo& info = graph_[v];
  if (info.kind == VertexKind::kNic) {
    int nics = spec_.node.nics_per_node;
    return fmt::format("nic{}.{}", info.index / nics, info.index % nics);
  }
  return fmt::format("{}{}", vertex_kind_name(info.kind), info.index);
}

const char* link_role_name(LinkRole r) {
  switch (r) {
    case LinkRole::kIntraNode:
      return "in node";
    case LinkRole::kGpuToNic:
      return "GPU-NIC";
    case LinkRole::kNicToLeaf:
      return "NIC-leaf";
    case LinkRole::kLeafToSpine:
      return "leaf-spine";
  }
  return "?";
}

std::string Topology::link_name(LinkId l) const {
  auto [vb, ve] = boost::vertices(graph_);
  for (auto v = vb; v != ve; ++v) {
    auto [eb, ee] = boost::out_edges(*v, graph_);
    for (auto e = eb; e != ee; ++e)
      if (graph_[*e].id == l)
        return vertex_name(*v) + " -> " + vertex_name(boost::target(*e, graph_));
  }
  PW_ASSERT(false, "link id out of range");
  return {};
}

std::string Topology::to_graphviz() const {
  // Written by hand over Boost.Graph's vertex and out-edge ranges (boost::write_graphviz adds
  // nothing here and trips -Wmaybe-uninitialized in GCC 12).
  static const char* kShapes[] = {"box",     "diamond",  "hexagon",
                                  "ellipse", "triangle", "invtriangle"};
  std::ostringstream out;
  out << "digraph cluster {\n";
  auto [vb, ve] = boost::vertices(graph_);
  for (auto v = vb; v != ve; ++v) {
    out << fmt::format("  {} [label=\"{}\", shape={}];\n", *v, vertex_name(*v),
                       kShapes[static_cast<int>(graph_[*v].kind)]);
  }
  for (auto v = vb; v != ve; ++v) {
    auto [eb, ee] = boost::out_edges(*v, graph_);
    for (auto e = eb; e != ee; ++e) {
      LinkId id = graph_[*e].id;
      out << fmt::format("  {} -> {} [label=\"{} {:.0f} GB/s\"];\n", *v, boost::target(*e, graph_),
                         link_type_name(link_type_[id]), link_capacity_[id] / 1e9);
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace pw::hw
