#include "planner/search/frameworks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "core/pytorch_csv.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"

namespace pw {
namespace {

// Schedules each framework runs, by generator name. Megatron-LM's pipeline runtime has 1F1B
// (PipeDream-Flush) and the interleaved 1F1B of Narayanan et al.; 1F1B with full recomputation
// is its 1F1B with --recompute-granularity full. torchtitan runs PyTorch's pipelining classes by
// name (torch.distributed.pipelining: GPipe, 1F1B, Interleaved1F1B, LoopedBFS) and any single-
// pipeline order from a CSV (_PipelineScheduleRuntime).
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
};

const char* native_name(Framework fw, const std::string& schedule) {
  if (fw == Framework::kMegatron) {
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

// The torchtitan flavor whose shape is the model's (the sequence length and name aside).
const Flavor* torchtitan_flavor(const ModelShape& m) {
  for (const Flavor& f : kTorchtitanFlavors) {
    const hw::ModelPreset* p = hw::find_model_preset(f.preset);
    if (!p) continue;
    ModelShape a = p->shape, b = m;
    a.name = b.name = "";
    a.seq_length = b.seq_length = 0;
    if (a == b) return &f;
  }
  return nullptr;
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
  if (framework_schedule_support(fw, pc.schedule, q.pipelines) != ScheduleSupport::kNone) return {};
  return fmt::format("schedule: {} cannot run '{}'; nearest it can: '{}'", framework_title(fw),
                     pc.schedule,
                     framework_nearest_schedule(fw, pc.schedule, q.v_shape, pc.virtual_stages));
}

}  // namespace

bool parse_framework(const std::string& name, Framework* out) {
  if (name == "any") return *out = Framework::kAny, true;
  if (name == "megatron") return *out = Framework::kMegatron, true;
  if (name == "torchtitan") return *out = Framework::kTorchtitan, true;
  return false;
}

std::string_view framework_name(Framework fw) {
  switch (fw) {
    case Framework::kMegatron:
      return "megatron";
    case Framework::kTorchtitan:
      return "torchtitan";
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
    default:
      return "any framework";
  }
}

ScheduleSupport framework_schedule_support(Framework fw, const std::string& schedule,
                                           int pipelines) {
  if (fw == Framework::kAny) return ScheduleSupport::kNative;
  if (native_name(fw, schedule)) return ScheduleSupport::kNative;
  // PyTorch's CSV holds one pipeline; every other generator's order can be written in it.
  if (fw == Framework::kTorchtitan && pipelines == 1) return ScheduleSupport::kCsv;
  return ScheduleSupport::kNone;
}

std::string framework_nearest_schedule(Framework fw, const std::string& schedule, bool v_shape,
                                       int chunks) {
  if (native_name(fw, schedule)) return schedule;
  // Several chunks per device (V shapes, BitPipe, breadth-first) are nearest to interleaving;
  // one chunk per device (GPipe, the ZB-H family, ZB-1p/2p) to 1F1B.
  const bool chunked = v_shape || chunks > 1 || schedule == "bitpipe";
  return chunked ? "interleaved" : "1f1b";
}

std::string framework_model_problem(Framework fw, const ModelShape& m) {
  if (fw == Framework::kTorchtitan) return torchtitan_model_problem(m);
  return {};
}

std::string framework_problem(Framework fw, const FrameworkQuery& q) {
  if (fw == Framework::kAny) return {};
  const ParallelConfig& pc = *q.config;
  const ModelShape& m = *q.model;
  if (std::string s = schedule_problem(fw, q); !s.empty()) return s;
  if (std::string s = framework_model_problem(fw, m); !s.empty()) return s;
  if (fw == Framework::kMegatron) {
    int first = 0, last = 0;
    if (pc.pipeline_parallel > 1 &&
        !megatron_split(*q.stage_layers, pc.pipeline_parallel, pc.virtual_stages, &first, &last))
      return fmt::format(
          "schedule.placement: Megatron-LM splits layers evenly over the stages (non-interleaved: "
          "evenly after --decoder-first/last-pipeline-num-layers); this plan's split is {}",
          join_layers(*q.stage_layers));
    return {};
  }
  // torchtitan
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
  out += fmt::format("context_parallel_degree = {}\n", pc.context_parallel);
  if (m.num_experts > 0) {
    out += fmt::format("expert_parallel_degree = {}\n", pc.expert_parallel);
    out += fmt::format("expert_tensor_parallel_degree = {}\n", pc.expert_tp());
  }
  out += fmt::format("pipeline_parallel_degree = {}\n", pc.pipeline_parallel);
  if (pc.pipeline_parallel > 1) {
    const ScheduleSupport support =
        framework_schedule_support(Framework::kTorchtitan, pc.schedule, 1);
    if (support == ScheduleSupport::kNative) {
      out += fmt::format("pipeline_parallel_schedule = \"{}\"\n",
                         native_name(Framework::kTorchtitan, pc.schedule));
    } else {
      // With a CSV torchtitan runs _PipelineScheduleRuntime; the class named here only picks
      // how stages sit on ranks: "v" for ZBVZeroBubble, "loop" otherwise.
      const bool v = plan.schedule.placement.kind == PlacementKind::kV;
      out += fmt::format("pipeline_parallel_schedule = \"{}\"\n",
                         v ? "ZBVZeroBubble" : "Interleaved1F1B");
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
  return out;
}

}  // namespace

FrameworkExport export_plan(const Plan& plan, Framework fw, const std::string& source,
                            const std::string& csv_path) {
  if (fw == Framework::kAny)
    throw ConfigError("", "--to", "expected megatron or torchtitan, got 'any'");
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
  const bool csv =
      plan.config.pipeline_parallel > 1 &&
      framework_schedule_support(fw, plan.config.schedule, q.pipelines) == ScheduleSupport::kCsv;
  if (csv) {
    if (csv_path.empty())
      throw ConfigError("", "--out",
                        fmt::format("torchtitan runs '{}' from a schedule CSV written beside the "
                                    "TOML: give --out FILE.toml",
                                    plan.config.schedule));
    out.csv_path = csv_path;
    out.csv_text = schedule_to_pytorch_csv(plan.schedule, CsvForm::kComputeComms);
  }
  out.text = torchtitan_toml(plan, layers, out.csv_path);
  return out;
}

}  // namespace pw
