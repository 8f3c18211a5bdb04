#include "planner/search/frameworks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "core/pytorch_csv.h"
#include "hwmodels/memory.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"
#include "planner/search/frameworks_internal.h"

namespace pw {

namespace {

// Schedules each framework runs, by generator name. Megatron-LM's pipeline runtime has 1F1B
// (PipeDream-Flush) and the interleaved 1F1B of Narayanan et al.; 1F1B with full recomputation
// is its 1F1B with --recompute-granularity full. torchtitan runs PyTorch's pipelining classes by
// name (torch.distributed.pipelining: GPipe, 1F1B, Interleaved1F1B, LoopedBFS, and on a V
// placement ZBVZeroBubble and DualPipeV) and any single-pipeline order on a loop placement from
// a CSV (_PipelineScheduleRuntime, which maps stage s to rank s mod p: torchtitan passes it no
// other mapping, and only the two V classes lay stages out in a V, so a V-placement CSV would
// send to the wrong ranks).
struct NativeName {
  const char* generator;
  const char* framework;
};
constexpr NativeName kMegatronSchedules[] = {
    {"1f1b", "1F1B"}, {"interleaved", "interleaved 1F1B"}, {"1f1b-r", "1F1B, full recompute"}};
constexpr NativeName kTorchtitanSchedules[] = {
    {"gpipe", "GPipe"},
    {"1f1b", "1F1B"},
    {"interleaved", "Interleaved1F1B"},
    {"breadth-first", "LoopedBFS"},
    {"zb-v", "ZBVZeroBubble"},
    {"dualpipev", "DualPipeV"},
};

// NeMo runs Megatron-core's schedules; DeepSpeed's pipeline engine runs one 1F1B-style order
// (TrainSchedule).
constexpr NativeName kDeepspeedSchedules[] = {{"1f1b", "TrainSchedule (1F1B)"}};

}  // namespace

namespace detail {

const char* native_name(Framework fw, const std::string& schedule) {
  if (fw == Framework::kDeepspeed) {
    for (const NativeName& n : kDeepspeedSchedules)
      if (schedule == n.generator) return n.framework;
    return nullptr;
  }
  if (fw == Framework::kMegatron || fw == Framework::kNemo) {
    for (const NativeName& n : kMegatronSchedules)
      if (schedule == n.generator) return n.framework;
  } else if (fw == Framework::kTorchtitan) {
    for (const NativeName& n : kTorchtitanSchedules)
      if (schedule == n.generator) return n.framework;
  }
  return nullptr;
}

}  // namespace detail

namespace {

constexpr Flavor kTorchtitanFlavors[] = {
    {"llama3.2-1b", "llama3", "1B"},
    {"llama3.2-3b", "llama3", "3B"},
    {"llama3-8b", "llama3", "8B"},
    {"llama3-70b", "llama3", "70B"},
    {"llama3.1-405b", "llama3", "405B"},
    {"qwen3-0.6b", "qwen3", "0.6B"},
    {"qwen3-1.7b", "qwen3", "1.7B"},
    {"qwen3-4b", "qwen3", "4B"},
    {"qwen3-8b", "qwen3", "8B"},
    {"qwen3-14b", "qwen3", "14B"},
    {"qwen3-32b", "qwen3", "32B"},
    {"qwen3-30b-a3b", "qwen3", "30B-A3B"},
    {"qwen3-235b-a22b", "qwen3", "235B-A22B"},
};

// NeMo 2's recipes (nemo/collections/llm/recipes) for pipewright's presets: --factory NAME.
constexpr Flavor kNemoRecipes[] = {
    {"gpt3-175b", "gpt3_175b", ""},
    {"llama2-7b", "llama2_7b", ""},
    {"llama3.2-1b", "llama32_1b", ""},
    {"llama3.2-3b", "llama32_3b", ""},
    {"llama3-8b", "llama3_8b", ""},
    {"llama3-70b", "llama3_70b", ""},
    {"llama3.1-405b", "llama31_405b", ""},
    {"mixtral-8x7b", "mixtral_8x7b", ""},
    {"mixtral-8x22b", "mixtral_8x22b", ""},
    {"qwen2.5-7b", "qwen25_7b", ""},
    {"qwen2.5-14b", "qwen25_14b", ""},
    {"qwen2.5-32b", "qwen25_32b", ""},
    {"qwen2.5-72b", "qwen25_72b", ""},
    {"qwen3-0.6b", "qwen3_600m", ""},
    {"qwen3-1.7b", "qwen3_1p7b", ""},
    {"qwen3-4b", "qwen3_4b", ""},
    {"qwen3-8b", "qwen3_8b", ""},
    {"qwen3-14b", "qwen3_14b", ""},
    {"qwen3-32b", "qwen3_32b", ""},
    {"qwen3-30b-a3b", "qwen3_30b_a3b", ""},
    {"qwen3-235b-a22b", "qwen3_235b_a22b", ""},
    {"nemotron4-15b", "nemotron4_15b", ""},
    {"nemotron4-340b", "nemotron4_340b", ""},
};

// The entry of `table` whose preset has the model's shape (the sequence length and name aside).
template <std::size_t N>
const Flavor* flavor_in(const Flavor (&table)[N], const ModelShape& m) {
  for (const Flavor& f : table) {
    const hw::ModelPreset* p = hw::find_model_preset(f.preset);
    if (!p) continue;
    ModelShape a = p->shape, b = m;
    a.name = b.name = "";
    a.window_size = static_cast<int>(hw::attention_window(a));  // a window masking nothing is none
    b.window_size = static_cast<int>(hw::attention_window(b));
    a.seq_length = b.seq_length = 0;
    if (a == b) return &f;
  }
  return nullptr;
}

}  // namespace

namespace detail {
const Flavor* torchtitan_flavor(const ModelShape& m) { return flavor_in(kTorchtitanFlavors, m); }
const Flavor* nemo_recipe(const ModelShape& m) { return flavor_in(kNemoRecipes, m); }
}  // namespace detail

namespace {

std::string nemo_model_problem(const ModelShape& m) {
  if (nemo_recipe(m)) return {};
  std::string names;
  for (const Flavor& f : kNemoRecipes) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return fmt::format(
      "model: NeMo builds models from its recipes and none has this shape ('{}'); the recipes "
      "pipewright knows: {}",
      m.name, names);
}

std::string torchtitan_model_problem(const ModelShape& m) {
  if (torchtitan_flavor(m)) return {};
  std::string names;
  for (const Flavor& f : kTorchtitanFlavors)
    names += fmt::format("{}{} {} ({})", names.empty() ? "" : ", ", f.name, f.flavor, f.preset);
  return fmt::format(
      "model: torchtitan builds models from its own flavors and none has this shape ('{}'); "
      "the flavors pipewright knows: {}",
      m.name, names);
}

bool all_equal(const std::vector<int>& v, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin + 1; i < end; ++i)
    if (v[i] != v[begin]) return false;
  return true;
}

std::string join_layers(const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, "/")); }

}  // namespace

