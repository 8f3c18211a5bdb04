// Emitted plans validate, carry explicit communication and predicted times, and round-trip; their
// predicted times come from the discrete-event simulation that ranks configurations, so a plan
// re-simulates to its own prediction (the evaluator only where the simulator cannot run).
#include "planner/search/plan_emit.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>

#include "core/dependency.h"
#include "core/lowering.h"
#include "core/plan_io.h"
#include "core/validator.h"
#include "hwmodels/gpu_model.h"
#include "hwmodels/profile.h"
#include "hwmodels/transformer.h"
#include "planner/search/search.h"
#include "sim/plan_prediction.h"

namespace pw {
namespace {

TEST(PlanEmit, BestPlanValidatesAndLoadsBackIdentically) {
  PlanProblem pr;
  ASSERT_TRUE(model_preset("megatron-7.5b", &pr.model));
  pr.profile = hw::resolve_profile("dgx-a100-80gb", "", "", "");
  pr.num_gpus = 32;
  const GeneratorRegistry reg = default_registry();
  SearchSpace space = default_space(pr, reg, {128});
  const SearchResult r = run_search(pr, space, reg, SearchOptions{});
  ASSERT_FALSE(r.top.empty());
  // Force a pipelined configuration so the plan has communication to lower.
  SearchConfig c = r.top[0].config;
  for (const Evaluated& e : r.pareto)
    if (e.config.p > 1) c = e.config;
  const CostModel model(pr, space);
  const Plan plan =
      build_plan(model, reg, c, "dgx-a100-80gb", Provenance{"pipewright 0.1.0", "", "", "", ""});
  EXPECT_EQ(check_schedule(plan.schedule), "");
  EXPECT_EQ(plan.rank_to_gpu.size(), static_cast<std::size_t>(c.p));
  EXPECT_EQ(plan.predicted.size(), plan.schedule.total_actions());
  if (c.p > 1) {
    EXPECT_TRUE(has_explicit_communication(plan.schedule));
    EXPECT_EQ(plan.rank_to_gpu[1], c.t * c.d);  // Megatron order: tensor, then data, then pipe
  }
  for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson}) {
    const Plan back = parse_plan(plan_to_text(plan, f), f, "round trip");
    EXPECT_EQ(back, plan);
  }
  // The predicted iteration runs from the first compute start (after a ZeRO-3 weight gather, when
  // there is one) to the last end, so it covers every predicted action, the trailing OPT included
  // (a ZeRO-1/2 parameter all-gather after the optimizer may end later still).
  TimePs first = std::numeric_limits<TimePs>::max(), last = 0;
  for (const ActionTiming& t : plan.predicted) {
    first = std::min(first, t.start);
    last = std::max(last, t.end);
  }
  EXPECT_GE(plan.predicted_iteration, last - first);
  for (const auto& list : plan.schedule.actions) EXPECT_EQ(list.back().kind, ActionKind::kOptStep);
}

// --- predictions from the discrete-event simulator --------------------------------------------

/// Megatron 1.7B (24 layers, h = 2304, 24 heads) on one DGX A100 node of 8 GPUs, B = 16.
struct Small {
  PlanProblem pr;
  GeneratorRegistry reg = default_registry();
  SearchSpace space;
  Small() {
    EXPECT_TRUE(model_preset("megatron-1.7b", &pr.model));
    pr.profile = hw::resolve_profile("dgx-a100-80gb", "", "", "");
    pr.num_gpus = 8;
    space = default_space(pr, reg, {16});
  }
  SearchConfig config(int t, int p, int d, const std::string& schedule, int v = 1) const {
    ParallelConfig pc;
    pc.tensor_parallel = t;
    pc.pipeline_parallel = p;
    pc.data_parallel = d;
    pc.virtual_stages = v;
    pc.micro_batch_size = 1;
    pc.global_batch_size = 16;
    pc.schedule = schedule;
    SearchConfig c;
    std::string why;
    EXPECT_TRUE(config_from_parallel(space, pc, &c, &why)) << why;
    return c;
  }
};

