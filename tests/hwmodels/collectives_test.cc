// Collective cost model: nccl-tests conventions, published bus bandwidths, hierarchical limits.
#include "hwmodels/collectives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/profile.h"
#include "hwmodels/topology.h"

namespace pw::hw {
namespace {

HardwareProfile profile(const std::string& name) {
  return load_profile(std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/" + name + ".yaml");
}

std::vector<int> first_gpus(int n) {
  std::vector<int> g(n);
  std::iota(g.begin(), g.end(), 0);
  return g;
}

double busbw_gbs(const HardwareProfile& p, int nodes, int n, CollectiveAlgo algo,
                 CollectiveKind kind = CollectiveKind::kAllReduce, double bytes = 1e9) {
  Topology t(topology_spec(p, nodes));
  GroupNetwork net = describe_group(t, p, first_gpus(n));
  return busbw(kind, n, Bytes{bytes}, collective_time(kind, algo, Bytes{bytes}, net)) / 1e9;
}

TEST(BusBandwidth, FactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(algbw(Bytes{1e9}, seconds_to_ps(0.01)), 1e11);
}

TEST(AllReduce, A100EightGpuBusBandwidthNearPublished) {
  // Reference: 8-GPU A100 all-reduce busbw ~230 GB/s at large messages.
  EXPECT_NEAR(busbw_gbs(profile("dgx-a100-80gb"), 1, 8, CollectiveAlgo::kAuto), 230, 23);
}

TEST(AllReduce, H100EightGpuRingAndNvlsNearPublished) {
  HardwareProfile h100 = profile("dgx-h100");
  // Reference: ~370 GB/s ring, ~480 GB/s NVLink SHARP.
  EXPECT_NEAR(busbw_gbs(h100, 1, 8, CollectiveAlgo::kRing), 370, 37);
  EXPECT_NEAR(busbw_gbs(h100, 1, 8, CollectiveAlgo::kNvls), 480, 48);
  EXPECT_NEAR(busbw_gbs(h100, 1, 8, CollectiveAlgo::kAuto), 480, 48);
  EXPECT_NEAR(busbw_gbs(profile("h200"), 1, 8, CollectiveAlgo::kAuto), 480, 48);
}

TEST(AllReduce, HierarchicalAcrossNodesIsLimitedByNics) {
  HardwareProfile a100 = profile("dgx-a100-80gb");
  Topology t(topology_spec(a100, 2));
  GroupNetwork net = describe_group(t, a100, first_gpus(16));
  EXPECT_EQ(net.nodes, 2);
  EXPECT_EQ(net.ranks_per_node, 8);
  const double nic_node = 8 * 25e9 * 0.9;  // 8 HDR NICs per node at 0.9
  EXPECT_NEAR(net.inter_bw.value, nic_node, 1.0);
  Bytes s{1e9};
  auto steps = collective_steps(CollectiveKind::kAllReduce, CollectiveAlgo::kHierarchical, s, net);
  ASSERT_EQ(steps.size(), 3u);  // intra reduce-scatter, inter all-reduce, intra all-gather
  EXPECT_EQ(steps[1].links, StepLinks::kInterNode);
  EXPECT_GT(steps[1].time(), steps[0].time());
  EXPECT_GT(steps[1].time(), steps[2].time());
  double bus = busbw(CollectiveKind::kAllReduce, 16, s, steps_time(steps));
  EXPECT_LT(bus, nic_node);
  // Flat ring across 2 nodes: NCCL's busbw approaches the node's NIC bandwidth.
  EXPECT_NEAR(busbw_gbs(a100, 2, 16, CollectiveAlgo::kRing), nic_node / 1e9, 0.1 * nic_node / 1e9);
  // Four nodes of a PCIe cluster with one 100 GbE NIC each: bounded by 12.5 GB/s x 0.85.
  EXPECT_LT(busbw_gbs(profile("commodity-pcie-100gbe"), 4, 32, CollectiveAlgo::kAuto), 10.7);
}

TEST(CollectiveSteps, RingAllReduceIsReduceScatterThenAllGather) {
  HardwareProfile a100 = profile("dgx-a100-80gb");
  Topology t(topology_spec(a100, 1));
  GroupNetwork net = describe_group(t, a100, first_gpus(8));
  Bytes s{8e6};
  auto steps = collective_steps(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, s, net);
  ASSERT_EQ(steps.size(), 2u);
  for (const CollectiveStep& st : steps) {
    EXPECT_EQ(st.repeat, 7);
    EXPECT_DOUBLE_EQ(st.bytes_per_rank.value, 1e6);
    EXPECT_EQ(st.pattern, StepPattern::kRing);
    EXPECT_EQ(st.links, StepLinks::kIntraNode);
  }
  EXPECT_EQ(steps_time(steps),
            collective_time(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, s, net));
  // Alpha-beta: 14 steps x (hop latency + 1 MB / 240 GB/s).
  double per = ps_to_seconds(net.intra_latency + net.step_latency) + 1e6 / (300e9 * 0.8);
  EXPECT_NEAR(ps_to_seconds(steps_time(steps)), 14 * per, 1e-9);
}

TEST(CollectiveSteps, SmallMessagesPreferTreeLatency) {
  HardwareProfile a100 = profile("dgx-a100-80gb");
  Topology t(topology_spec(a100, 4));
  GroupNetwork net = describe_group(t, a100, first_gpus(32));
  EXPECT_EQ(choose_algorithm(CollectiveKind::kAllReduce, Bytes{1024}, net), CollectiveAlgo::kTree);
  EXPECT_TRUE(
      collective_steps(CollectiveKind::kAllReduce, CollectiveAlgo::kRing, Bytes{0}, net).empty());
}

TEST(CollectiveSteps, AllToAllSplitsIntraAndInterNodeRounds) {
  HardwareProfile h100 = profile("dgx-h100");
  Topology t(topology_spec(h100, 2));
  GroupNetwork net = describe_group(t, h100, first_gpus(16));
  auto steps = collective_steps(CollectiveKind::kAllToAll, CollectiveAlgo::kAuto, Bytes{16e6}, net);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].repeat, 7);
  EXPECT_EQ(steps[1].repeat, 8);
  EXPECT_TRUE(steps[1].overlaps_previous);
}

TEST(SendRecv, AcrossNodesUsesOneNic) {
  HardwareProfile a100 = profile("dgx-a100-80gb");
  Topology t(topology_spec(a100, 2));
  GroupNetwork net = describe_group(t, a100, {0, 8});
  TimePs tt = collective_time(CollectiveKind::kSendRecv, CollectiveAlgo::kAuto, Bytes{1e8}, net);
  EXPECT_NEAR(algbw(Bytes{1e8}, tt) / 1e9, 22.5, 0.5);
}

TEST(Protocols, FastestProtocolPerSizeAndTheLineAgrees) {
  // DGX H100 NVLS all-reduce over 8 GPUs is one switch step of 2 latency hops moving S at
  // intra bw x nvls_efficiency: t = 2 (link + step + protocol latency) + S / (bw x eff x eta).
  // With LL (+0, eta 0.25) and Simple (+10 us, eta 1) the small message takes LL, the large one
  // Simple, each at that formula, and the line the screen uses gives the same times.
  HardwareProfile p = profile("dgx-h100");
  p.collective_protocols = {{"LL", 0, 0.25}, {"Simple", seconds_to_ps(10e-6), 1.0}};
  Topology t(topology_spec(p, 1));
  const GroupNetwork net = describe_group(t, p, first_gpus(8));
  ASSERT_EQ(net.num_protocols, 2);
  const double bw = net.intra_bw.value * net.nvls_efficiency;
  const double hop = ps_to_seconds(net.intra_latency + net.step_latency);
  auto formula = [&](double s, double lat, double eta) { return 2 * (hop + lat) + s / (bw * eta); };
  const CollectiveLine line = collective_line(CollectiveKind::kAllReduce, net);
  for (double s : {1e3, 1e9}) {
    int proto = -1;
    const CollectiveAlgo a = choose_algorithm(CollectiveKind::kAllReduce, Bytes{s}, net, &proto);
    EXPECT_EQ(a, CollectiveAlgo::kNvls);
    EXPECT_EQ(proto, s < 1e6 ? 0 : 1) << s;
    const double want = s < 1e6 ? formula(s, 0, 0.25) : formula(s, 10e-6, 1.0);
    const double got = ps_to_seconds(
        collective_time(CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, Bytes{s}, net));
    EXPECT_NEAR(got, want, 1e-11) << s;
    EXPECT_NEAR(line.seconds(s), got, 1e-11) << s;
  }
  // Without protocols every time is what it was: one neutral protocol.
  const HardwareProfile plain = profile("dgx-h100");
  const GroupNetwork n0 = describe_group(t, plain, first_gpus(8));
  EXPECT_EQ(n0.num_protocols, 1);
  EXPECT_NEAR(ps_to_seconds(collective_time(CollectiveKind::kAllReduce, CollectiveAlgo::kNvls,
                                            Bytes{1e9}, n0)),
              formula(1e9, 0, 1.0), 1e-11);
}

TEST(Routes, TimeOnEachRouteOfTheFirstRankFollowsItsSteps) {
  // The time the group's first rank keeps each of its routes busy (the screens' bound on
  // ZeRO-2/3 traffic), by hand from the steps. Two DGX A100 nodes, 1 GB:
  // - one rank per node (GPUs 0 and 8): a flat ring, every step leaves the node on the one
  //   route: reduce-scatter (n - 1) x S/n at the NIC bandwidth, both routes;
  // - four ranks per node (GPUs 0-3 and 8-11), hierarchical at this size: the intra-node ring
  //   (k - 1) x S/k at the intra-node bandwidth to the next rank, the inter-node ring
  //   (nodes - 1) x S/k/nodes at the node's NIC bandwidth / k to the peer on the next node.
  const HardwareProfile a100 = profile("dgx-a100-80gb");
  Topology t(topology_spec(a100, 2));
  const double s = 1e9;
  const GroupNetwork one = describe_group(t, a100, {0, 8});
  ASSERT_EQ(one.ranks_per_node, 1);
  ASSERT_EQ(one.num_protocols, 1);  // no protocol efficiency in the formulas below
  const CollectiveLine l1 = collective_line(CollectiveKind::kReduceScatter, one);
  const double flat = 1.0 * (s / 2) / one.inter_bw.value;  // the node's NIC: one rank, one NIC
  EXPECT_NEAR(l1.route_seconds(s)[0], flat, 1e-12);
  EXPECT_NEAR(l1.route_seconds(s)[1], flat, 1e-12);
  const GroupNetwork four = describe_group(t, a100, {0, 1, 2, 3, 8, 9, 10, 11});
  ASSERT_EQ(four.ranks_per_node, 4);
  ASSERT_EQ(choose_algorithm(CollectiveKind::kAllGather, Bytes{s}, four),
            CollectiveAlgo::kHierarchical);
  const CollectiveLine l4 = collective_line(CollectiveKind::kAllGather, four);
  EXPECT_NEAR(l4.route_seconds(s)[0], 3 * (s / 4) / four.intra_bw.value, 1e-12);
  EXPECT_NEAR(l4.route_seconds(s)[1], 1 * (s / 4 / 2) / (four.inter_bw.value / 4), 1e-12);
  // Never above the collective's own time, and nothing for a one-rank group or no bytes.
  EXPECT_LE(l4.route_seconds(s)[0] + l4.route_seconds(s)[1], l4.seconds(s));
  EXPECT_EQ(l4.route_seconds(0)[1], 0);
  EXPECT_EQ(CollectiveLine{}.route_seconds(s)[0], 0);
}

TEST(SizeCorrection, InterpolatesTheLogOfTheFactorInLogSize) {
  // Between 1 kB (factor 1) and 100 kB (factor 4), the log of the factor is linear in log size:
  // at 10 kB, half-way in log size, the factor is sqrt(1 x 4) = 2; at 1 kB x 100^0.25 it is
  // 4^0.25. Outside the table the end factors hold; an empty table is 1.
  SizeCorrection c;
  c.bytes = {1e3, 1e5};
  c.factor = {1.0, 4.0};
  EXPECT_NEAR(c.at(1e4), 2.0, 1e-12);
  EXPECT_NEAR(c.at(1e3 * std::pow(100.0, 0.25)), std::pow(4.0, 0.25), 1e-12);
  EXPECT_EQ(c.at(1.0), 1.0);
  EXPECT_EQ(c.at(1e9), 4.0);
  EXPECT_EQ(c.at(1e5), 4.0);
  EXPECT_EQ(SizeCorrection{}.at(123.0), 1.0);
}

TEST(SizeCorrection, ScalesEveryTierOfTheCollectiveModelInItsScopeOnly) {
  // A profile whose single-node all-reduce was measured at 1.5x the model at every size: the
  // steps' time, the screens' line and its route times are 1.5x the uncorrected ones (to the
  // picosecond rounding of each step); the all-gather, and an all-reduce across two nodes, are
  // unchanged (other kind, other scope).
  const HardwareProfile plain = profile("dgx-h100");
  HardwareProfile p = plain;
  CollectiveSizeCorrection c;
  c.kind = CollectiveKind::kAllReduce;
  c.multi_node = false;
  c.table.bytes = {8};
  c.table.factor = {1.5};
  p.collective_size_corrections = {c};
  const Topology t1(topology_spec(p, 1)), t2(topology_spec(p, 2));
  const GroupNetwork a = describe_group(t1, plain, first_gpus(8));
  const GroupNetwork b = describe_group(t1, p, first_gpus(8));
  for (double s : {1e3, 1e6, 1e9}) {
    const double ta = ps_to_seconds(
        collective_time(CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, Bytes{s}, a));
    const double tb = ps_to_seconds(
        collective_time(CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, Bytes{s}, b));
    EXPECT_NEAR(tb, 1.5 * ta, 4e-12) << s;
    const CollectiveLine la = collective_line(CollectiveKind::kAllReduce, a);
    const CollectiveLine lb = collective_line(CollectiveKind::kAllReduce, b);
    EXPECT_NEAR(lb.seconds(s), 1.5 * la.seconds(s), 1e-12 * (1 + s * 1e-9)) << s;
    EXPECT_NEAR(lb.route_seconds(s)[0], 1.5 * la.route_seconds(s)[0], 1e-15 + 1e-12 * s * 1e-9);
    EXPECT_EQ(collective_time(CollectiveKind::kAllGather, CollectiveAlgo::kAuto, Bytes{s}, b),
              collective_time(CollectiveKind::kAllGather, CollectiveAlgo::kAuto, Bytes{s}, a));
    const std::vector<int> two{0, 1, 2, 3, 8, 9, 10, 11};
    EXPECT_EQ(collective_time(CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, Bytes{s},
                              describe_group(t2, p, two)),
              collective_time(CollectiveKind::kAllReduce, CollectiveAlgo::kAuto, Bytes{s},
                              describe_group(t2, plain, two)));
  }
  EXPECT_EQ(size_correction(p, CollectiveKind::kAllReduce, false, 1e6), 1.5);
  EXPECT_EQ(size_correction(p, CollectiveKind::kAllReduce, true, 1e6), 1.0);
  EXPECT_EQ(size_correction(p, CollectiveKind::kSendRecv, false, 1e6), 1.0);
}

TEST(SizeCorrection, ProfileYamlIsReadAndBadEntriesNameTheirKey) {
  const std::string head =
      read_file(std::string(PW_SOURCE_DIR) + "/hwmodels/profiles/dgx-h100.yaml");
  // The shipped profile ends with its collectives section: the entries go under it.
  ASSERT_NE(head.find("\ncollectives:"), std::string::npos);
  auto with = [&](const std::string& corr) {
    return head + (head.back() == '\n' ? "" : "\n") + "  size_corrections:\n" + corr;
  };
  const HardwareProfile p = parse_profile(with("    - {collective: alltoall, scope: multi_node, "
                                               "points: [[1024, 2], [1048576, 1.25]]}\n"),
                                          "p.yaml");
  ASSERT_EQ(p.collective_size_corrections.size(), 1u);
  EXPECT_EQ(p.collective_size_corrections[0].kind, CollectiveKind::kAllToAll);
  EXPECT_TRUE(p.collective_size_corrections[0].multi_node);
  EXPECT_EQ(p.collective_size_corrections[0].table.at(1024), 2.0);
  const std::pair<std::string, std::string> bad[] = {
      {"    - {collective: broadcast, scope: multi_node, points: [[1, 1]]}\n", "collective"},
      {"    - {collective: all_reduce, scope: rack, points: [[1, 1]]}\n", "scope"},
      {"    - {collective: all_reduce, scope: single_node, points: [[8, 1], [8, 2]]}\n",
       "points[1]"},
      {"    - {collective: all_reduce, scope: single_node, points: [[8, 0]]}\n", "points[0]"},
      {"    - {collective: all_reduce, scope: single_node, points: [[8, 1, 3]]}\n", "points[0]"},
      {"    - {collective: all_reduce, scope: single_node, points: []}\n", "points"},
      {"    - {collective: all_reduce, scope: single_node, points: [[8, 1]]}\n"
       "    - {collective: all_reduce, scope: single_node, points: [[8, 2]]}\n",
       "size_corrections[1]"},
      {"    - {collective: all_reduce, scope: single_node, points: [[8, 1]], factor: 2}\n",
       "factor"},
  };
  for (const auto& [yaml, key] : bad) {
    try {
      parse_profile(with(yaml), "p.yaml");
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("p.yaml"), std::string::npos) << msg;
      EXPECT_NE(msg.find(key), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace pw::hw
