// Cluster graph, routing, rank layout and Graphviz export.
#include "hwmodels/topology.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "hwmodels/profile.h"
#include "hwmodels/rank_layout.h"

namespace pw::hw {
namespace {

HardwareProfile profile(const std::string& name) {
  return load_profile(std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/" + name + ".yaml");
}

std::vector<LinkRole> roles(const Topology& t, const std::vector<LinkId>& links) {
  std::vector<LinkRole> r;
  for (LinkId l : links) r.push_back(t.link_role(l));
  return r;
}

bool has(const std::vector<LinkRole>& r, LinkRole x) {
  return std::find(r.begin(), r.end(), x) != r.end();
}

TEST(Topology, TwoNodeDgxPathAcrossNodesCrossesNicAndSwitch) {
  Topology t(topology_spec(profile("dgx-a100-80gb"), 2));
  ASSERT_EQ(t.num_gpus(), 16);
  std::vector<LinkId> path = t.route(0, 8);  // same rail, different nodes
  auto r = roles(t, path);
  EXPECT_TRUE(has(r, LinkRole::kGpuToNic));
  EXPECT_TRUE(has(r, LinkRole::kNicToLeaf));
  EXPECT_EQ(path.size(), 4u);  // GPU->NIC->leaf->NIC->GPU
  // The NIC uplink ends at a leaf switch vertex of the graph.
  bool reaches_leaf = false;
  auto [eb, ee] = boost::edges(t.graph());
  for (auto e = eb; e != ee; ++e) {
    if (t.graph()[*e].id == path[1]) {
      reaches_leaf = t.graph()[boost::target(*e, t.graph())].kind == VertexKind::kLeaf;
    }
  }
  EXPECT_TRUE(reaches_leaf);
  EXPECT_EQ(t.link_type(path[1]), LinkType::kInfiniband);
  PathInfo p = t.path_info(0, 8);
  EXPECT_NEAR(p.bottleneck.value, 25e9 * 0.9, 1.0);  // HDR 200 Gb/s x 0.9
}

TEST(Topology, InsideANodeOnlyNvSwitch) {
  Topology t(topology_spec(profile("dgx-h100"), 2));
  std::vector<LinkId> path = t.route(1, 6);
  ASSERT_EQ(path.size(), 2u);
  for (LinkId l : path) {
    EXPECT_EQ(t.link_type(l), LinkType::kNvswitch);
    EXPECT_EQ(t.link_role(l), LinkRole::kIntraNode);
  }
  EXPECT_NEAR(t.path_info(1, 6).bottleneck.value, 450e9 * 0.8, 1.0);
  EXPECT_TRUE(t.route(3, 3).empty());
}

TEST(Topology, RailOptimisedCrossRailTrafficUsesASpine) {
  Topology t(topology_spec(profile("dgx-a100-80gb"), 2));
  EXPECT_EQ(t.num_leaves(), 8);    // one leaf per rail
  PathInfo p = t.path_info(0, 9);  // rail 0 to rail 1
  EXPECT_TRUE(p.crosses_spine);
  EXPECT_EQ(p.hops, 6);
  EXPECT_FALSE(t.path_info(0, 8).crosses_spine);
}

TEST(Topology, FatTreeOversubscriptionReducesSpines) {
  TopologySpec spec = topology_spec(profile("dgx-a100-80gb"), 16);
  spec.fabric.kind = FabricKind::kFatTree;
  spec.fabric.leaf_ports = 32;  // 4 nodes of 8 NICs per leaf
  spec.fabric.oversubscription = 2;
  Topology t(spec);
  EXPECT_EQ(t.num_leaves(), 4);
  EXPECT_EQ(t.num_spines(), 16);                          // 32 down ports, 16 up
  EXPECT_FALSE(t.path_info(0, 3 * 8 + 5).crosses_spine);  // nodes 0 and 3 share leaf 0
  EXPECT_TRUE(t.path_info(0, 4 * 8).crosses_spine);
}

TEST(Topology, CommodityNodesShareOneNicThroughTheHost) {
  Topology t(topology_spec(profile("commodity-pcie-100gbe"), 2));
  std::vector<LinkId> intra = t.route(0, 1);
  ASSERT_EQ(intra.size(), 2u);
  EXPECT_EQ(t.link_type(intra[0]), LinkType::kPcie);
  PathInfo p = t.path_info(2, 13);
  EXPECT_EQ(p.hops, 6);  // GPU->host->NIC->leaf->NIC->host->GPU
  EXPECT_NEAR(p.bottleneck.value, 12.5e9 * 0.85, 1.0);
}

TEST(Topology, LinkArraysAreDenseAndPaired) {
  Topology t(topology_spec(profile("dgx-h100"), 4));
  EXPECT_EQ(t.link_capacities().size(), t.num_links());
  EXPECT_EQ(t.num_links(), boost::num_edges(t.graph()));
  for (LinkId l = 0; l + 1 < t.num_links(); l += 2) {
    EXPECT_EQ(t.link_capacity(l), t.link_capacity(l + 1));
    EXPECT_GT(t.link_capacity(l).value, 0);
  }
  std::vector<LinkId> path = t.route(5, 29);
  for (LinkId l : path) EXPECT_LT(l, t.num_links());
}

TEST(Topology, GraphvizExportListsVerticesAndLinks) {
  Topology t(topology_spec(profile("dgx-a100-80gb"), 2));
  std::string dot = t.to_graphviz();
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.find("nvswitch0"), std::string::npos);
  EXPECT_NE(dot.find("leaf0"), std::string::npos);
  EXPECT_NE(dot.find("infiniband"), std::string::npos);
}

TEST(RankLayout, TensorGroupsStayInsideANode) {
  RankLayout l = make_rank_layout(8, 4, 2, 8, 64, "f", "k");
  EXPECT_TRUE(l.tp_groups_within_nodes());
  EXPECT_EQ(l.tp_group(1, 2), (std::vector<int>{40, 41, 42, 43, 44, 45, 46, 47}));
  EXPECT_EQ(l.dp_group(3, 0), (std::vector<int>{3, 11}));
  EXPECT_EQ(l.pp_group(0, 1), (std::vector<int>{8, 24, 40, 56}));
  RankLayout wide = make_rank_layout(16, 1, 1, 8, 16, "f", "k");
  EXPECT_FALSE(wide.tp_groups_within_nodes());
}

// Megatron's expert layout within a pipeline stage (local index i = t_rank + t d_rank): expert-TP
// fastest, then EP, then expert-DP. t = 2, d = 8, p = 2, ep = 4, expert-TP 1: expert-DP =
// 2 x 8 / 4 = 4 and rank (t 1, d 0) of stage 1 (local 1, GPU 17) has EP group local {0, 1, 2, 3}
// and expert-DP group local {1, 5, 9, 13} (i mod 4 = 1), i.e. GPUs {17, 21, 25, 29}. Every EP
// group meets every expert-DP group of its stage in exactly one rank. With ep = 1 and expert-TP
// = t the expert-DP group is the DP group.
TEST(RankLayout, ExpertDataParallelGroupsHoldTheSameExperts) {
  RankLayout l = make_rank_layout(2, 2, 8, 8, 32, "f", "k");
  l.ep = 4;
  l.etp = 1;
  EXPECT_EQ(l.expert_dp(), 4);
  EXPECT_TRUE(l.expert_dp_differs());
  EXPECT_EQ(l.ep_group(1, 0, 1), (std::vector<int>{16, 17, 18, 19}));
  EXPECT_EQ(l.expert_dp_group(1, 0, 1), (std::vector<int>{17, 21, 25, 29}));
  EXPECT_EQ(l.expert_dp_index(1, 0), 1);
  for (int d = 0; d < 8; ++d)
    for (int t = 0; t < 2; ++t) {
      const std::vector<int> e = l.ep_group(t, d, 0), x = l.expert_dp_group(t, d, 0);
      int shared = 0;
      for (int g : e) shared += static_cast<int>(std::count(x.begin(), x.end(), g));
      EXPECT_EQ(shared, 1) << t << " " << d;
      EXPECT_NE(std::find(x.begin(), x.end(), l.gpu(t, d, 0)), x.end());
    }
  RankLayout dense = make_rank_layout(2, 2, 8, 8, 32, "f", "k");
  dense.etp = 2;
  EXPECT_FALSE(dense.expert_dp_differs());
  EXPECT_EQ(dense.expert_dp_group(1, 3, 1), dense.dp_group(1, 1));
}

TEST(RankLayout, GpuCountMismatchNamesSizesAndExpectation) {
  try {
    make_rank_layout(8, 4, 3, 8, 64, "s.yaml", "parallel");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "s.yaml: parallel: t*p*d = 8*4*3 = 96 does not match the 64 GPUs of the "
                 "cluster; expected t*p*d = 64");
  }
}

}  // namespace
}  // namespace pw::hw