const Provenance kProv{"pipewright 0.1.0", "dgx-a100-80gb", "", "pipewright plan test", ""};

/// Each action starts after every prerequisite (core/dependency.h; a RECV, the wait for its data,
/// ends after it) and, blocking sends being the
/// default, after its predecessor on the same device has ended; but in Megatron's two schedules
/// an explicit SEND is one half of a call the device posts with the next pass's receive (or
/// after the forward-backward pair), so the action after it may start first (sim/iteration.h).
void expect_consistent_with_dependencies(const Plan& plan) {
  const bool calls = plan.schedule.name == "1f1b" || plan.schedule.name == "interleaved";
  const DependencyGraph g = build_dependency_graph(plan.schedule);
  ASSERT_EQ(plan.predicted.size(), g.size());
  std::vector<TimePs> start(g.size()), end(g.size());
  for (const ActionTiming& t : plan.predicted) {
    const std::size_t id = static_cast<std::size_t>(g.device_begin[t.device] + t.index);
    start[id] = t.start;
    end[id] = t.end;
  }
  for (std::size_t id = 0; id < g.size(); ++id) {
    EXPECT_LE(start[id], end[id]) << describe_action(g.action[id]);
    // A RECV is the wait for its data: it may start before its SEND ends, never end before.
    const bool recv =
        g.action[id].kind == ActionKind::kRecvF || g.action[id].kind == ActionKind::kRecvB;
    for (int k = g.dep_begin[id]; k < g.dep_begin[id + 1]; ++k)
      EXPECT_GE(recv ? end[id] : start[id], end[g.dep[k]])
          << describe_action(g.action[id]) << (recv ? " ends" : " starts")
          << " before its prerequisite " << describe_action(g.action[g.dep[k]]) << " ends";
    const int d = g.device_of[id];
    const ActionKind prev = id > 0 ? g.action[id - 1].kind : ActionKind::kF;
    if (calls && (prev == ActionKind::kSendF || prev == ActionKind::kSendB)) continue;
    if (static_cast<int>(id) > g.device_begin[d]) {
      EXPECT_GE(start[id], end[id - 1]) << describe_action(g.action[id]) << " on device " << d;
    }
  }
}