namespace detail {

// Megatron's even split, or an even split after --decoder-first/last-pipeline-num-layers
// (non-interleaved only). Sets *first / *last to 0 when not needed.
bool megatron_split(const std::vector<int>& layers, int p, int v, int* first, int* last) {
  *first = *last = 0;
  if (layers.empty() || all_equal(layers, 0, layers.size())) return true;
  if (v > 1 || static_cast<int>(layers.size()) != p) return false;
  if (p == 2) {  // a first-stage count; the rest is the last stage
    *first = layers[0];
    return true;
  }
  if (!all_equal(layers, 1, layers.size() - 1)) return false;
  if (layers.front() != layers[1]) *first = layers.front();
  if (layers.back() != layers[1]) *last = layers.back();
  return true;
}

}  // namespace detail

namespace {

std::string schedule_problem(Framework fw, const FrameworkQuery& q) {
  const ParallelConfig& pc = *q.config;
  if (pc.pipeline_parallel == 1) return {};
  if (framework_schedule_support(fw, pc.schedule, q.pipelines, q.v_shape) != ScheduleSupport::kNone)
    return {};
  const std::string nearest =
      framework_nearest_schedule(fw, pc.schedule, q.v_shape, pc.virtual_stages);
  if (fw == Framework::kTorchtitan && q.v_shape && q.pipelines == 1)
    return fmt::format(
        "schedule: torchtitan cannot run '{}': it runs a V placement only as its own "
        "ZBVZeroBubble or DualPipeV (a schedule CSV runs with stage s on rank s mod p); "
        "nearest it can: '{}'",
        pc.schedule, nearest);
  return fmt::format("schedule: {} cannot run '{}'; nearest it can: '{}'", framework_title(fw),
                     pc.schedule, nearest);
}

}  // namespace

