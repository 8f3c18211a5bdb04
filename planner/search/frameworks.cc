#include "planner/search/frameworks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "core/pytorch_csv.h"
#include "hwmodels/memory.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"

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

// torchtitan defines models in code and selects one by (name, flavor); these are its flavors
// that are one of pipewright's presets (torchtitan/models/{llama3,qwen3}).
struct Flavor {
  const char* preset;
  const char* name;
  const char* flavor;
};
constexpr Flavor kTorchtitanFlavors[] = {
    {"llama3-8b", "llama3", "8B"},
    {"llama3-70b", "llama3", "70B"},
    {"llama3.1-405b", "llama3", "405B"},
    {"qwen3-30b-a3b", "qwen3", "30B-A3B"},
    {"qwen3-235b-a22b", "qwen3", "235B-A22B"},
};

// NeMo 2's recipes (nemo/collections/llm/recipes) for pipewright's presets: --factory NAME.
constexpr Flavor kNemoRecipes[] = {
    {"gpt3-175b", "gpt3_175b", ""},
    {"llama2-7b", "llama2_7b", ""},
    {"llama3-8b", "llama3_8b", ""},
    {"llama3-70b", "llama3_70b", ""},
    {"llama3.1-405b", "llama31_405b", ""},
    {"mixtral-8x7b", "mixtral_8x7b", ""},
    {"mixtral-8x22b", "mixtral_8x22b", ""},
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
    a.seq_length = b.seq_length = 0;
    if (a == b) return &f;
  }
  return nullptr;
}

