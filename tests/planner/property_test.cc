// Properties over every classic generator: legality for all p in 1..16 and m in 1..64 where the
// schedule is defined, lossless round trips (PyTorch CSV, YAML, JSON), and lowering preserving
// the evaluated times.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/lowering.h"
#include "core/pytorch_csv.h"
#include "core/schedule_io.h"
#include "core/validator.h"
#include "planner/schedules/generator.h"
#include "sim/evaluator.h"

namespace pw {
namespace {

struct Variant {
  std::string name;
  int v = 0;
  int g = 0;
};

// Megatron interleaving needs p <= g <= m and (m mod g == 0 or m mod g >= p); g defaults to p.
bool interleaved_defined(int p, int m, int g) {
  if (g == 0) g = p;
  return p <= g && g <= m && (m % g == 0 || m % g >= p);
}

std::vector<Variant> variants(int p) {
  std::vector<Variant> out = {{"gpipe"},
                              {"1f1b"},
                              {"zb-h1"},
                              {"zb-h2"},
                              {"breadth-first", 1},
                              {"breadth-first", 2},
                              {"breadth-first", 3},
                              {"interleaved", 2},
                              {"interleaved", 3}};
  // Group sizes above p exercise the relaxation.
  for (int g : {p + 1, p + 3, 2 * p}) out.push_back({"interleaved", 2, g});
  return out;
}

// The action with flat (device-major) id `id`.
Action a_action(const Schedule& s, std::size_t id) {
  for (const auto& dev : s.actions) {
    if (id < dev.size()) return dev[id];
    id -= dev.size();
  }
  return {};
}

Schedule make(const Variant& var, int p, int m) {
  GeneratorParams gp;
  gp.p = p;
  gp.m = m;
  gp.v = var.v;
  gp.group_size = var.g;
  return generate_schedule(default_registry(), var.name, gp);
}

TEST(ClassicProperty, EveryScheduleIsLegalWhereDefinedAndRejectedOtherwise) {
  int checked = 0;
  for (int p = 1; p <= 16; ++p) {
    for (int m = 1; m <= 64; ++m) {
      for (const Variant& var : variants(p)) {
        const bool defined = var.name != "interleaved" || interleaved_defined(p, m, var.g);
        if (!defined) {
          EXPECT_THROW(make(var, p, m), ConfigError) << var.name << " p=" << p << " m=" << m;
          continue;
        }
        Schedule s;
        ASSERT_NO_THROW(s = make(var, p, m))
            << var.name << " v=" << var.v << " g=" << var.g << " p=" << p << " m=" << m;
        ASSERT_EQ(check_schedule(s), "") << var.name << " p=" << p << " m=" << m;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 8000);  // 16*64*9 minus undefined interleavings
}

TEST(ClassicProperty, RoundTripsAreLossless) {
  for (int p = 1; p <= 6; ++p) {
    for (int m : {1, 2, 3, 5, 8, 12}) {
      for (const Variant& var : variants(p)) {
        if (var.name == "interleaved" && !interleaved_defined(p, m, var.g)) continue;
        const Schedule s = make(var, p, m);
        const std::string what = var.name + " p=" + std::to_string(p) + " m=" + std::to_string(m);
        for (DocFormat f : {DocFormat::kYaml, DocFormat::kJson})
          ASSERT_EQ(parse_schedule(schedule_to_text(s, f), f, "t"), s) << what;
        CsvImportOptions opt;
        opt.name = s.name;
        opt.num_layers = s.placement.num_layers;
        ASSERT_EQ(
            schedule_from_pytorch_csv(schedule_to_pytorch_csv(s, CsvForm::kComputeOnly), "t", opt),
            s)
            << what;
        // compute_comms adds one REDUCE_GRAD per stage (PyTorch's runtime scales the gradients
        // there); without them it reads back as the lowered schedule.
        Schedule comms =
            schedule_from_pytorch_csv(schedule_to_pytorch_csv(s, CsvForm::kComputeComms), "t", opt);
        std::size_t reduces = 0;
        for (auto& dev : comms.actions) {
          const auto end = std::remove_if(dev.begin(), dev.end(), [](const Action& a) {
            return a.kind == ActionKind::kReduceGrad;
          });
          reduces += static_cast<std::size_t>(dev.end() - end);
          dev.erase(end, dev.end());
        }
        EXPECT_EQ(reduces, static_cast<std::size_t>(s.placement.num_stages())) << what;
        ASSERT_EQ(comms, lower_communication(s)) << what;
      }
    }
  }
}

TEST(ClassicProperty, LoweringPreservesEvaluatedTimes) {
  // Hop cost on the send -> receive edge; sends and receives themselves take no time.
  const UniformCosts costs{3, 2, 1, 0, 1};
  for (int p : {1, 2, 3, 4, 7}) {
    for (int m : {1, 4, 9, 14}) {
      for (const Variant& var : variants(p)) {
        if (var.name == "interleaved" && !interleaved_defined(p, m, var.g)) continue;
        const Schedule s = make(var, p, m);
        const Schedule low = lower_communication(s);
        ASSERT_EQ(check_schedule(low), "");
        const EvalResult a = evaluate(s, make_uniform_cost_table(s.placement, costs));
        const EvalResult b = evaluate(low, make_uniform_cost_table(low.placement, costs));
        EXPECT_EQ(a.makespan, b.makespan) << var.name << " p=" << p << " m=" << m;
        EXPECT_EQ(a.cost, b.cost);
        // Compare every compute action's interval, matched by position among compute actions.
        std::size_t ia = 0, ib = 0;
        for (std::size_t d = 0; d < s.actions.size(); ++d) {
          for (const Action& act : low.actions[d]) {
            if (!is_compute(act.kind)) {
              ++ib;
              continue;
            }
            ASSERT_EQ(a_action(s, ia), act);
            EXPECT_EQ(a.start[ia], b.start[ib]) << var.name << " action " << ia;
            EXPECT_EQ(a.end[ia], b.end[ib]);
            ++ia;
            ++ib;
          }
        }
        EXPECT_EQ(ia, a.start.size());
      }
    }
  }
}

}  // namespace
}  // namespace pw