TEST(PlanEmit, DesPredictionResimulatesExactlyAndRespectsDependencies) {
  const Small s;
  const CostModel model(s.pr, s.space);
  // Tensor, pipeline and data parallelism together; a split backward (W) and interleaving.
  const SearchConfig configs[] = {s.config(2, 4, 1, "1f1b"), s.config(1, 4, 2, "zb-h1"),
                                  s.config(2, 2, 2, "interleaved", 2),
                                  s.config(2, 4, 1, "dualpipev", 2)};
  for (const SearchConfig& c : configs) {
    const std::string what = describe_config(s.space, c);
    std::string source;
    const Plan plan = build_plan(model, s.reg, c, "dgx-a100-80gb", kProv, {}, &source);
    EXPECT_EQ(source, kPredictionDes) << what;
    EXPECT_EQ(plan.provenance.profile_source, "dgx-a100-80gb") << what;
    EXPECT_EQ(plan.provenance.prediction_source, "des") << what;
    EXPECT_EQ(check_schedule(plan.schedule), "") << what;
    ASSERT_TRUE(has_explicit_communication(plan.schedule)) << what;
    expect_consistent_with_dependencies(plan);

    // Re-simulated from the file, as `simulate --plan` does: the same iteration and the same
    // interval for every action, to the picosecond.
    const Plan back = parse_plan(plan_to_text(plan, DocFormat::kYaml), DocFormat::kYaml, "rt");
    EXPECT_EQ(back, plan) << what;
    std::vector<ActionTiming> times;
    const IterationResult r = simulate_iteration(
        plan_iteration_input(back.model, back.config, hw::resolve_profile(back.cluster, "", "", ""),
                             back.schedule),
        IterationOptions{}, &times);
    EXPECT_EQ(r.iteration, plan.predicted_iteration) << what;
    EXPECT_EQ(times, plan.predicted) << what;

    // The ranking's DES figure for the same configuration (its schedule before lowering): the
    // same, except where lowering serialises two sends of one action. After an OVERLAP_F_B the
    // lowered list has SEND_F, SEND_B, and the simulator's blocking send holds the next action
    // (the SEND_B marker) until the first transfer ends, where the unlowered action's two
    // transfers run together: DualPipeV's lowered plan is slightly slower (here 402.683 ms against
    // 402.633 ms, 0.012%; 0.004% on the GPT-3 default).
    const Evaluated ranked = evaluate_config_des(model, s.reg, c);
    ASSERT_EQ(ranked.tier, Tier::kDes);
    const bool two_sends = plan.config.schedule == "dualpipev";
    EXPECT_NEAR(ranked.iteration, ps_to_seconds(plan.predicted_iteration),
                (two_sends ? 1e-3 : 1e-9) * ranked.iteration)
        << what;
    EXPECT_LE(ranked.iteration, ps_to_seconds(plan.predicted_iteration) * (1 + 1e-12)) << what;

    // Deterministic: a second emission is byte-identical (the plan carries no date here).
    EXPECT_EQ(plan_to_text(build_plan(model, s.reg, c, "dgx-a100-80gb", kProv), DocFormat::kYaml),
              plan_to_text(plan, DocFormat::kYaml))
        << what;
  }
}

TEST(PlanEmit, PredictedPassTimesAreTheWorkloadModelsStageCosts) {
  // With free communication (no transfers, no compute slowdown) each pass lasts exactly its
  // stage's hwmodels cost: F = f, B = b, W = w (no recomputation), SEND/RECV take no time. This
  // pins which action each predicted interval belongs to.
  Small s;
  s.pr.sim.free_communication = true;
  const CostModel model(s.pr, s.space);
  const SearchConfig c = s.config(1, 4, 1, "zb-h1");
  const Plan plan = build_plan(model, s.reg, c, "dgx-a100-80gb", kProv);
  const hw::GpuModel gpu(s.pr.profile.gpu);
  const hw::WorkloadOptions wo = hw::workload_options(
      plan_iteration_input(plan.model, plan.config, s.pr.profile, plan.schedule).parallel, false);
  const Placement& pl = plan.schedule.placement;
  std::vector<hw::StageCosts> costs;
  for (const StageInfo& st : pl.stages)
    costs.push_back(hw::stage_costs(plan.model, gpu, wo, st.layer_begin, st.layer_end,
                                    st.index == 0, st.index == pl.stages_per_pipeline() - 1));
  int passes = 0, optimizer = 0;
  for (const ActionTiming& t : plan.predicted) {
    const Action& a = plan.schedule.actions[t.device][t.index];
    const TimePs dur = t.end - t.start;
    switch (a.kind) {
      case ActionKind::kF:
        EXPECT_EQ(dur, costs[a.stage].f) << describe_action(a);
        ++passes;
        break;
      case ActionKind::kB:
        EXPECT_EQ(dur, costs[a.stage].b) << describe_action(a);
        ++passes;
        break;
      case ActionKind::kW:
        EXPECT_EQ(dur, costs[a.stage].w) << describe_action(a);
        ++passes;
        break;
      case ActionKind::kOptStep: {
        // Adam on the device's parameters (one stage per device here, t = 1, d = 1, no ZeRO):
        // 28 bytes of HBM traffic per parameter (fp32 master, m, v and the gradient read; master,
        // m, v and the bf16 weight written) at hbm_bandwidth x hbm_efficiency, plus one kernel
        // latency (hwmodels/gpu_model.h memory_bound_time).
        const StageInfo& st = pl.stages[t.device];
        const double params = hw::stage_parameter_count(
            plan.model, hw::WorkloadOptions{}, st.layer_begin, st.layer_end, st.index == 0,
            st.index == pl.stages_per_pipeline() - 1, 4);
        const hw::GpuSpec& g = s.pr.profile.gpu;
        EXPECT_EQ(dur, seconds_to_ps(28 * params / (g.hbm_bandwidth.value * g.hbm_efficiency)) +
                           g.kernel_latency)
            << describe_action(a) << " on device " << t.device;
        ++optimizer;
        break;
      }
      case ActionKind::kRecvF:
      case ActionKind::kRecvB:
        EXPECT_GE(dur, 0) << describe_action(a);  // the wait for its data (plan_prediction.cc)
        break;
      default:
        EXPECT_EQ(dur, 0) << describe_action(a);
    }
  }
  EXPECT_EQ(passes, 3 * 4 * 16);  // F, B and W of 16 microbatches on 4 stages
  EXPECT_EQ(optimizer, 4);        // one OPT per device
}

