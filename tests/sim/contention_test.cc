// Network contention in the discrete-event engine, on the topology graph of hwmodels.
#include <gtest/gtest.h>

#include <vector>

#include "hwmodels/profile.h"
#include "hwmodels/topology.h"
#include "sim/engine.h"
#include "sim/task_graph.h"

namespace pw::des {
namespace {

hw::HardwareProfile a100() { return hw::resolve_profile("dgx-a100-80gb", ".", "test", "profile"); }

hw::Topology topology(int nodes, int nics_per_node) {
  hw::TopologySpec spec = hw::topology_spec(a100(), nodes);
  spec.node.nics_per_node = nics_per_node;
  return hw::Topology(spec);
}

// A ring all-reduce of `bytes` over `gpus`: every member sends 2(n-1)/n of the buffer to its
// successor (the ring's 2(n-1) steps of bytes/n over the same links, merged into one phase).
void add_ring_all_reduce(const hw::Topology& topo, const std::vector<int>& gpus, double bytes,
                         int first_device, TaskGraph* g) {
  const int n = static_cast<int>(gpus.size());
  const std::int32_t c = g->add_collective(true);
  g->add_phase(0);
  for (int i = 0; i < n; ++i) {
    std::vector<RouteHop> hops;
    for (hw::LinkId l : topo.route(gpus[i], gpus[(i + 1) % n]))
      hops.push_back({static_cast<std::int32_t>(l), 1.0f});
    g->add_flow(bytes * 2.0 * (n - 1) / n, hops);
  }
  for (int i = 0; i < n; ++i) {
    Task t;
    t.device = first_device + i;
    t.stream = StreamKind::kDp;
    t.is_compute = false;
    t.collective = c;
    g->add_task(t);
  }
}

TimePs run_all_reduces(const hw::Topology& topo, const std::vector<std::vector<int>>& groups,
                       double bytes) {
  int devices = 0;
  for (const auto& gr : groups) devices += static_cast<int>(gr.size());
  TaskGraph g(devices);
  int next = 0;
  for (const auto& gr : groups) {
    add_ring_all_reduce(topo, gr, bytes, next, &g);
    next += static_cast<int>(gr.size());
  }
  g.finalize();
  Engine e(topo.link_capacities());
  return e.run(g).end[0];
}

TEST(Contention, TwoDataParallelAllReducesSharingOneNicTakeTwiceAsLong) {
  // 4 NICs for 8 GPUs: GPUs 0 and 1 of each node send through the same NIC.
  const hw::Topology topo = topology(2, 4);
  ASSERT_EQ(topo.rail_of_gpu(0), topo.rail_of_gpu(1));
  const double S = 1e9;
  const TimePs one = run_all_reduces(topo, {{0, 8}}, S);
  const TimePs two = run_all_reduces(topo, {{0, 8}, {1, 9}}, S);
  EXPECT_NEAR(static_cast<double>(two) / static_cast<double>(one), 2.0, 0.02);
  // With one NIC per GPU the two reductions do not share a link: no slowdown.
  const hw::Topology own = topology(2, 8);
  const TimePs apart = run_all_reduces(own, {{0, 8}, {1, 9}}, S);
  EXPECT_NEAR(static_cast<double>(apart) / static_cast<double>(run_all_reduces(own, {{0, 8}}, S)),
              1.0, 0.01);
}

TEST(Contention, RingAllReduceAcrossNodesIsBoundedByTheNicNotNvlink) {
  const hw::HardwareProfile prof = a100();
  const hw::Topology topo = topology(2, 8);
  const double S = 1e9;
  const double nic = prof.node.nic.effective().value;        // 200 Gb/s x 0.9 = 22.5 GB/s
  const double nvl = prof.node.intra.effective().value;      // 300 GB/s x 0.8 = 240 GB/s
  const TimePs across = run_all_reduces(topo, {{0, 8}}, S);  // one GPU on each node
  const TimePs inside = run_all_reduces(topo, {{0, 1}}, S);  // two GPUs of one node
  // n = 2: each member moves 2(n-1)/n S = S bytes; across nodes at the NIC's rate.
  EXPECT_NEAR(ps_to_seconds(across), S / nic, 0.01 * S / nic);
  EXPECT_NEAR(ps_to_seconds(inside), S / nvl, 0.01 * S / nvl);
  EXPECT_GT(across, 5 * inside);
}

// Two one-flow collectives on two devices' DP streams, both ready at time 0: flow A of `a`
// bytes over `ra` (task 0), flow B of `b` bytes over `rb` (task 1).
TaskGraph two_flows(double a, const std::vector<RouteHop>& ra, double b,
                    const std::vector<RouteHop>& rb) {
  TaskGraph g(2);
  const std::int32_t ca = g.add_collective(false);
  g.add_phase(0);
  g.add_flow(a, ra);
  const std::int32_t cb = g.add_collective(false);
  g.add_phase(0);
  g.add_flow(b, rb);
  Task t;
  t.is_compute = false;
  t.stream = StreamKind::kDp;
  t.collective = ca;
  g.add_task(t);
  t.device = 1;
  t.collective = cb;
  g.add_task(t);
  g.finalize();
  return g;
}

TEST(Contention, MaxMinSharingGivesTheUnconstrainedFlowTheLeftover) {
  // Link 0 (10 B/ps) carries flows A and B; link 1 (4 B/ps) carries B only. Max-min: B is held
  // to 4 by link 1, A takes the remaining 6 on link 0. A: 600 bytes -> 100 ps; B: 400 -> 100 ps.
  const TaskGraph g =
      two_flows(600, {RouteHop{0, 1.0f}}, 400, {RouteHop{0, 1.0f}, RouteHop{1, 1.0f}});
  Engine e({10e12, 4e12});
  const EngineResult& r = e.run(g);
  EXPECT_EQ(r.end[0], 100);
  EXPECT_EQ(r.end[1], 100);
}

TEST(Contention, ALinkIsSaturatedWhileTheFlowsCrossingItUseItsWholeCapacity) {
  // Link 0 (10 B/ps) carries A and B, link 1 (4 B/ps) B only, link 2 (100 B/ps) A only.
  // By hand: B is held to 4 by link 1 and ends at 400 / 4 = 100 ps; A runs at 6 until then
  // (600 of its 1200 bytes) and alone at 10 for the remaining 600: 60 ps more, ends at 160.
  // Link 0 is full throughout (6 + 4, then 10): 160 ps; link 1 while B runs: 100 ps; link 2
  // never (A is limited by link 0). Bytes: link 0 1200 + 400, link 1 400, link 2 1200.
  const TaskGraph g = two_flows(1200, {RouteHop{0, 1.0f}, RouteHop{2, 1.0f}}, 400,
                                {RouteHop{0, 1.0f}, RouteHop{1, 1.0f}});
  Engine e({10e12, 4e12, 100e12});
  const EngineResult& r = e.run(g);
  EXPECT_EQ(r.end[0], 160);
  EXPECT_EQ(r.end[1], 100);
  const FlowNetwork& net = e.network();
  EXPECT_EQ(net.link_saturated(0, 160), 160);
  EXPECT_EQ(net.link_saturated(1, 160), 100);
  EXPECT_EQ(net.link_saturated(2, 160), 0);
  EXPECT_DOUBLE_EQ(net.link_bytes()[0], 1600.0);
  EXPECT_DOUBLE_EQ(net.link_bytes()[1], 400.0);
  EXPECT_DOUBLE_EQ(net.link_bytes()[2], 1200.0);
}

TEST(Contention, AFlowAloneOnItsLinksStartsAndEndsWithoutAReshare) {
  // A flow alone on its links starts and ends without the component search and re-share.
  // A: 1000 B over link 0 (10 B/ps) and link 1 (100 B/ps), alone: held to 10 by link 0, ends at
  // 100 ps; link 0 saturated [0, 100), link 1 never. B: 300 B whose route crosses link 0 twice
  // (each byte of B takes 2 bytes of link 0's capacity), started at 200 ps: rate 10 / 2 = 5,
  // ends at 260; link 0 full again [200, 260). Asked at 400 ps: link 0 100 + 60 = 160 ps, link 1
  // 0. (An interval left open when A ends with nothing left on its links would read 400; a flow
  // counted once per occurrence on the link's list, as before, weighed 4 and ended at 320.)
  EventQueue q;
  FlowNetwork net;
  net.set_links({10e12, 100e12});
  const RouteHop a[] = {{0, 1.0f}, {1, 1.0f}};
  const RouteHop b[] = {{0, 1.0f}, {0, 1.0f}};
  net.start(q, 0, a, 2, 1000, 7);
  Event e = q.pop();
  EXPECT_EQ(e.time, 100);
  ASSERT_TRUE(net.finish(q, 0, e));
  EXPECT_EQ(net.owner(e.target), 7u);
  EXPECT_TRUE(q.empty());
  q.push(200, 1, 0);
  q.pop();  // the clock reaches 200 ps
  net.start(q, 0, b, 2, 300, 8);
  e = q.pop();
  EXPECT_EQ(e.time, 260);
  ASSERT_TRUE(net.finish(q, 0, e));
  EXPECT_EQ(net.link_saturated(0, 400), 160);
  EXPECT_EQ(net.link_saturated(1, 400), 0);
  EXPECT_DOUBLE_EQ(net.link_bytes()[0], 1000.0 + 600.0);
}

// Re-sharing once per instant (FlowNetwork::defer_reshares, as the engine runs it) gives the
// rates of re-sharing after every start and end. Link 0 carries 10 B/ps, link 1 30 B/ps; at
// t = 0 A (1000 B over link 0), B (1000 B over links 0 and 1) and C (2000 B over link 1) start.
// Max-min by hand: link 0 splits 10 between A and B (5 each), C takes link 1's remaining 25, so
// C ends at 2000 / 25 = 80 ps; then B is still held to 5 by link 0, and A and B end at
// 1000 / 5 = 200 ps. Deferred, B's and C's starts wait for one flush at t = 0 and C's end for
// one at 80 ps; immediately, every start and end re-shares at once.
TEST(Contention, ReSharingOncePerInstantGivesTheRatesOfReSharingEveryChange) {
  const RouteHop a[] = {{0, 1.0f}};
  const RouteHop b[] = {{0, 1.0f}, {1, 1.0f}};
  const RouteHop c[] = {{1, 1.0f}};
  for (const bool deferred : {false, true}) {
    EventQueue q;
    FlowNetwork net;
    net.set_links({10e12, 30e12});
    constexpr std::uint8_t kEnd = 0, kFlush = 1;
    if (deferred) net.defer_reshares(kFlush);
    net.start(q, kEnd, a, 1, 1000, 0);
    net.start(q, kEnd, b, 2, 1000, 1);
    net.start(q, kEnd, c, 1, 2000, 2);
    TimePs end[3] = {-1, -1, -1};
    int flushes = 0;
    while (!q.empty()) {
      const Event e = q.pop();
      if (e.type == kFlush) {
        net.flush(q, kEnd);
        ++flushes;
      } else if (net.finish(q, kEnd, e)) {
        end[net.owner(e.target)] = e.time;
      }
    }
    EXPECT_EQ(end[0], 200) << deferred;
    EXPECT_EQ(end[1], 200) << deferred;
    EXPECT_EQ(end[2], 80) << deferred;
    EXPECT_EQ(flushes, deferred ? 3 : 0);  // t = 0, C's end at 80, A's and B's at 200
  }
}

}  // namespace
}  // namespace pw::des