bool parse_framework(const std::string& name, Framework* out) {
  if (name == "any") return *out = Framework::kAny, true;
  if (name == "megatron") return *out = Framework::kMegatron, true;
  if (name == "torchtitan") return *out = Framework::kTorchtitan, true;
  if (name == "nemo") return *out = Framework::kNemo, true;
  if (name == "deepspeed") return *out = Framework::kDeepspeed, true;
  return false;
}

std::string_view framework_name(Framework fw) {
  switch (fw) {
    case Framework::kMegatron:
      return "megatron";
    case Framework::kTorchtitan:
      return "torchtitan";
    case Framework::kNemo:
      return "nemo";
    case Framework::kDeepspeed:
      return "deepspeed";
    default:
      return "any";
  }
}

std::string_view framework_title(Framework fw) {
  switch (fw) {
    case Framework::kMegatron:
      return "Megatron-LM";
    case Framework::kTorchtitan:
      return "torchtitan";
    case Framework::kNemo:
      return "NeMo";
    case Framework::kDeepspeed:
      return "DeepSpeed";
    default:
      return "any framework";
  }
}

ScheduleSupport framework_schedule_support(Framework fw, const std::string& schedule, int pipelines,
                                           bool v_shape) {
  if (fw == Framework::kAny) return ScheduleSupport::kNative;
  if (native_name(fw, schedule)) return ScheduleSupport::kNative;
  // PyTorch's CSV holds one pipeline, and its runtime places stages in a loop: every other
  // loop-placement generator's order can be written in it.
  if (fw == Framework::kTorchtitan && pipelines == 1 && !v_shape) return ScheduleSupport::kCsv;
  return ScheduleSupport::kNone;
}

std::string framework_nearest_schedule(Framework fw, const std::string& schedule, bool v_shape,
                                       int chunks) {
  if (native_name(fw, schedule)) return schedule;
  // Several chunks per device (V shapes, BitPipe, breadth-first) are nearest to interleaving;
  // one chunk per device (GPipe, the ZB-H family, ZB-1p/2p) to 1F1B.
  if (fw == Framework::kDeepspeed) return "1f1b";
  // torchtitan runs one V order of its own: PyTorch's ZBVZeroBubble.
  if (fw == Framework::kTorchtitan && v_shape) return "zb-v";
  const bool chunked = v_shape || chunks > 1 || schedule == "bitpipe";
  return chunked ? "interleaved" : "1f1b";
}

std::string framework_model_problem(Framework fw, const ModelShape& m) {
  // Multi-token prediction is Megatron's (--mtp-num-layers); DeepSpeed's config has no model.
  if (m.mtp_num_layers > 0 && (fw == Framework::kTorchtitan || fw == Framework::kNemo))
    return fmt::format(
        "model.mtp_num_layers: {} builds no multi-token prediction depths from its {}; nearest: "
        "0",
        framework_title(fw), fw == Framework::kNemo ? "recipes" : "flavors");
  if (fw == Framework::kTorchtitan) return torchtitan_model_problem(m);
  if (fw == Framework::kNemo) return nemo_model_problem(m);
  return {};
}