/// The REDUCE_GRAD / OPT actions `plan --emit` appends: per device, the REDUCE_GRADs of the
/// stages it holds (d > 1 only) in the order their last backward runs, then one OPT, last.
void expect_end_of_iteration_actions(const Plan& plan, const std::string& what) {
  const Placement& pl = plan.schedule.placement;
  for (int d = 0; d < pl.num_devices; ++d) {
    const std::vector<Action>& list = plan.schedule.actions[d];
    ASSERT_FALSE(list.empty()) << what;
    EXPECT_EQ(list.back(), (Action{ActionKind::kOptStep, -1, -1})) << what << " device " << d;
    std::vector<int> want;  // the device's stages, by the position of their last W/BW
    for (const Action& a : list)
      if (a.kind == ActionKind::kW || a.kind == ActionKind::kBW) {
        std::erase(want, static_cast<int>(a.stage));
        want.push_back(a.stage);
      }
    if (plan.config.data_parallel == 1) want.clear();
    std::vector<int> got;
    for (const Action& a : list) {
      EXPECT_FALSE(a.kind == ActionKind::kOptStep && &a != &list.back()) << what;
      if (a.kind == ActionKind::kReduceGrad) got.push_back(a.stage);
    }
    EXPECT_EQ(got, want) << what << " device " << d;
    for (std::size_t k = 0; k < got.size(); ++k)  // right before the OPT
      EXPECT_EQ(list[list.size() - 1 - got.size() + k].kind, ActionKind::kReduceGrad) << what;
  }
}

