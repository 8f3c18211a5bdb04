#include "sim/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "planner/schedules/generator.h"
#include "sim/evaluator.h"
#include "sim/event_queue.h"
#include "sim/schedule_sim.h"

namespace pw::des {
namespace {

TEST(EventQueue, PopsInTimeThenSequenceOrderWithSameTimeFifo) {
  EventQueue q;
  q.push(5, 0, 1);
  q.push(3, 0, 2);
  q.push(5, 0, 3);
  q.push(0, 0, 4);  // at now(): FIFO
  EXPECT_EQ(q.pop().target, 4u);
  EXPECT_EQ(q.pop().target, 2u);
  q.push(3, 0, 5);  // same time as now: after everything already due at 3, before 5
  q.push(5, 0, 6);
  EXPECT_EQ(q.pop().target, 5u);
  EXPECT_EQ(q.pop().target, 1u);
  EXPECT_EQ(q.pop().target, 3u);
  EXPECT_EQ(q.pop().target, 6u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, ManyRandomEventsComeOutSorted) {
  EventQueue q;
  std::uint64_t x = 12345;
  for (int i = 0; i < 10000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    q.push(static_cast<TimePs>(x >> 40), 0, static_cast<std::uint32_t>(i));
  }
  Event prev = q.pop();
  while (!q.empty()) {
    Event e = q.pop();
    ASSERT_TRUE(prev.time < e.time || (prev.time == e.time && prev.seq < e.seq));
    prev = e;
  }
}

TEST(EventQueue, InterleavedPushesAndPopsFollowTimeThenPushOrder) {
  // The queue keeps one bucket per distinct pending time in a hashed table; times drawn from a
  // small set collide, repeat and are released while others are pending (the table grows past
  // 64 entries and deletes with backward shifts). Reference: a sorted list of (time, seq).
  EventQueue q;
  std::vector<std::pair<TimePs, std::uint32_t>> ref;  // pending, (time, push number)
  std::uint64_t x = 99;
  std::uint32_t pushed = 0;
  auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int round = 0; round < 20000; ++round) {
    const bool push = ref.empty() || next() % 3 != 0;
    if (push) {
      // 0..9 after now: equal times are frequent; 0 goes to the same-time FIFO.
      const TimePs t = q.now() + static_cast<TimePs>(next() % (round < 10000 ? 10 : 400));
      q.push(t, 0, pushed);
      ref.emplace_back(t, pushed++);
      continue;
    }
    const auto it = std::min_element(ref.begin(), ref.end());
    const Event e = q.pop();
    ASSERT_EQ(e.time, it->first) << "round " << round;
    ASSERT_EQ(e.target, it->second) << "round " << round;
    ref.erase(it);
    ASSERT_EQ(q.size(), ref.size());
  }
  while (!ref.empty()) {
    const auto it = std::min_element(ref.begin(), ref.end());
    ASSERT_EQ(q.pop().target, it->second);
    ref.erase(it);
  }
  EXPECT_TRUE(q.empty());
  q.clear();
  q.push(7, 0, 1);
  q.push(3, 0, 2);
  EXPECT_EQ(q.pop().target, 2u);
  EXPECT_EQ(q.pop().target, 1u);
}

// One truth, two engines: with communication free (and also with a fixed hop latency) the
// event-driven engine gives every action the start and end the evaluator computes.
void expect_same(const Schedule& s, const CostTable& c, const std::string& what) {
  const EvalResult ev = evaluate(s, c);
  const EngineResult de = simulate_schedule(s, c);
  ASSERT_TRUE(de.completed) << what;
  EXPECT_EQ(de.makespan, ev.makespan) << what;
  ASSERT_EQ(de.start.size(), ev.start.size()) << what;
  for (std::size_t i = 0; i < ev.start.size(); ++i) {
    ASSERT_EQ(de.start[i], ev.start[i]) << what << " action " << i;
    ASSERT_EQ(de.end[i], ev.end[i]) << what << " action " << i;
  }
  for (std::size_t d = 0; d < ev.device.size(); ++d) {
    EXPECT_DOUBLE_EQ(de.device[d].peak_total, ev.device[d].peak_memory) << what << " device " << d;
    EXPECT_EQ(de.device[d].busy, ev.device[d].busy) << what << " device " << d;
  }
}

TEST(ScheduleSim, ReproducesTheEvaluatorForEveryRegisteredGenerator) {
  const GeneratorRegistry reg = default_registry();
  ASSERT_FALSE(reg.all().empty());
  const UniformCosts cost_sets[] = {
      {1000, 1000, 1000, 0, 0},     // equal passes, free communication
      {1000, 1300, 700, 900, 0},    // unequal passes, free communication
      {1000, 1300, 700, 900, 250},  // with a fixed hop latency
  };
  int checked = 0;
  for (const GeneratorInfo& gen : reg.all()) {
    for (const auto& [p, m] :
         {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 12}, std::pair{8, 16}}) {
      GeneratorParams gp;
      gp.p = p;
      gp.m = m;
      Schedule s;
      try {
        s = generate_schedule(reg, gen.name, gp);
      } catch (const ConfigError&) {
        continue;  // the generator does not support this (p, m); others cover it
      }
      for (const UniformCosts& uc : cost_sets) {
        bool with_r = false;
        for (const auto& dev : s.actions)
          for (const Action& a : dev) with_r = with_r || a.kind == ActionKind::kR;
        const CostTable c = make_uniform_cost_table(s.placement, uc, with_r);
        expect_same(s, c, gen.name + " p=" + std::to_string(p) + " m=" + std::to_string(m));
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 3 * static_cast<int>(reg.all().size()));
}

TEST(Engine, ComputeSlowsWhileSmCommunicationOverlaps) {
  // One GPU: a compute task of 1000 ps; a DP collective on one 1 B/ps link carrying 400 bytes
  // starts with it. With slowdown 0.5 the first 400 ps run at half speed (200 ps of work), the
  // remaining 800 ps at full speed: the compute ends at 1200 ps.
  TaskGraph g(1);
  Task c;
  c.duration = 1000;
  g.add_task(c);
  Task m;
  m.is_compute = false;
  m.stream = StreamKind::kDp;
  m.collective = g.add_collective(true);
  g.add_phase(0);
  g.add_flow(400, {RouteHop{0, 1.0f}});
  g.add_task(m);
  g.finalize();
  Engine e({1e12});
  EngineOptions opt;
  opt.comm_compute_slowdown = 0.5;
  const EngineResult& r = e.run(g, opt);
  EXPECT_EQ(r.end[1], 400);
  EXPECT_EQ(r.end[0], 1200);
}

TEST(TaskGraph, EqualCollectivesShareTheirPhasesAndRunApart) {
  // Two links of 1 B/ps. Collectives A and B (device 0's DP stream, in order): latency 10 ps,
  // then 100 B over link 0: stored once. C (device 1): latency 10 ps, then 200 B over link 1:
  // stored apart. By hand: A 0 -> 10 + 100 = 110; B after A, 110 -> 220; C 0 -> 10 + 200 = 210.
  TaskGraph g(2);
  const std::int32_t link0 = g.add_route({RouteHop{0, 1.0f}});
  const std::int32_t link1 = g.add_route({RouteHop{1, 1.0f}});
  auto collective = [&](int device, double bytes, std::int32_t key) {
    Task t;
    t.device = device;
    t.is_compute = false;
    t.stream = StreamKind::kDp;
    t.collective = g.add_collective(false);
    g.add_phase(10);
    g.add_pending_flow(bytes, key);
    return g.add_task(t);
  };
  const std::int32_t a = collective(0, 100, 0), b = collective(0, 100, 0),
                     c = collective(1, 200, 1);
  g.resolve_pending_flows({link0, link1}, {link0 + 1, link1 + 1}, {1.0, 1.0});
  g.finalize();
  EXPECT_EQ(g.num_phases(), 2u);
  EXPECT_EQ(g.num_flows(), 2u);
  Engine e({1e12, 1e12});
  const EngineResult& r = e.run(g);
  EXPECT_EQ(r.end[a], 110);
  EXPECT_EQ(r.start[b], 110);
  EXPECT_EQ(r.end[b], 220);
  EXPECT_EQ(r.end[c], 210);
}

TEST(TaskGraph, RenumberingForLocalityKeepsEveryTime) {
  // Device 0 gets three compute tasks, then device 1 two, then a DP collective of both devices
  // (device 1's participant added first) over one 1 B/ps link, 100 B per participant's flow
  // after 10 ps. Renumbered round robin by position on the device: d0's 1st -> 0, d1's 1st -> 1,
  // d0's 2nd -> 2, d1's 2nd -> 3, d0's 3rd -> 4, d1's 3rd (its DP task) -> 5, d0's 4th -> 6.
  auto build = [](TaskGraph* g) {
    g->reset(2);
    std::vector<std::int32_t> id;
    for (int d = 0; d < 2; ++d)
      for (int k = 0; k < 3 - d; ++k) {
        Task c;
        c.device = d;
        c.duration = 100 * (k + 1) + d;
        id.push_back(g->add_task(c));
        if (k > 0) g->add_dep(id[id.size() - 2], id.back());
      }
    const std::int32_t coll = g->add_collective(true);
    g->add_phase(10);
    g->add_flow(100, {RouteHop{0, 1.0f}});
    g->add_flow(100, {RouteHop{0, 1.0f}});
    for (int d : {1, 0}) {
      Task m;
      m.device = d;
      m.is_compute = false;
      m.stream = StreamKind::kDp;
      m.collective = coll;
      id.push_back(g->add_task(m));
      g->add_dep(d == 0 ? id[2] : id[4], id.back());
    }
    Task last;  // device 0, after the collective: an equal-time successor of both DP tasks
    last.duration = 5;
    id.push_back(g->add_task(last));
    g->add_dep(id[5], id.back());
    g->add_dep(id[6], id.back());
  };
  TaskGraph plain, renumbered;
  build(&plain);
  build(&renumbered);
  plain.finalize();
  std::vector<std::int32_t> new_id;
  renumbered.finalize(&new_id);
  EXPECT_EQ(new_id, (std::vector<std::int32_t>{0, 2, 4, 1, 3, 5, 6, 7}));
  // Stream order is the insertion order, in new ids.
  const auto s0 = renumbered.stream_tasks(0, StreamKind::kCompute);
  EXPECT_EQ(std::vector<std::int32_t>(s0.begin(), s0.end()),
            (std::vector<std::int32_t>{0, 2, 4, 7}));
  EXPECT_EQ(renumbered.task(new_id[3]).device, 1);
  Engine e1({1e12}), e2({1e12});
  const EngineResult a = e1.run(plain);
  const EngineResult& b = e2.run(renumbered);
  ASSERT_EQ(a.start.size(), b.start.size());
  for (std::size_t t = 0; t < a.start.size(); ++t) {
    EXPECT_EQ(a.start[t], b.start[new_id[t]]) << t;
    EXPECT_EQ(a.end[t], b.end[new_id[t]]) << t;
  }
  EXPECT_EQ(a.events, b.events);
  // By hand: device 0 computes 100 + 200 + 300 = 600 ps, device 1 101 + 201 = 302 ps; the
  // collective starts at 600, both flows share the link (0.5 B/ps each): 600 + 10 + 200 = 810.
  EXPECT_EQ(a.end[5], 810);
  EXPECT_EQ(a.end[7], 815);
}

TEST(TaskGraph, KeepsTaskLabelsOnlyWhenAsked) {
  // Labels cost 8 bytes a task (a third of a task's own 24): an all-ranks run without a trace or
  // per-action timings stores none.
  const Action f0{ActionKind::kF, 0, 0}, b3{ActionKind::kB, 1, 3};
  TaskGraph plain(1);
  plain.add_task(Task{}, {}, f0);
  EXPECT_FALSE(plain.has_labels());
  TaskGraph kept(1);
  kept.keep_labels();
  kept.add_task(Task{}, {}, f0);
  kept.add_task(Task{}, {}, b3);
  ASSERT_TRUE(kept.has_labels());
  EXPECT_EQ(kept.label(0), f0);
  EXPECT_EQ(kept.label(1), b3);
  kept.reset(1);  // a fresh graph forgets the request
  EXPECT_FALSE(kept.has_labels());
}

}  // namespace
}  // namespace pw::des
