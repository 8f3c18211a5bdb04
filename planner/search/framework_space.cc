#include "planner/search/framework_space.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "planner/search/constraint_flags.h"
#include "planner/search/frameworks.h"

namespace pw::detail {

namespace {

// `--framework`: only the schedules, ZeRO stages and offload the framework runs; the rest of its
// rules (layer splits, sequence parallelism, expert layouts) are checked per configuration by
// the screen (framework_problem).
void keep_framework_space(const SearchConstraints& c, const ModelShape& m, SearchSpace* s) {
  const std::string flag = fmt::format("--framework {}", framework_name(c.framework));
  if (std::string why = framework_model_problem(c.framework, m); !why.empty())
    throw ConfigError("", flag, why);
  // The settings every configuration shares (the scenario's): one the framework cannot run rules
  // out the whole space, so say which.
  if (c.framework == Framework::kTorchtitan && !s->grad_reduce_in_fp32)
    throw ConfigError("", flag,
                      "the scenario's parallel.grad_reduce_in_fp32 is false, but torchtitan "
                      "reduces gradients in float32 (training.mixed_precision_reduce); expected "
                      "grad_reduce_in_fp32: true in the scenario");
  // Megatron's overlap_param_gather: DeepSpeed re-gathers after the step, torchtitan's FSDP2
  // at each layer's forward with no switch (frameworks.cc).
  if (c.framework == Framework::kDeepspeed || c.framework == Framework::kTorchtitan) {
    if (std::find(s->param_gather.begin(), s->param_gather.end(), 0) == s->param_gather.end())
      throw ConfigError("", flags({on_off_flag("--overlap-param-gather", c.param_gather), flag}),
                        fmt::format("{} has no overlap_param_gather; expected "
                                    "--overlap-param-gather off (or the scenario's "
                                    "parallel.overlap_param_gather false)",
                                    framework_title(c.framework)));
    s->param_gather = {0};
  }
  // Megatron's overlap_p2p_comm: DeepSpeed has no interleaved schedule, torchtitan runs
  // PyTorch's pipelining runtime (frameworks.cc).
  if ((c.framework == Framework::kDeepspeed || c.framework == Framework::kTorchtitan) &&
      s->overlap_p2p_comm)
    throw ConfigError("", flag,
                      fmt::format("{} has no overlap_p2p_comm; expected --overlap-p2p-comm off "
                                  "(or the scenario's parallel.overlap_p2p_comm false)",
                                  framework_title(c.framework)));
  s->framework = c.framework;
  // Frameworks gather ZeRO-3 weights per layer (DeepSpeed ZeRO-3, FSDP, Megatron-FSDP); holding
  // a stage's through a sweep is the breadth-first pipelines' scheme.
  s->zero3_gather = {0};
  std::vector<ScheduleOption> kept;
  for (const ScheduleOption& o : s->schedules)
    if (framework_schedule_support(c.framework, o.name, o.pipelines, o.v_shape) !=
        ScheduleSupport::kNone)
      kept.push_back(o);
  if (kept.empty()) {
    std::string names;
    for (const ScheduleOption& o : s->schedules)
      if (names.find(o.name) == std::string::npos) names += (names.empty() ? "" : ", ") + o.name;
    throw ConfigError("",
                      flags({c.schedules.empty() ? "" : "--schedules " + join(c.schedules), flag}),
                      fmt::format("{} runs none of the schedules searched ({})",
                                  framework_title(c.framework), names));
  }
  s->schedules = kept;
  if (c.framework == Framework::kDeepspeed) {
    // Its config has no sequence or context parallelism, expert parallelism, FP8 or selective
    // recomputation (planner/search/frameworks.cc says why for each).
    auto only = [&](std::vector<int>* v, int value, const char* what) {
      if (std::find(v->begin(), v->end(), value) == v->end())
        throw ConfigError("", flag, fmt::format("DeepSpeed's config has no {}", what));
      *v = {value};
    };
    only(&s->sequence_parallel, 0, "sequence parallelism; expected --sequence-parallel off");
    only(&s->context_parallel, 1, "context parallelism; expected --cp 1");
    only(&s->expert_parallel, 1,
         "expert parallelism (DeepSpeed-MoE sets it in code); expected --ep 1");
    only(&s->fp8, 0, "FP8; expected --fp8 off");
    std::vector<Recompute> rc;
    for (Recompute r : s->recompute)
      if (r != Recompute::kSelective) rc.push_back(r);
    if (rc.empty())
      throw ConfigError("", flag,
                        "DeepSpeed recomputes whole layers; expected --recompute none or full");
    s->recompute = rc;
  }
  if (c.framework == Framework::kTorchtitan) {
    // FSDP2 runs as ZeRO-2/3 without a pipeline and as ZeRO-1 under one (frameworks.cc); each
    // configuration's pipeline decides, in the screen. No optimizer-only offload.
    if (s->offload == std::vector<int>{1})
      throw ConfigError("", flag,
                        "torchtitan offloads parameters, gradients and optimizer state together, "
                        "not the optimizer alone; expected --offload off");
    s->offload = {0};
    // Its float8 converter scales each tensor as it casts it: Transformer Engine's delayed
    // scaling (the scenario's fp8_recipe, Megatron's default) is not there (frameworks.cc).
    if (s->fp8_recipe == "delayed") {
      if (std::find(s->fp8.begin(), s->fp8.end(), 0) == s->fp8.end())
        throw ConfigError("", flags({"--fp8 on", flag}),
                          "torchtitan's float8 scales each tensor as it is cast (current "
                          "scaling), not from amax histories as the scenario's fp8_recipe "
                          "delayed (Megatron's default) does; expected --fp8 off, or "
                          "parallel.fp8_recipe: tensorwise in the scenario");
      s->fp8 = {0};
    }
  }
}

// torchtitan's FSDP2 is ZeRO-1 under a pipeline and ZeRO-2/3 without one (frameworks.cc): when
// the pipeline degrees and ZeRO stages left form no such pair, say so naming the flags instead of
// reporting an empty search.
void check_torchtitan_zero(const SearchConstraints& c, const std::set<int>& ps,
                           const SearchSpace& s) {
  if (c.framework != Framework::kTorchtitan || ps.empty()) return;
  for (int p : ps)
    for (int z : s.zero)
      if (p > 1 ? z <= 1 : z != 1) return;
  const bool pipelined = *ps.begin() > 1;
  throw ConfigError(
      "", flags({int_flag("--zero", c.zero), int_flag("--pp", c.pp), "--framework torchtitan"}),
      pipelined ? "under a pipeline torchtitan's FSDP2 runs as ZeRO-1 (PyTorch's runtime "
                  "reduces each stage's gradients once and keeps its weights gathered); expected "
                  "--zero 0 or 1, or --pp 1"
                : "without a pipeline torchtitan's FSDP2 reduce-scatters every microbatch's "
                  "gradients and has no ZeRO-1; expected --zero 0, 2 or 3, or --pp above 1");
}

}  // namespace

void keep_framework(const SearchConstraints& c, const ModelShape& m, const std::set<int>& ps,
                    SearchSpace* s) {
  keep_framework_space(c, m, s);
  check_torchtitan_zero(c, ps, *s);
}

}  // namespace pw::detail
