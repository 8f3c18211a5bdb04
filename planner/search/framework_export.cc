// The launch configuration of a plan for each framework (`pipewright export`): Megatron-LM's
// argument list, torchtitan's TOML (with a schedule CSV where it runs one), NeMo's overrides
// and DeepSpeed's JSON. What each framework can run is decided in frameworks.cc.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "core/lowering.h"
#include "core/pipeline_layout.h"
#include "core/pytorch_csv.h"
#include "hwmodels/memory.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/transformer.h"
#include "planner/schedules/generator.h"
#include "planner/search/frameworks.h"
#include "planner/search/frameworks_internal.h"

namespace pw {

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

// `group`: the interleaved order's microbatch group size (interleaved_group_of; 0 otherwise).
std::string megatron_args(const Plan& plan, const std::vector<int>& layers, int group) {
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
  if (m.mla()) {
    arg("--multi-latent-attention");
    if (m.q_lora_rank > 0) num("--q-lora-rank", m.q_lora_rank);
    num("--kv-lora-rank", m.kv_lora_rank);
    num("--qk-head-dim", m.qk_head_dim);
    num("--qk-pos-emb-head-dim", m.qk_pos_emb_head_dim);
    num("--v-head-dim", m.v_head_dim);
  }
  if (m.mtp_num_layers > 0) num("--mtp-num-layers", m.mtp_num_layers);
  num("--seq-length", m.seq_length);
  num("--max-position-embeddings", m.seq_length);
  if (m.swiglu) arg("--swiglu");
  if (m.rmsnorm) arg("--normalization", "RMSNorm");
  if (m.qk_layernorm) arg("--qk-layernorm");
  // Megatron's window is (left, right): a causal one has no keys to the right.
  if (hw::attention_window(m) > 0) arg("--window-size", fmt::format("{},0", m.window_size));
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
    arg("--cp-comm-type", pc.cp_comm_type);
  }
  if (m.num_experts > 0) {
    num("--expert-model-parallel-size", pc.expert_parallel);
    num("--expert-tensor-parallel-size", pc.expert_tp());
  }
  if (pc.sequence_parallel && pc.tensor_parallel > 1) arg("--sequence-parallel");
  if (pc.pipeline_parallel > 1) {
    int first = 0, last = 0;
    // A stage of the multi-token prediction depths alone exists only in a layout.
    if (!pc.mtp_standalone &&
        megatron_split(layers, pc.pipeline_parallel, pc.virtual_stages, &first, &last)) {
      if (pc.virtual_stages > 1) num("--num-layers-per-virtual-pipeline-stage", layers.front());
      if (first > 0) num("--decoder-first-pipeline-num-layers", first);
      if (last > 0) num("--decoder-last-pipeline-num-layers", last);
    } else {
      // Any other split (interleaved chunks of their own sizes): the layout names every stage.
      arg("--pipeline-model-parallel-layout",
          pipeline_layout_string(layers, m.mtp_num_layers, plan.config.mtp_standalone));
    }
  }
  // Megatron's default group is p microbatches per chunk; another is the plan's own order.
  if (group > 0 && group != pc.pipeline_parallel)
    num("--microbatch-group-size-per-virtual-pipeline-stage", group);
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
  if (pc.p2p_overlappable() && !pc.overlap_p2p_comm) arg("--no-overlap-p2p-communication");
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
  if (pc.fp8 != "off") {
    arg("--fp8-format", pc.fp8);
    arg("--fp8-recipe", pc.fp8_recipe);
  }
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
  // ZeRO-1 reaches torchtitan only under a pipeline, where FSDP2 runs as ZeRO-1 (frameworks.cc).
  const bool sharded = pc.zero_stage >= 1;
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
  // The ring passes shards on (its all-to-all rotation); all_gather gathers them.
  if (pc.context_parallel > 1)
    out += fmt::format("context_parallel_rotate_method = \"{}\"\n",
                       pc.cp_comm_type == "all_gather" ? "allgather" : "alltoall");
  if (m.num_experts > 0) {
    out += fmt::format("expert_parallel_degree = {}\n", pc.expert_parallel);
    out += fmt::format("expert_tensor_parallel_degree = {}\n", pc.expert_tp());
  }
  out += fmt::format("pipeline_parallel_degree = {}\n", pc.pipeline_parallel);
  if (pc.pipeline_parallel > 1) {
    if (csv_path.empty()) {  // export_plan chose the class (a CSV when none runs the order)
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
std::string nemo_overrides(const Plan& plan, const std::vector<int>& layers, int group) {
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
  if (group > 0 && group != pc.pipeline_parallel)
    num(s + "microbatch_group_size_per_vp_stage", group);
  num(s + "context_parallel_size", pc.context_parallel);
  if (pc.context_parallel > 1) kv("model.config.cp_comm_type", pc.cp_comm_type);
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
  if (pc.fp8 != "off") kv("trainer.plugins.fp8_recipe", pc.fp8_recipe);
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

namespace {

// True when `s` holds the compute order the generator named `name` gives for its devices,
// microbatches and chunks, or when that order depends on pass costs the plan does not keep (a
// cost-reading generator's: taken as named).
bool generator_order_matches(const Schedule& s, const std::string& name) {
  const GeneratorRegistry reg = default_registry();
  const GeneratorInfo* info = reg.find(name);
  if (info == nullptr) return false;
  if (info->caps.reads_costs) return true;
  const int p = s.placement.num_devices;
  if (p < 1 || static_cast<int>(s.actions.size()) != p) return false;
  GeneratorParams gp;
  gp.p = p;
  gp.m = s.num_microbatches;
  if (info->caps.takes_v) gp.v = s.placement.stages_per_pipeline() / p;
  Schedule own;
  try {
    own = generate_unvalidated(reg, name, gp);
  } catch (const ConfigError&) {
    return false;
  }
  if (own.placement.num_stages() != s.placement.num_stages()) return false;
  for (int k = 0; k < own.placement.num_stages(); ++k)
    if (own.placement.stages[k].device != s.placement.stages[k].device) return false;
  return compute_passes(s) == own.actions;
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
  // An interleaved plan runs as Megatron-core orders it only for the microbatch group size
  // (microbatch_group_size_per_vp_stage) its order has: that size is written out, and an order
  // that is Megatron's for none is refused (torchtitan runs it from a CSV instead).
  const ParallelConfig& pc = plan.config;
  const bool interleaved =
      pc.schedule == "interleaved" && pc.pipeline_parallel > 1 && pc.virtual_stages > 1;
  const int group = interleaved ? interleaved_group_of(plan.schedule) : 0;
  if (interleaved && group == 0 && (fw == Framework::kMegatron || fw == Framework::kNemo))
    throw ConfigError(
        source, "schedule",
        fmt::format("the plan's order is not {}'s interleaved 1F1B for any microbatch group size "
                    "g (p = {} <= g <= m = {}, m mod g zero or at least p); nearest: "
                    "'interleaved' as `pipewright plan --framework {}` orders it",
                    framework_title(fw), pc.pipeline_parallel, plan.schedule.num_microbatches,
                    framework_name(fw)));
  // Any other schedule a framework runs by name runs its own order: the plan's must be the one
  // its generator gives (an edited plan, or an imported order under that name, is not), or a
  // framework without a CSV runtime refuses it and torchtitan runs it from a CSV.
  const bool named_order = pc.pipeline_parallel <= 1 || interleaved ||
                           framework_schedule_support(fw, pc.schedule, q.pipelines, q.v_shape) !=
                               ScheduleSupport::kNative ||
                           generator_order_matches(plan.schedule, pc.schedule);
  if (!named_order && fw != Framework::kTorchtitan)
    throw ConfigError(
        source, "schedule",
        fmt::format("the plan's order is not {}'s '{}' (the order `pipewright plan "
                    "--framework {}` gives that name); nearest: '{}' as generated",
                    framework_title(fw), pc.schedule, framework_name(fw), pc.schedule));
  if (!named_order && q.v_shape)
    throw ConfigError(source, "schedule",
                      fmt::format("the plan's order is not torchtitan's '{}', and a V placement "
                                  "runs only as torchtitan's own class; nearest: '{}' as "
                                  "generated",
                                  pc.schedule, pc.schedule));
  FrameworkExport out;
  if (fw == Framework::kMegatron) {
    out.text = megatron_args(plan, layers, group);
    return out;
  }
  if (fw == Framework::kNemo) {
    out.text = nemo_overrides(plan, layers, group);
    return out;
  }
  if (fw == Framework::kDeepspeed) {
    out.text = deepspeed_json(plan, &out.notes);
    return out;
  }
  // PyTorch's Interleaved1F1B runs rounds of p microbatches when p divides m (torch.distributed
  // .pipelining ScheduleInterleaved1F1B: m / max(1, m / p) per round): Megatron's default group.
  // Another group, or an order no group gives, runs from a CSV.
  const int m = plan.schedule.num_microbatches;
  const bool pytorch_order = group == pc.pipeline_parallel && m % pc.pipeline_parallel == 0;
  const bool csv = pc.pipeline_parallel > 1 &&
                   (framework_schedule_support(fw, pc.schedule, q.pipelines, q.v_shape) ==
                        ScheduleSupport::kCsv ||
                    (interleaved && !pytorch_order) || !named_order);
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