TEST(PlanEmit, EndsEveryDeviceWithReduceGradAndOptimizerFromTheSimulatorsTasks) {
  const Small s;
  const CostModel model(s.pr, s.space);
  SearchConfig offload = s.config(1, 4, 2, "1f1b");
  offload.offload = 1;
  const SearchConfig configs[] = {s.config(2, 4, 1, "1f1b"), s.config(1, 4, 2, "zb-h1"),
                                  s.config(2, 2, 2, "interleaved", 2), offload};
  for (const SearchConfig& c : configs) {
    const std::string what = describe_config(s.space, c);
    std::string source;
    const Plan plan = build_plan(model, s.reg, c, "dgx-a100-80gb", kProv, {}, &source);
    ASSERT_EQ(source, kPredictionDes) << what;
    EXPECT_EQ(check_schedule(plan.schedule), "") << what;
    expect_end_of_iteration_actions(plan, what);
    expect_consistent_with_dependencies(plan);
    const Plan back = parse_plan(plan_to_text(plan, DocFormat::kYaml), DocFormat::kYaml, "rt");
    EXPECT_EQ(back, plan) << what;

    // The predicted REDUCE_GRAD / OPT intervals are those of the simulator's own reduction and
    // optimizer tasks: first to last slice of the kind on the pipeline rank's representative GPU
    // in the trace (zero-time markers leave no slice); with offload, the host update counts.
    IterationOptions opt;
    opt.trace = true;
    const IterationResult r = simulate_iteration(
        plan_iteration_input(plan.model, plan.config, s.pr.profile, plan.schedule), opt);
    EXPECT_EQ(r.iteration, plan.predicted_iteration) << what;
    for (const ActionTiming& t : plan.predicted) {
      const Action& a = plan.schedule.actions[t.device][t.index];
      if (a.kind != ActionKind::kOptStep && a.kind != ActionKind::kReduceGrad) continue;
      const std::string gpu = fmt::format("(pp {}, tp 0, dp 0)", t.device);
      TimePs lo = -1, hi = -1;
      for (const TraceSlice& sl : r.trace.slices) {
        if (r.trace.process_names[sl.pid].find(gpu) == std::string::npos) continue;
        const bool match = a.kind == ActionKind::kOptStep
                               ? sl.name == "OPT"
                               : sl.name.starts_with("REDUCE_GRAD") && sl.stage == a.stage;
        if (!match) continue;
        lo = lo < 0 ? sl.start : std::min(lo, sl.start);
        hi = std::max(hi, sl.start + sl.duration);
      }
      ASSERT_GE(lo, 0) << what << ": no simulated task for " << describe_action(a);
      EXPECT_EQ(t.start, lo) << what << " " << describe_action(a) << " device " << t.device;
      EXPECT_EQ(t.end, hi) << what << " " << describe_action(a) << " device " << t.device;
      EXPECT_GT(t.end, t.start) << what << " " << describe_action(a);
    }
  }
}

TEST(PlanEmit, AppendEndOfIterationKeepsExplicitOnesAndIsIdempotent) {
  GeneratorParams gp;
  gp.p = 2;
  gp.m = 2;
  Schedule s = generate_schedule(default_registry(), "1f1b", gp);
  Schedule once = s;
  append_end_of_iteration(&once, 1);
  for (const auto& list : once.actions) EXPECT_EQ(list.back().kind, ActionKind::kOptStep);
  EXPECT_EQ(once.total_actions(), s.total_actions() + 2);  // d = 1: no REDUCE_GRAD
  Schedule again = once;
  append_end_of_iteration(&again, 1);
  EXPECT_EQ(again.actions, once.actions);  // idempotent
  // An OPT already listed: the missing reductions go before it (one stage per device).
  Schedule twice = once;
  append_end_of_iteration(&twice, 2);
  EXPECT_EQ(twice.total_actions(), once.total_actions() + 2);
  for (const auto& list : twice.actions) {
    EXPECT_EQ(list.back().kind, ActionKind::kOptStep);
    EXPECT_EQ(list[list.size() - 2].kind, ActionKind::kReduceGrad);
  }
  append_end_of_iteration(&s, 2);
  EXPECT_EQ(s.actions, twice.actions);
  EXPECT_EQ(check_schedule(s), "");
}

TEST(PlanEmit, EvaluatorPredictionWhenAsked) {
  Small s;
  const SearchConfig c = s.config(1, 4, 2, "1f1b");
  {
    // Asked for the evaluator (a ranking made without the DES).
    const CostModel model(s.pr, s.space);
    EmitOptions opt;
    opt.des = false;
    std::string source;
    const Plan plan = build_plan(model, s.reg, c, "dgx-a100-80gb", kProv, opt, &source);
    EXPECT_EQ(source, kPredictionEvaluator);
    EXPECT_EQ(plan.provenance.prediction_source, "evaluator (the ranking was by the evaluator)");
    EXPECT_EQ(plan.predicted_iteration, seconds_to_ps(evaluate_config(model, s.reg, c).iteration));
    expect_consistent_with_dependencies(plan);
  }
}

}  // namespace
}  // namespace pw