const Flavor* torchtitan_flavor(const ModelShape& m) { return flavor_in(kTorchtitanFlavors, m); }
const Flavor* nemo_recipe(const ModelShape& m) { return flavor_in(kNemoRecipes, m); }

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
      return "config.context_parallel: DeepSpeed's config has no context parallelism (Ulysses "
             "splits attention heads, not the ring this plan prices); nearest: 1";
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
    int first = 0, last = 0;
    if (pc.pipeline_parallel > 1 &&
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
  if (pc.zero_stage == 1)
    return "config.zero_stage: torchtitan shards gradients with the optimizer state (FSDP2) and "
           "has no ZeRO-1; nearest: zero_stage 2 (fsdp_reshard_after_forward = \"never\")";
  if (pc.tensor_parallel > 1 && !pc.sequence_parallel)
    return "config.sequence_parallel: torchtitan's tensor parallelism always shards norms over "
           "the sequence; nearest: sequence_parallel true";
  if (pc.optimizer_offload)
    return "config.optimizer_offload: torchtitan offloads parameters, gradients and optimizer "
           "state together (training.enable_cpu_offload), not the optimizer alone; nearest: "
           "optimizer_offload false";
  if (m.num_experts > 0 && pc.expert_parallel > 1 && pc.zero_stage == 0)
    return "config.zero_stage: torchtitan's expert parallelism borrows the FSDP ranks "
           "(data_parallel_shard_degree); nearest: zero_stage 2 or 3";
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

namespace {

// Megatron's --moe-layer-freq: an integer k (every k-th layer) or a Python list expression.
std::string moe_layer_freq_arg(const ModelShape& m) {
  if (m.moe_first_dense_layers == 0) return std::to_string(m.moe_layer_freq);
  if (m.moe_layer_freq == 1)
    return fmt::format("([0]*{}+[1]*{})", m.moe_first_dense_layers,
                       m.num_layers - m.moe_first_dense_layers);
  std::string out = "[";
  for (int l = 0; l < m.num_layers; ++l)
    out += fmt::format("{}{}", l ? "," : "", hw::is_moe_layer(m, l) ? 1 : 0);
  return out + "]";
}

std::string megatron_args(const Plan& plan, const std::vector<int>& layers) {
  const ModelShape& m = plan.model;
  const ParallelConfig& pc = plan.config;
  std::string out;
  auto arg = [&](const std::string& flag, const std::string& value = "") {
    out += value.empty() ? flag + "\n" : flag + " " + value + "\n";
  };
  auto num = [&](const std::string& flag, long long v) { arg(flag, std::to_string(v)); };
  out += fmt::format(
      "# Megatron-LM arguments (pretrain_gpt.py) for {}: {} GPUs = tensor {} x context {} x "
      "pipeline {} x data {}\n"
      "# Launch: torchrun --nnodes N --nproc-per-node G pretrain_gpt.py $(grep -v '^#' THIS_FILE) "
      "--data-path ... --tokenizer-type ... (the vocabulary, {} tokens, comes from the "
      "tokenizer)\n",
      m.name.empty() ? "the plan's model" : m.name, pc.num_gpus(), pc.tensor_parallel,
      pc.context_parallel, pc.pipeline_parallel, pc.data_parallel, m.vocab_size);
  out += "# model\n";
  num("--num-layers", m.num_layers);
  num("--hidden-size", m.hidden_size);
  num("--ffn-hidden-size", m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size);
  num("--num-attention-heads", m.num_attention_heads);
  if (m.num_query_groups > 0 && m.num_query_groups != m.num_attention_heads) {
    arg("--group-query-attention");
    num("--num-query-groups", m.num_query_groups);
  }
  if (m.kv_channels > 0) num("--kv-channels", m.kv_channels);
  num("--seq-length", m.seq_length);
  num("--max-position-embeddings", m.seq_length);
  if (m.swiglu) arg("--swiglu");
  if (m.rmsnorm) arg("--normalization", "RMSNorm");
  if (m.qk_layernorm) arg("--qk-layernorm");
  if (m.untie_embeddings) arg("--untie-embeddings-and-output-weights");
  if (m.rope) arg("--position-embedding-type", "rope");
  if (!m.bias) arg("--disable-bias-linear");
  if (m.qkv_bias) arg("--add-qkv-bias");
  arg("--attention-backend", plan.flash_attention ? "auto" : "unfused");
  if (m.num_experts > 0) {
    num("--num-experts", m.num_experts);
    num("--moe-router-topk", m.moe_router_topk);
    if (m.moe_ffn_hidden_size > 0) num("--moe-ffn-hidden-size", m.moe_ffn_hidden_size);
    if (m.moe_shared_expert_size > 0)
      num("--moe-shared-expert-intermediate-size", m.moe_shared_expert_size);
    if (m.moe_layer_freq != 1 || m.moe_first_dense_layers > 0)
      arg("--moe-layer-freq", moe_layer_freq_arg(m));
    if (m.moe_capacity_factor > 0)
      arg("--moe-expert-capacity-factor", fmt::format("{}", m.moe_capacity_factor));
    arg("--moe-grouped-gemm");
    arg("--moe-token-dispatcher-type", "alltoall");
  }
  out += "# parallelism\n";
  num("--tensor-model-parallel-size", pc.tensor_parallel);
  num("--pipeline-model-parallel-size", pc.pipeline_parallel);
  if (pc.context_parallel > 1) {
    num("--context-parallel-size", pc.context_parallel);
    arg("--cp-comm-type", "p2p");
  }
  if (m.num_experts > 0) {
    num("--expert-model-parallel-size", pc.expert_parallel);
    num("--expert-tensor-parallel-size", pc.expert_tp());
  }
  if (pc.sequence_parallel && pc.tensor_parallel > 1) arg("--sequence-parallel");
  if (pc.pipeline_parallel > 1) {
    int first = 0, last = 0;
    megatron_split(layers, pc.pipeline_parallel, pc.virtual_stages, &first, &last);
    if (pc.virtual_stages > 1) num("--num-layers-per-virtual-pipeline-stage", layers.front());
    if (first > 0) num("--decoder-first-pipeline-num-layers", first);
    if (last > 0) num("--decoder-last-pipeline-num-layers", last);
  }
  out += "# batch\n";
  num("--micro-batch-size", pc.micro_batch_size);
  num("--global-batch-size", pc.global_batch_size);
  out += "# memory\n";
  std::string recompute = pc.recompute;
  if (pc.schedule == "1f1b-r" && pc.pipeline_parallel > 1) recompute = "full";
  if (recompute == "selective") arg("--recompute-granularity", "selective");
  if (recompute == "full") {
    arg("--recompute-granularity", "full");
    arg("--recompute-method", "uniform");
    num("--recompute-num-layers", 1);
  }
  if (pc.zero_stage >= 1) arg("--use-distributed-optimizer");
  // The gradient precision and overlaps the plan was priced with (Megatron-LM keeps bf16
  // gradients in fp32 unless told otherwise).
  if (!pc.grad_reduce_in_fp32) arg("--grad-reduce-in-bf16");
  if (pc.overlap_grad_reduce) arg("--overlap-grad-reduce");
  if (pc.overlap_param_gather) arg("--overlap-param-gather");
  if (!pc.align_param_gather) arg("--no-align-param-gather");
  if (pc.ddp_bucket_size > 0) num("--ddp-bucket-size", static_cast<long long>(pc.ddp_bucket_size));
  if (pc.tp_comm_overlap) arg("--tp-comm-overlap");
  // Megatron-LM overlaps the interleaved schedule's p2p by default.
  if (pc.virtual_stages > 1 && pc.pipeline_parallel > 1 && !pc.overlap_p2p_comm)
    arg("--no-overlap-p2p-communication");
  if (pc.zero_stage >= 2) {
    arg("--use-megatron-fsdp");
    arg("--data-parallel-sharding-strategy",
        pc.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
    arg("--ckpt-format", "fsdp_dtensor");
  }
  if (pc.optimizer_offload) {
    arg("--optimizer-cpu-offload");
    arg("--optimizer-offload-fraction", "1.0");
    arg("--use-precision-aware-optimizer");
  }
  out += "# precision\n";
  arg("--bf16");
  if (pc.fp8 != "off") arg("--fp8-format", pc.fp8);
  return out;
}

std::string toml_string_list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += fmt::format("{}\"{}\"", i ? ", " : "", v[i]);
  return out + "]";
}

std::string torchtitan_toml(const Plan& plan, const std::vector<int>& layers,
                            const std::string& csv_path) {
  const ModelShape& m = plan.model;
  const ParallelConfig& pc = plan.config;
  const Flavor* f = torchtitan_flavor(m);
  PW_ASSERT(f != nullptr, "torchtitan_toml called without a flavor check");
  const int local_batch = pc.global_batch_size / pc.data_parallel;
  std::string out = fmt::format(
      "# torchtitan job config (TOML form, torchtitan <= 0.2: --job.config_file THIS_FILE) for "
      "{}: {} GPUs = tensor {} x context {} x pipeline {} x data {}\n\n",
      m.name.empty() ? "the plan's model" : m.name, pc.num_gpus(), pc.tensor_parallel,
      pc.context_parallel, pc.pipeline_parallel, pc.data_parallel);
  out += fmt::format("[model]\nname = \"{}\"\nflavor = \"{}\"\n", f->name, f->flavor);
  if (pc.fp8 != "off") out += "converters = [\"quantize.linear.float8\"]\n";
  out += fmt::format("\n[training]\nlocal_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\n",
                     local_batch, pc.global_batch_size, m.seq_length);
  const bool sharded = pc.zero_stage >= 2;
  out += fmt::format("\n[parallelism]\ndata_parallel_replicate_degree = {}\n",
                     sharded ? 1 : pc.data_parallel);
  out += fmt::format("data_parallel_shard_degree = {}\n", sharded ? pc.data_parallel : 1);
  if (sharded)
    out += fmt::format("fsdp_reshard_after_forward = \"{}\"\n",
                       pc.zero_stage == 3 ? "always" : "never");
  out += fmt::format("tensor_parallel_degree = {}\n", pc.tensor_parallel);
  // Async TP pipelines the TP collectives with the matmuls (it needs torch.compile).
  if (pc.tp_comm_overlap) out += "enable_async_tensor_parallel = true\n";
  out += fmt::format("context_parallel_degree = {}\n", pc.context_parallel);
  if (m.num_experts > 0) {
    out += fmt::format("expert_parallel_degree = {}\n", pc.expert_parallel);
    out += fmt::format("expert_tensor_parallel_degree = {}\n", pc.expert_tp());
  }
  out += fmt::format("pipeline_parallel_degree = {}\n", pc.pipeline_parallel);
  if (pc.pipeline_parallel > 1) {
    const bool v = plan.schedule.placement.kind == PlacementKind::kV;
    const ScheduleSupport support =
        framework_schedule_support(Framework::kTorchtitan, pc.schedule, 1, v);
    if (support == ScheduleSupport::kNative) {
      out += fmt::format("pipeline_parallel_schedule = \"{}\"\n",
                         native_name(Framework::kTorchtitan, pc.schedule));
    } else {
      // With a CSV torchtitan runs _PipelineScheduleRuntime; the class named here only picks
      // how the model is split over the ranks, a loop (V placements are refused before this).
      out += "pipeline_parallel_schedule = \"Interleaved1F1B\"\n";
      out += fmt::format("pipeline_parallel_schedule_csv = \"{}\"\n", csv_path);
    }
    out += fmt::format("pipeline_parallel_microbatch_size = {}\n", pc.micro_batch_size);
    // Each stage's modules (torchtitan's llama3/qwen3 names), in global stage order.
    out += "module_fqns_per_model_part = [\n";
    const int S = static_cast<int>(layers.size());
    int layer = 0;
    for (int s = 0; s < S; ++s) {
      std::vector<std::string> names;
      if (s == 0) names.push_back("tok_embeddings");
      for (int i = 0; i < layers[s]; ++i) names.push_back(fmt::format("layers.{}", layer++));
      if (s == S - 1) {
        names.push_back("norm");
        names.push_back("output");
      }
      out += "  " + toml_string_list(names) + ",\n";
    }
    out += "]\n";
  }
  std::string recompute = pc.recompute;
  if (pc.schedule == "1f1b-r" && pc.pipeline_parallel > 1) recompute = "full";
  out += fmt::format("\n[activation_checkpoint]\nmode = \"{}\"\n", recompute);
  if (recompute == "selective") out += "selective_ac_option = \"op\"\n";
  if (pc.tp_comm_overlap) out += "\n[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n";
  return out;
}

std::string py_bool(bool b) { return b ? "True" : "False"; }

// NeMo 2: `nemo llm pretrain --factory RECIPE` and its overrides (MegatronStrategy, the data
// module, Megatron-core's OptimizerConfig and TransformerConfig, the mixed-precision plugin).
std::string nemo_overrides(const Plan& plan, const std::vector<int>& layers) {
  const ModelShape& m = plan.model;
  const ParallelConfig& pc = plan.config;
  const Flavor* r = nemo_recipe(m);
  PW_ASSERT(r != nullptr, "nemo_overrides called without a recipe check");
  std::string out = fmt::format(
      "# NeMo 2 overrides for {}: {} GPUs = tensor {} x context {} x pipeline {} x data {}\n"
      "# Launch: nemo llm pretrain --factory {} trainer.num_nodes=N trainer.devices=G "
      "$(grep -v '^#' THIS_FILE)\n",
      m.name.empty() ? "the plan's model" : m.name, pc.num_gpus(), pc.tensor_parallel,
      pc.context_parallel, pc.pipeline_parallel, pc.data_parallel, r->name);
  auto kv = [&](const std::string& k, const std::string& v) { out += k + "=" + v + "\n"; };
  auto num = [&](const std::string& k, long long v) { kv(k, std::to_string(v)); };
  const std::string s = "trainer.strategy.";
  num(s + "tensor_model_parallel_size", pc.tensor_parallel);
  num(s + "pipeline_model_parallel_size", pc.pipeline_parallel);
  kv(s + "virtual_pipeline_model_parallel_size", pc.virtual_stages > 1 && pc.pipeline_parallel > 1
                                                     ? std::to_string(pc.virtual_stages)
                                                     : "None");
  num(s + "context_parallel_size", pc.context_parallel);
  kv(s + "sequence_parallel", py_bool(pc.sequence_parallel && pc.tensor_parallel > 1));
  if (m.num_experts > 0) {
    num(s + "expert_model_parallel_size", pc.expert_parallel);
    num(s + "expert_tensor_parallel_size", pc.expert_tp());
  }
  if (pc.pipeline_parallel > 1) {
    int first = 0, last = 0;
    megatron_split(layers, pc.pipeline_parallel, pc.virtual_stages, &first, &last);
    if (first > 0) num(s + "num_layers_in_first_pipeline_stage", first);
    if (last > 0) num(s + "num_layers_in_last_pipeline_stage", last);
  }
  // The gradient precision and overlaps the plan was priced with (the recipes' own defaults
  // may differ: their comm-overlap callback turns both DDP overlaps on whenever d > 1).
  kv(s + "ddp.grad_reduce_in_fp32", py_bool(pc.grad_reduce_in_fp32));
  kv("trainer.plugins.grad_reduce_in_fp32", py_bool(pc.grad_reduce_in_fp32));
  kv(s + "ddp.overlap_grad_reduce", py_bool(pc.overlap_grad_reduce));
  kv(s + "ddp.overlap_param_gather", py_bool(pc.overlap_param_gather));
  // NeMo's comm-overlap callback sets its own bucket size (128Mi parameters) and alignment
  // when d > 1: the ones the plan was priced with are written out.
  if (pc.overlap_param_gather) kv(s + "ddp.align_param_gather", py_bool(pc.align_param_gather));
  if (pc.overlap_grad_reduce && pc.zero_stage <= 2)
    num(s + "ddp.bucket_size", static_cast<long long>(hw::grad_bucket_params(
                                   pc.zero_stage, true, pc.data_parallel * pc.context_parallel,
                                   true, pc.ddp_bucket_size)));
  kv("model.config.tp_comm_overlap", py_bool(pc.tp_comm_overlap));
  // Megatron-core refuses overlap_p2p_comm with batch_p2p_comm; NeMo's callback batches the
  // blocking calls of a pipeline (pp > 1) and overlaps the interleaved ones.
  kv("model.config.overlap_p2p_comm", py_bool(pc.overlap_p2p_comm));
  kv("model.config.batch_p2p_comm", py_bool(pc.pipeline_parallel > 1 && !pc.overlap_p2p_comm));
  if (pc.zero_stage >= 2) {
    kv(s + "fsdp", "megatron");
    kv(s + "ddp.data_parallel_sharding_strategy",
       pc.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
  }
  num("data.micro_batch_size", pc.micro_batch_size);
  num("data.global_batch_size", pc.global_batch_size);
  num("data.seq_length", m.seq_length);
  num("model.config.seq_length", m.seq_length);
  kv("optim.config.use_distributed_optimizer", py_bool(pc.zero_stage >= 1));
  if (pc.optimizer_offload) {
    kv("optim.config.optimizer_cpu_offload", "True");
    kv("optim.config.optimizer_offload_fraction", "1.0");
    kv("optim.config.use_precision_aware_optimizer", "True");
  }
  std::string recompute = pc.recompute;
  if (pc.schedule == "1f1b-r" && pc.pipeline_parallel > 1) recompute = "full";
  kv("model.config.recompute_granularity", recompute == "none" ? "None" : recompute);
  if (recompute == "full") {
    kv("model.config.recompute_method", "uniform");
    num("model.config.recompute_num_layers", 1);
  }
  kv("trainer.plugins.fp8", pc.fp8 == "off" ? "None" : pc.fp8);
  return out;
}

// DeepSpeed's JSON config; the pipeline itself is PipelineModule's arguments in the model code.
std::string deepspeed_json(const Plan& plan, std::vector<std::string>* notes) {
  const ParallelConfig& pc = plan.config;
  const int accumulation = pc.global_batch_size / (pc.micro_batch_size * pc.data_parallel);
  std::string out = "{\n";
  out += fmt::format("  \"train_batch_size\": {},\n", pc.global_batch_size);
  out += fmt::format("  \"train_micro_batch_size_per_gpu\": {},\n", pc.micro_batch_size);
  out += fmt::format("  \"gradient_accumulation_steps\": {},\n", accumulation);
  out += "  \"bf16\": {\"enabled\": true},\n";
  out += fmt::format("  \"communication_data_type\": \"{}\",\n",
                     pc.grad_reduce_in_fp32 ? "fp32" : "bf16");
  if (pc.tensor_parallel > 1)
    out += fmt::format("  \"tensor_parallel\": {{\"autotp_size\": {}}},\n", pc.tensor_parallel);
  out += fmt::format("  \"zero_optimization\": {{\"stage\": {}, \"overlap_comm\": {}{}}}\n",
                     pc.zero_stage, pc.overlap_grad_reduce ? "true" : "false",
                     pc.optimizer_offload
                         ? ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}"
                         : "");
  out += "}\n";
  const bool full = pc.recompute == "full" || pc.schedule == "1f1b-r";
  if (pc.pipeline_parallel > 1)
    notes->push_back(
        fmt::format("in the model code: PipelineModule(layers=..., num_stages={}, partition_method="
                    "'uniform'{}) ({} GPUs = tensor {} x pipeline {} x data {})",
                    pc.pipeline_parallel, full ? ", activation_checkpoint_interval=1" : "",
                    pc.num_gpus(), pc.tensor_parallel, pc.pipeline_parallel, pc.data_parallel));
  else if (full)
    notes->push_back(
        "in the model code: deepspeed.checkpointing.checkpoint around each layer "
        "(full recomputation)");
  return out;
}

}  // namespace

FrameworkExport export_plan(const Plan& plan, Framework fw, const std::string& source,
                            const std::string& csv_path) {
  if (fw == Framework::kAny)
    throw ConfigError("", "--to", "expected megatron, torchtitan, nemo or deepspeed, got 'any'");
  const std::vector<int> layers = plan_stage_layers(plan);
  FrameworkQuery q;
  q.model = &plan.model;
  q.config = &plan.config;
  q.stage_layers = &layers;
  q.pipelines =
      plan.schedule.placement.stages.empty() ? 1 : plan.schedule.placement.num_pipelines();
  q.v_shape = plan.schedule.placement.kind == PlacementKind::kV;
  if (std::string why = framework_problem(fw, q); !why.empty()) {
    const std::size_t colon = why.find(": ");
    throw ConfigError(
        source, why.substr(0, colon),
        why.substr(colon + 2) +
            fmt::format(" (re-plan with `pipewright plan --framework {}`)", framework_name(fw)));
  }
  FrameworkExport out;
  if (fw == Framework::kMegatron) {
    out.text = megatron_args(plan, layers);
    return out;
  }
  if (fw == Framework::kNemo) {
    out.text = nemo_overrides(plan, layers);
    return out;
  }
  if (fw == Framework::kDeepspeed) {
    out.text = deepspeed_json(plan, &out.notes);
    return out;
  }
  const bool csv = plan.config.pipeline_parallel > 1 &&
                   framework_schedule_support(fw, plan.config.schedule, q.pipelines, q.v_shape) ==
                       ScheduleSupport::kCsv;
  if (csv) {
    if (csv_path.empty())
      throw ConfigError("", "--out",
                        fmt::format("torchtitan runs '{}' from a schedule CSV written beside the "
                                    "TOML: give --out FILE.toml",
                                    plan.config.schedule));
    out.csv_path = csv_path;
    // torchtitan loads it with _PipelineScheduleRuntime._load_csv's default form,
    // compute_only (torchtitan/distributed/pipeline_parallel.py): SEND/RECV there are refused.
    out.csv_text = schedule_to_pytorch_csv(plan.schedule, CsvForm::kComputeOnly);
  }
  out.text = torchtitan_toml(plan, layers, out.csv_path);
  return out;
}

}  // namespace pw