std::string framework_problem(Framework fw, const FrameworkQuery& q) {
  if (fw == Framework::kAny) return {};
  const ParallelConfig& pc = *q.config;
  const ModelShape& m = *q.model;
  if (std::string s = schedule_problem(fw, q); !s.empty()) return s;
  if (std::string s = framework_model_problem(fw, m); !s.empty()) return s;
  if (pc.ddp_bucket_size > 0 && fw != Framework::kMegatron && fw != Framework::kNemo)
    return fmt::format(
        "config.ddp_bucket_size: {} does not cut gradients into Megatron's buckets (first stage "
        "only, --ddp-bucket-size); nearest: absent",
        framework_title(fw));
  if (pc.zero_stage == 3 && pc.zero3_gather == "stage")
    return fmt::format(
        "config.zero3_gather: {} gathers ZeRO-3 weights layer by layer in every pass, not once "
        "per stage sweep; nearest: zero3_gather layer",
        framework_title(fw));
  if (pc.zero_stage == 3 && pc.zero3_gather == "tensor" && fw != Framework::kDeepspeed)
    return fmt::format(
        "config.zero3_gather: {} gathers ZeRO-3 weights one layer (FSDP unit) per collective, "
        "not in DeepSpeed's prefetch buckets of tensors; nearest: zero3_gather layer",
        framework_title(fw));
  // torchtitan's context parallelism passes key/value shards (all-gather or all-to-all
  // rotation, context_parallel_rotate_method); it has no Ulysses head scattering.
  // torchtitan's float8 converter scales each tensor as it casts it (its tensorwise and rowwise
  // recipes); Transformer Engine's delayed scaling, with its amax all-reduces, is not there.
  if (fw == Framework::kTorchtitan && pc.fp8 != "off" && pc.fp8_recipe == "delayed")
    return "config.fp8_recipe: torchtitan's float8 scales each tensor as it is cast (current "
           "scaling), not from amax histories; nearest: fp8_recipe tensorwise";
  if (fw == Framework::kTorchtitan && pc.context_parallel > 1 && pc.cp_comm_type == "a2a")
    return "config.cp_comm_type: torchtitan's context parallelism rotates key/value shards, it "
           "does not scatter heads (Ulysses); nearest: cp_comm_type p2p";
  if (fw == Framework::kDeepspeed) {
    // DeepSpeed's own config: data parallelism with ZeRO (only 0/1 under its pipeline engine),
    // AutoTP tensor slicing without sequence parallelism, its 1F1B-style pipeline. Context
    // (Ulysses is another scheme), expert parallelism and FP8 are code, not config.
    if (pc.pipeline_parallel > 1 && pc.zero_stage > 1)
      return fmt::format(
          "config.zero_stage: DeepSpeed's pipeline engine runs ZeRO 0 or 1, got "
          "{}; nearest: zero_stage 1",
          pc.zero_stage);
    if (pc.tensor_parallel > 1 && pc.sequence_parallel)
      return "config.sequence_parallel: DeepSpeed's AutoTP has no sequence parallelism; nearest: "
             "sequence_parallel false";
    if (pc.overlap_param_gather)
      return "config.overlap_param_gather: DeepSpeed re-gathers the ZeRO weights after the "
             "optimizer step, not under the next step's forwards; nearest: overlap_param_gather "
             "false";
    if (pc.context_parallel > 1)
      return "config.context_parallel: DeepSpeed's config has no context parallelism (its "
             "Ulysses is model code, DistributedAttention); nearest: 1";
    if (pc.expert_parallel > 1)
      return "config.expert_parallel: DeepSpeed-MoE sets expert parallelism in the model code; "
             "nearest: 1";
    if (pc.fp8 != "off")
      return "config.fp8: DeepSpeed's config has no FP8 (Transformer Engine layers are code); "
             "nearest: off";
    if (pc.recompute == "selective")
      return "config.recompute: DeepSpeed recomputes whole layers "
             "(activation_checkpoint_interval); "
             "nearest: full";
    if (pc.pipeline_parallel > 1 && !all_equal(*q.stage_layers, 0, q.stage_layers->size()))
      return fmt::format(
          "schedule.placement: DeepSpeed's PipelineModule(partition_method="
          "'uniform') splits layers evenly; this plan's split is {}",
          join_layers(*q.stage_layers));
    return {};
  }
  if (fw == Framework::kMegatron || fw == Framework::kNemo) {
    // Megatron-LM's arguments.py asserts it ("to avoid having multiple p2p sends and recvs
    // between same 2 ranks per communication batch").
    if (fw == Framework::kMegatron && pc.virtual_stages > 1 && pc.pipeline_parallel == 2 &&
        !pc.overlap_p2p_comm)
      return "config.overlap_p2p_comm: Megatron-LM runs the interleaved schedule over p = 2 only "
             "with overlap_p2p_comm (without it p must exceed 2); nearest: overlap_p2p_comm true";
    // Megatron-LM lays any split out with --pipeline-model-parallel-layout; NeMo's recipes
    // take the even split or a first and last stage of their own size.
    int first = 0, last = 0;
    if (fw == Framework::kNemo && pc.pipeline_parallel > 1 &&
        !megatron_split(*q.stage_layers, pc.pipeline_parallel, pc.virtual_stages, &first, &last))
      return fmt::format(
          "schedule.placement: {} splits layers evenly over the stages (non-interleaved: evenly "
          "after a first and last stage of their own size); this plan's split is {}",
          framework_title(fw), join_layers(*q.stage_layers));
    return {};
  }
  // torchtitan
  if (!pc.grad_reduce_in_fp32)
    return "config.grad_reduce_in_fp32: torchtitan reduces gradients in float32 "
           "(training.mixed_precision_reduce has no other value); nearest: grad_reduce_in_fp32 "
           "true";
  if (pc.overlap_param_gather)
    return "config.overlap_param_gather: torchtitan has no such switch (FSDP2 gathers each "
           "layer's weights at its forward, prefetching the next); nearest: "
           "overlap_param_gather false";
  if (pc.overlap_p2p_comm)
    return "config.overlap_p2p_comm: torchtitan runs PyTorch's pipelining schedules, which have "
           "no such switch; nearest: overlap_p2p_comm false";
  // FSDP2 without a pipeline reduce-scatters every microbatch's gradients (ZeRO-2/3). Under
  // PyTorch's pipeline runtime every backward but the stage's last runs with
  // set_requires_gradient_sync(False) and set_reshard_after_backward(False): the gradients
  // accumulate unsharded (in the reduce dtype, float32) and are reduce-scattered once at the
  // stage's REDUCE_GRAD, and the weights a backward gathered stay gathered; torchtitan's default
  // under a pipeline also keeps them after each forward (fsdp_reshard_after_forward "never").
  // That is ZeRO-1: sharded optimizer state and master weights, full weights and gradients.
  if (pc.zero_stage == 1 && pc.pipeline_parallel == 1)
    return "config.zero_stage: without a pipeline torchtitan's FSDP2 reduce-scatters every "
           "microbatch's gradients and has no ZeRO-1; nearest: zero_stage 2 "
           "(fsdp_reshard_after_forward = \"never\")";
  // torchtitan always applies FSDP2, over its data-shard x context mesh: context-parallel ranks
  // never hold replicated weights and optimizer state.
  if (pc.zero_stage == 0 && pc.context_parallel > 1)
    return fmt::format(
        "config.zero_stage: torchtitan shards the weights and optimizer state over the context "
        "ranks with FSDP2 (its data-shard x context mesh), so ZeRO-0 with context parallelism "
        "does not run as priced; nearest: zero_stage {}",
        pc.pipeline_parallel > 1 ? 1 : 2);
  if (pc.zero_stage >= 2 && pc.pipeline_parallel > 1)
    return fmt::format(
        "config.zero_stage: under PyTorch's pipeline runtime torchtitan's FSDP2 keeps each "
        "stage's gradients unsharded until its last backward and reduce-scatters them once "
        "(REDUCE_GRAD), and keeps the weights a backward gathered, so ZeRO-{} runs with ZeRO-1's "
        "memory and traffic; nearest: zero_stage 1 (FSDP2 with fsdp_reshard_after_forward = "
        "\"never\", torchtitan's default under a pipeline)",
        pc.zero_stage);
  if (pc.tensor_parallel > 1 && !pc.sequence_parallel)
    return "config.sequence_parallel: torchtitan's tensor parallelism always shards norms over "
           "the sequence; nearest: sequence_parallel true";
  if (pc.optimizer_offload)
    return "config.optimizer_offload: torchtitan offloads parameters, gradients and optimizer "
           "state together (training.enable_cpu_offload), not the optimizer alone; nearest: "
           "optimizer_offload false";
  if (m.num_experts > 0 && pc.expert_parallel > 1 && pc.zero_stage == 0)
    return fmt::format(
        "config.zero_stage: torchtitan's expert parallelism borrows the FSDP ranks "
        "(data_parallel_shard_degree); nearest: zero_stage {}",
        pc.pipeline_parallel > 1 ? "1 (FSDP2 under a pipeline)" : "2 or 3");
  if (m.num_experts > 0 && pc.expert_tp() != 1 && pc.expert_tp() != pc.tensor_parallel)
    return fmt::format(
        "config.expert_tensor_parallel: torchtitan's expert tensor parallelism is 1 or the "
        "tensor-parallel size {}, got {}",
        pc.tensor_parallel, pc.expert_tp());
  return {};
}

std::vector<int> plan_stage_layers(const Plan& plan) {
  std::vector<int> out;
  for (const StageInfo& s : plan.schedule.placement.stages)
    out.push_back(s.layer_end - s.layer_begin);
  return out;
}

}  // namespace pw
