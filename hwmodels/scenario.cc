#include "hwmodels/scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/file_io.h"
#include "core/plan_io.h"
#include "hwmodels/config_map.h"
#include "hwmodels/hf_config.h"
#include "hwmodels/model_presets.h"
#include "hwmodels/scenario_faults.h"
#include "hwmodels/scenario_split.h"
#include "hwmodels/transformer.h"

namespace pw::hw {
namespace {

// Model sizes stop at 2^24 (16,777,216): 16x today's largest (a 1M-token context, a 256k
// vocabulary) and far from overflowing the int products the workload forms (4 x hidden, heads x
// kv_channels).
constexpr long long kMaxSize = 1LL << 24;

void parse_model(const ConfigMap& m, const std::string& base_dir, Scenario* s) {
  m.check_keys(scenario_keys("model"));
  ModelShape& shape = s->model;
  if (m.has("preset") && m.has("hf_config"))
    m.fail("hf_config", "given with model.preset; expected one of them");
  const bool base = m.has("preset") || m.has("hf_config");
  if (m.has("preset")) {
    std::string name = m.text("preset");
    const ModelPreset* p = find_model_preset(name);
    if (!p) {
      m.fail("preset", fmt::format("unknown preset '{}'; did you mean '{}'?", name,
                                   nearest_name(name, model_preset_names())));
    }
    shape = p->shape;
  } else if (m.has("hf_config")) {
    std::filesystem::path path = m.text("hf_config");
    if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
    shape = load_hf_config(path.string());
    if (!m.has("seq_length"))
      m.fail("seq_length",
             "missing; a config.json gives only max_position_embeddings, expected the training "
             "sequence length");
  } else {
    shape.name = "custom";
  }
  // Explicit keys override a preset or config.json; without one the shape keys are required.
  auto field = [&](const std::string& key, int* out, bool optional, long long min = 1,
                   long long max = kMaxSize) {
    if (m.has(key) || (!optional && !base)) *out = static_cast<int>(m.integer(key, min, max));
  };
  auto flag = [&](const std::string& key, bool* out) { *out = m.boolean_or(key, *out); };
  if (m.has("name")) shape.name = m.text("name");
  field("num_layers", &shape.num_layers, false, 1, 1 << 16);  // 500x Llama 3 405B's 126
  field("hidden_size", &shape.hidden_size, false);
  field("num_attention_heads", &shape.num_attention_heads, false);
  field("ffn_hidden_size", &shape.ffn_hidden_size, true);
  field("seq_length", &shape.seq_length, false);
  field("vocab_size", &shape.vocab_size, false);
  field("num_query_groups", &shape.num_query_groups, true);
  field("kv_channels", &shape.kv_channels, true);
  field("window_size", &shape.window_size, true, 0);
  flag("qk_layernorm", &shape.qk_layernorm);
  flag("swiglu", &shape.swiglu);
  if (m.has("normalization"))
    shape.rmsnorm = m.choice_or("normalization", "", {"LayerNorm", "RMSNorm"}) == "RMSNorm";
  flag("untie_embeddings_and_output_weights", &shape.untie_embeddings);
  if (m.has("position_embedding_type"))
    shape.rope = m.choice_or("position_embedding_type", "", {"learned_absolute", "rope"}) == "rope";
  flag("add_bias_linear", &shape.bias);
  flag("add_qkv_bias", &shape.qkv_bias);
  field("q_lora_rank", &shape.q_lora_rank, true, 0);
  field("kv_lora_rank", &shape.kv_lora_rank, true, 0);
  field("qk_head_dim", &shape.qk_head_dim, true);
  field("qk_pos_emb_head_dim", &shape.qk_pos_emb_head_dim, true);
  field("v_head_dim", &shape.v_head_dim, true);
  field("num_experts", &shape.num_experts, true, 0);
  field("moe_router_topk", &shape.moe_router_topk, true);
  field("moe_ffn_hidden_size", &shape.moe_ffn_hidden_size, true);
  field("moe_shared_expert_intermediate_size", &shape.moe_shared_expert_size, true, 0);
  field("moe_layer_freq", &shape.moe_layer_freq, true);
  field("moe_first_dense_layers", &shape.moe_first_dense_layers, true, 0);
  if (m.has("moe_expert_capacity_factor"))
    shape.moe_capacity_factor = m.positive("moe_expert_capacity_factor");
  field("mtp_num_layers", &shape.mtp_num_layers, true, 0);
  if (shape.ffn_hidden_size == 0) shape.ffn_hidden_size = 4 * shape.hidden_size;
  if (shape.num_experts > 0 && shape.moe_router_topk == 0 && !m.has("moe_router_topk"))
    m.fail("moe_router_topk", "missing; expected the experts each token is routed to");
  const std::string problem = model_shape_problem(shape);
  if (!problem.empty()) {
    const auto colon = problem.find(':');
    m.fail(problem.substr(0, colon), problem.substr(colon + 2));
  }
  // Fused attention (no s x s scores stored or streamed): Megatron-core's `attention_backend`,
  // whose default `auto` lets Transformer Engine pick a fused kernel (flash or cuDNN); `unfused`
  // and `local` (Megatron's own core attention, the 2021-22 papers' runs) store the scores.
  // The older flag `use_flash_attn` sets it too (false: unfused); both given must agree.
  const std::string backend =
      m.has("attention_backend")
          ? m.choice_or("attention_backend", "", {"auto", "flash", "fused", "unfused", "local"})
          : "auto";
  const bool fused = m.has("attention_backend") ? backend != "unfused" && backend != "local"
                                                : kFusedAttentionByDefault;
  s->flash_attention = fused;
  if (m.has("use_flash_attn")) {
    s->flash_attention = m.boolean_or("use_flash_attn", false);
    if (m.has("attention_backend") && s->flash_attention != fused)
      m.fail(
          "use_flash_attn",
          fmt::format("{} contradicts attention_backend {} ({}); expected one of the two keys, "
                      "or both agreeing",
                      s->flash_attention ? "true" : "false", backend, fused ? "fused" : "unfused"));
  }
}

void parse_cluster(const ConfigMap& c, const std::string& base_dir, Scenario* s) {
  c.check_keys(scenario_keys("cluster"));
  std::string profile = c.text("profile");
  s->profile = resolve_profile(profile, base_dir, c.file(), c.key_path("profile"));
  s->cluster_profile = profile;
  s->topology = topology_spec(s->profile, static_cast<int>(c.integer("nodes", 1)));
  TopologySpec& t = s->topology;
  t.node.gpus_per_node = static_cast<int>(c.integer_or("gpus_per_node", t.node.gpus_per_node, 1));
  if (static_cast<long long>(t.nodes) * t.node.gpus_per_node > kMaxClusterGpus)
    c.fail("nodes", fmt::format("{} nodes x {} GPUs is beyond what pipewright models; expected at "
                                "most {} GPUs",
                                t.nodes, t.node.gpus_per_node, kMaxClusterGpus));
  if (c.has("fabric")) {
    std::string kind = c.choice_or("fabric", "", {"fat-tree", "rail-optimized"});
    t.fabric.kind = kind == "fat-tree" ? FabricKind::kFatTree : FabricKind::kRailOptimized;
  }
  t.fabric.oversubscription = c.positive_or("oversubscription", t.fabric.oversubscription);
  if (t.fabric.oversubscription < 1.0) c.fail("oversubscription", "expected a number >= 1");
  t.fabric.leaf_ports =
      static_cast<int>(c.integer_or("leaf_ports", t.fabric.leaf_ports, 1, kMaxLeafPorts));
  parse_cluster_faults(c, &t);
}

// Megatron's settings every searched configuration shares (plan keeps them when the section
// names no configuration).
std::vector<std::string> shared_parallel_keys() {
  return {"grad_reduce_in_fp32",      "overlap_grad_reduce", "overlap_param_gather",
          "align_param_gather",       "ddp_bucket_size",     "overlap_p2p_comm",
          "tp_comm_overlap",          "cp_comm_type",        "fp8_recipe",
          "moe_token_dispatcher_type"};
}

void parse_shared_settings(const ConfigMap& p, ParallelConfig* c) {
  c->grad_reduce_in_fp32 = p.boolean_or("grad_reduce_in_fp32", true);
  c->overlap_grad_reduce = p.boolean_or("overlap_grad_reduce", false);
  c->overlap_param_gather = p.boolean_or("overlap_param_gather", false);
  c->tp_comm_overlap = p.boolean_or("tp_comm_overlap", false);
  c->overlap_p2p_comm = p.boolean_or("overlap_p2p_comm", false);
  c->cp_comm_type = p.text_or("cp_comm_type", "p2p");
  if (!is_cp_comm_type(c->cp_comm_type))
    p.fail("cp_comm_type",
           fmt::format(
               "'{}'; expected {}{}", c->cp_comm_type, cp_comm_type_choices(),
               c->cp_comm_type == "a2a+p2p" ? " (the hierarchical a2a+p2p is not modelled)" : ""));
  c->fp8_recipe = p.text_or("fp8_recipe", "delayed");
  if (!is_fp8_recipe(c->fp8_recipe))
    p.fail("fp8_recipe", fmt::format("'{}'; expected {} (Megatron's mxfp8, blockwise and custom "
                                     "recipes are not modelled)",
                                     c->fp8_recipe, fp8_recipe_choices()));
  // Megatron's token dispatcher: the model prices its all-to-all one (each token sent once per
  // chosen expert, hwmodels/transformer.cc layer_tp_comms); the others are refused, not ignored.
  if (p.has("moe_token_dispatcher_type")) {
    const std::string d = p.text_or("moe_token_dispatcher_type", "alltoall");
    if (d != "alltoall")
      p.fail("moe_token_dispatcher_type",
             fmt::format("'{}'; expected alltoall, the dispatcher the model prices (each token "
                         "sent once per chosen expert){}",
                         d,
                         d == "flex" ? "; flex (DeepEP or HybridEP: one copy per destination "
                                       "rank or node) is not modelled"
                         : d == "allgather"
                             ? "; allgather (every rank gathers the expert group's tokens) is "
                               "not modelled"
                             : ""));
  }
  // Megatron asserts it ("Must use --overlap-param-gather with --overlap-grad-reduce").
  if (c->overlap_param_gather && !c->overlap_grad_reduce)
    p.fail("overlap_param_gather",
           "true without overlap_grad_reduce; expected overlap_grad_reduce: true with it (Megatron "
           "requires both)");
  // Megatron reads these two only with the overlaps they tune: refused rather than ignored.
  c->align_param_gather = p.boolean_or("align_param_gather", true);
  if (p.has("align_param_gather") && !c->overlap_param_gather)
    p.fail("align_param_gather",
           "given without overlap_param_gather; expected it only with overlap_param_gather: true");
  c->ddp_bucket_size = static_cast<double>(p.integer_or("ddp_bucket_size", 0, 1, 1LL << 50));
  if (p.has("ddp_bucket_size") && !c->overlap_grad_reduce)
    p.fail("ddp_bucket_size",
           "given without overlap_grad_reduce; expected it only with overlap_grad_reduce: true "
           "(without it Megatron reduces the whole buffer at once)");
}

struct ParallelExtras {
  int dp_given = 0;
  int layers_per_virtual = 0;
};

ParallelExtras parse_parallel(const ConfigMap& p, Scenario* s) {
  p.check_keys(scenario_keys("parallel"));
  ParallelConfig& c = s->parallel;
  parse_shared_settings(p, &c);
  ParallelExtras x;
  c.tensor_parallel = static_cast<int>(p.integer_or("tensor_model_parallel_size", 1));
  c.pipeline_parallel = static_cast<int>(p.integer_or("pipeline_model_parallel_size", 1));
  x.dp_given = static_cast<int>(p.integer_or("data_parallel_size", 0, 1));
  x.layers_per_virtual =
      static_cast<int>(p.integer_or("num_layers_per_virtual_pipeline_stage", 0, 1));
  c.micro_batch_size = static_cast<int>(p.integer("micro_batch_size"));
  c.global_batch_size = static_cast<int>(p.integer("global_batch_size"));
  c.sequence_parallel = p.boolean_or("sequence_parallel", false);
  c.recompute = p.choice_or("recompute_granularity", "none", {"none", "selective", "full"});
  bool distributed = p.boolean_or("use_distributed_optimizer", false);
  c.zero_stage = static_cast<int>(p.integer_or("zero_stage", distributed ? 1 : 0, 0));
  if (c.zero_stage > 3)
    p.fail("zero_stage", fmt::format("{}; expected 0, 1, 2 or 3", c.zero_stage));
  c.zero3_gather = p.choice_or("zero3_gather", "layer", zero3_gather_names());
  if (p.has("zero3_gather") && c.zero_stage != 3)
    p.fail(
        "zero3_gather",
        fmt::format("given with zero_stage {}; expected it only with zero_stage 3", c.zero_stage));
  c.optimizer_offload = p.boolean_or("optimizer_offload", false);
  c.context_parallel = static_cast<int>(p.integer_or("context_parallel_size", 1));
  c.expert_parallel = static_cast<int>(p.integer_or("expert_model_parallel_size", 1));
  c.expert_tensor_parallel = static_cast<int>(p.integer_or("expert_tensor_parallel_size", 0, 1));
  c.fp8 = p.choice_or("fp8", "off", fp8_format_names());
  if (p.has("fp8_recipe") && c.fp8 == "off")
    p.fail("fp8_recipe", "given with fp8 off; expected it only with fp8: e4m3 or hybrid");
  c.schedule = p.text_or("schedule", c.virtual_stages > 1 ? "interleaved" : "1f1b");
  s->first_stage_layers = static_cast<int>(p.integer_or("decoder_first_pipeline_num_layers", 0, 1));
  s->last_stage_layers = static_cast<int>(p.integer_or("decoder_last_pipeline_num_layers", 0, 1));
  s->microbatch_group_size =
      static_cast<int>(p.integer_or("microbatch_group_size_per_vp_stage", 0, 1));
  s->pipeline_layout = p.text_or("pipeline_model_parallel_layout", "");
  if (p.has("pipeline_model_parallel_layout") && s->pipeline_layout.empty())
    p.fail("pipeline_model_parallel_layout",
           "empty; expected a layout such as \"Et*4|(t*4|)*6,t*4L\"");
  return x;
}

// Writes the overridden values (range-checked, errors naming the flag) without validating the
// combination.
void set_override_values(Scenario* s, const ParallelOverrides& o) {
  ParallelConfig& c = s->parallel;
  auto positive = [s](const char* flag, int v) {
    if (v < 1) throw ConfigError(s->file, flag, fmt::format("{}; expected an integer >= 1", v));
    return v;
  };
  if (o.tp) c.tensor_parallel = positive("--tp", *o.tp);
  if (o.pp) c.pipeline_parallel = positive("--pp", *o.pp);
  if (o.dp) positive("--dp", *o.dp);
  if (o.micro_batch_size) c.micro_batch_size = positive("--micro-batch-size", *o.micro_batch_size);
  if (o.recompute) {
    Recompute r;
    if (!parse_recompute(*o.recompute, &r)) {
      throw ConfigError(s->file, "--recompute",
                        fmt::format("'{}'; expected none, selective or full", *o.recompute));
    }
    c.recompute = *o.recompute;
  }
  if (o.cp) c.context_parallel = positive("--cp", *o.cp);
  if (o.ep) c.expert_parallel = positive("--ep", *o.ep);
  if (o.etp) c.expert_tensor_parallel = positive("--etp", *o.etp);
  if (o.fp8) {
    if (!is_fp8_format(*o.fp8))
      throw ConfigError(s->file, "--fp8",
                        fmt::format("'{}'; expected {}", *o.fp8, fp8_format_choices()));
    c.fp8 = *o.fp8;
  }
  if (o.sequence_parallel) c.sequence_parallel = *o.sequence_parallel;
  if (o.zero_stage) {
    if (*o.zero_stage < 0 || *o.zero_stage > 3) {
      throw ConfigError(s->file, "--zero-stage",
                        fmt::format("{}; expected 0, 1, 2 or 3", *o.zero_stage));
    }
    c.zero_stage = *o.zero_stage;
  }
  if (o.zero3_gather) {
    if (!is_zero3_gather(*o.zero3_gather))
      throw ConfigError(s->file, "--zero3-gather",
                        fmt::format("'{}'; expected {}", *o.zero3_gather, zero3_gather_choices()));
    if (c.zero_stage != 3)
      throw ConfigError(s->file, "--zero3-gather",
                        fmt::format("given with ZeRO stage {}; expected it only with stage 3 "
                                    "(--zero-stage 3)",
                                    c.zero_stage));
    c.zero3_gather = *o.zero3_gather;
  }
}

// Keeps the interleaving (layers per virtual stage) only while it still divides the per-stage
// layer count and there is more than one chunk.
int keep_interleaving(const Scenario& s, int lpv) {
  const int p = s.parallel.pipeline_parallel;
  if (lpv <= 0 || s.model.num_layers % p != 0) return 0;
  const int per_stage = s.model.num_layers / p;
  return p > 1 && per_stage % lpv == 0 && per_stage / lpv > 1 ? lpv : 0;
}

}  // namespace

double published_error_pct(const PublishedFigures& pub, double predicted_tflops_per_gpu,
                           double predicted_iteration_s) {
  if (pub.tflops_per_gpu > 0)
    return 100.0 * (predicted_tflops_per_gpu - pub.tflops_per_gpu) / pub.tflops_per_gpu;
  return predicted_iteration_s > 0 ? 100.0 * (pub.iteration_time_s / predicted_iteration_s - 1)
                                   : 0.0;
}

// Errors name the flag where the value came from one (`o`), else the scenario's key.
void validate_parallel(Scenario* s, int dp_given, int layers_per_virtual,
                       const ParallelOverrides& o) {
  ParallelConfig& c = s->parallel;
  const ModelShape& m = s->model;
  auto key = [](const char* yaml, const char* flag, bool given) {
    return std::string(given ? flag : yaml);
  };
  const std::string tp_key = key("parallel.tensor_model_parallel_size", "--tp", o.tp.has_value());
  const std::string pp_key = key("parallel.pipeline_model_parallel_size", "--pp", o.pp.has_value());
  const std::string cp_key = key("parallel.context_parallel_size", "--cp", o.cp.has_value());
  const std::string ep_key = key("parallel.expert_model_parallel_size", "--ep", o.ep.has_value());
  const std::string etp_key =
      key("parallel.expert_tensor_parallel_size", "--etp", o.etp.has_value());
  const std::string fp8_key = key("parallel.fp8", "--fp8", o.fp8.has_value());
  const int gpus = s->num_gpus();
  const int cp = c.context_parallel;
  // In 64 bits: each factor is read up to the int range (the check below refuses the product
  // when it exceeds the cluster).
  const long long tp_pp = 1LL * c.tensor_parallel * cp * c.pipeline_parallel;
  // The product as the user wrote it: t*p, or t*cp*p with context parallelism.
  const std::string prod = cp > 1 ? "t*cp*p" : "t*p";
  const std::string factors =
      cp > 1 ? fmt::format("{}*{}*{}", c.tensor_parallel, cp, c.pipeline_parallel)
             : fmt::format("{}*{}", c.tensor_parallel, c.pipeline_parallel);
  if (gpus % tp_pp != 0) {
    // The key of the first factor that alone does not divide the GPUs (t, cp, p); where each
    // does, their product is too large and the last one written above 1 is named.
    auto culprit_key = [&]() -> const std::string& {
      if (gpus % c.tensor_parallel != 0) return tp_key;
      if (gpus % cp != 0) return cp_key;
      if (c.pipeline_parallel > 1) return pp_key;
      return cp > 1 ? cp_key : tp_key;
    };
    const std::string& culprit = culprit_key();
    throw ConfigError(s->file, culprit,
                      fmt::format("{} = {} = {} does not divide the {} GPUs ({} nodes x {}); "
                                  "expected {} to divide {}",
                                  prod, factors, tp_pp, gpus, s->topology.nodes,
                                  s->topology.node.gpus_per_node, prod, gpus));
  }
  c.data_parallel = static_cast<int>(gpus / tp_pp);
  if (dp_given > 0 && dp_given != c.data_parallel) {
    throw ConfigError(s->file, key("parallel.data_parallel_size", "--dp", o.dp.has_value()),
                      fmt::format("{} does not match GPUs / ({}) = {} / {}; expected {}", dp_given,
                                  prod, gpus, tp_pp, c.data_parallel));
  }
  if (m.num_attention_heads % c.tensor_parallel != 0) {
    throw ConfigError(s->file, tp_key,
                      fmt::format("{} does not divide num_attention_heads {}; expected a divisor",
                                  c.tensor_parallel, m.num_attention_heads));
  }
  if (kv_heads(m) % c.tensor_parallel != 0) {
    throw ConfigError(s->file, tp_key,
                      fmt::format("{} does not divide num_query_groups {} (Megatron splits the "
                                  "key/value heads over TP); expected a divisor",
                                  c.tensor_parallel, kv_heads(m)));
  }
  if (cp > 1) {
    if (m.seq_length % (2 * cp) != 0)
      throw ConfigError(s->file, cp_key,
                        fmt::format("{}: 2 x cp = {} does not divide seq_length {} (each rank "
                                    "holds two chunks for causal load balance); expected a "
                                    "divisor",
                                    cp, 2 * cp, m.seq_length));
    if (attention_window(m) > 0)
      throw ConfigError(s->file, cp_key,
                        fmt::format("{} with a sliding attention window (model.window_size {}): "
                                    "context parallelism over a window is not modelled; "
                                    "expected 1",
                                    cp, m.window_size));
    if (!s->flash_attention)
      throw ConfigError(s->file, cp_key,
                        fmt::format("{} needs fused attention; expected model.attention_backend "
                                    "auto (the default), flash or fused",
                                    cp));
    // Ulysses scatters each TP rank's heads and key/value heads over the CP group.
    if (c.cp_comm_type == "a2a" && ((m.num_attention_heads / c.tensor_parallel) % cp != 0 ||
                                    (kv_heads(m) / c.tensor_parallel) % cp != 0))
      throw ConfigError(s->file, "parallel.cp_comm_type",
                        fmt::format("a2a with cp = {}: each TP rank's {} heads and {} key/value "
                                    "heads must split over the CP group; expected cp to divide "
                                    "both, or p2p / all_gather",
                                    cp, m.num_attention_heads / c.tensor_parallel,
                                    kv_heads(m) / c.tensor_parallel));
  }
  if (c.expert_parallel > 1 && m.num_experts == 0)
    throw ConfigError(
        s->file, ep_key,
        fmt::format("{} for a dense model; expected 1 (or model.num_experts)", c.expert_parallel));
  if (m.num_experts == 0 && c.expert_tensor_parallel > 1)
    throw ConfigError(s->file, etp_key,
                      fmt::format("{} for a dense model; expected 1 (expert tensor parallelism "
                                  "needs model.num_experts)",
                                  c.expert_tensor_parallel));
  if (m.num_experts > 0) {
    if (m.num_experts % c.expert_parallel != 0)
      throw ConfigError(s->file, ep_key,
                        fmt::format("{} does not divide num_experts {}; expected a divisor",
                                    c.expert_parallel, m.num_experts));
    const int etp = c.expert_tp();
    if (etp != 1 && etp != c.tensor_parallel)
      throw ConfigError(
          s->file, etp_key,
          fmt::format("{}; expected 1 or tensor_model_parallel_size ({})", etp, c.tensor_parallel));
    const long long ranks = 1LL * c.tensor_parallel * cp * c.data_parallel;
    if (ranks % (1LL * etp * c.expert_parallel) != 0)
      throw ConfigError(s->file, ep_key,
                        fmt::format("ep x etp = {} x {} does not divide the {} ranks of a "
                                    "pipeline stage (t*cp*d); expected a divisor",
                                    c.expert_parallel, etp, ranks));
    if (c.tensor_parallel > 1 && !c.sequence_parallel)
      throw ConfigError(s->file, "parallel.sequence_parallel",
                        "false with tensor parallelism and MoE layers; expected true (Megatron "
                        "requires sequence parallelism for MoE with TP)");
  }
  if (c.overlap_param_gather && (c.zero_stage < 1 || c.zero_stage > 2))
    throw ConfigError(s->file, "parallel.overlap_param_gather",
                      fmt::format("true with zero_stage {}; expected the distributed optimizer "
                                  "(use_distributed_optimizer: true, zero_stage 1 or 2)",
                                  c.zero_stage));
  if (c.tp_comm_overlap && !(c.sequence_parallel && c.tensor_parallel > 1))
    throw ConfigError(s->file, "parallel.tp_comm_overlap",
                      "true without sequence parallelism and t > 1; expected false (Megatron "
                      "overlaps the sequence-parallel all-gathers and reduce-scatters)");
  if (c.fp8 != "off" && s->profile.gpu.peak_flops[static_cast<int>(DType::kFp8)] <= 0)
    throw ConfigError(s->file, fp8_key,
                      fmt::format("{}, but profile {} gives no FP8 peak (gpu.peak_tflops.fp8); "
                                  "expected off",
                                  c.fp8, s->profile.name));
  if (!s->pipeline_layout.empty()) {
    apply_pipeline_layout(s, pp_key, layers_per_virtual);
  } else if (s->uneven_split()) {
    validate_uneven_split(*s, pp_key, layers_per_virtual);
  } else if (m.num_layers % c.pipeline_parallel != 0) {
    throw ConfigError(s->file, pp_key,
                      fmt::format("{} does not divide num_layers {}; expected a divisor (or an "
                                  "uneven split: parallel.decoder_first_pipeline_num_layers / "
                                  "decoder_last_pipeline_num_layers)",
                                  c.pipeline_parallel, m.num_layers));
  }
  const int per_stage = m.num_layers / c.pipeline_parallel;
  if (s->pipeline_layout.empty()) c.virtual_stages = 1;
  if (layers_per_virtual > 0) {
    if (c.pipeline_parallel < 2) {
      throw ConfigError(s->file, "parallel.num_layers_per_virtual_pipeline_stage",
                        "interleaving needs pipeline_model_parallel_size >= 2; expected the key "
                        "to be absent");
    }
    if (per_stage % layers_per_virtual != 0) {
      throw ConfigError(s->file, "parallel.num_layers_per_virtual_pipeline_stage",
                        fmt::format("{} does not divide the {} layers per pipeline stage; "
                                    "expected a divisor of {}",
                                    layers_per_virtual, per_stage, per_stage));
    }
    c.virtual_stages = per_stage / layers_per_virtual;
  }
  const long long per_step = 1LL * c.micro_batch_size * c.data_parallel;
  if (c.global_batch_size % per_step != 0) {
    throw ConfigError(
        s->file,
        key("parallel.global_batch_size", "--micro-batch-size", o.micro_batch_size.has_value()),
        fmt::format("global batch {} is not a multiple of micro_batch_size x "
                    "data-parallel size = {} x {}; expected a multiple of {}",
                    c.global_batch_size, c.micro_batch_size, c.data_parallel, per_step));
  }
  if (c.tensor_parallel == 1) c.sequence_parallel = false;
}

std::vector<std::string> scenario_keys(const std::string& section) {
  std::vector<std::string> keys;
  if (section == "model") {
    keys = model_shape_keys();
    for (const char* k : {"preset", "hf_config", "attention_backend"}) keys.push_back(k);
  } else if (section == "cluster") {
    keys = {"profile",
            "nodes",
            "gpus_per_node",
            "fabric",
            "oversubscription",
            "leaf_ports",
            "slow_gpus",
            "slow_nodes",
            "degraded_nics",
            "failed_nics",
            "background_flows",
            "failed_spine_links",
            "degraded_spine_links"};
  } else if (section == "parallel") {
    keys = {"tensor_model_parallel_size",
            "pipeline_model_parallel_size",
            "data_parallel_size",
            "num_layers_per_virtual_pipeline_stage",
            "pipeline_model_parallel_layout",
            "micro_batch_size",
            "global_batch_size",
            "sequence_parallel",
            "recompute_granularity",
            "zero_stage",
            "use_distributed_optimizer",
            "optimizer_offload",
            "schedule",
            "decoder_first_pipeline_num_layers",
            "decoder_last_pipeline_num_layers",
            "context_parallel_size",
            "expert_model_parallel_size",
            "expert_tensor_parallel_size",
            "fp8",
            "zero3_gather",
            "microbatch_group_size_per_vp_stage"};
    for (const std::string& k : shared_parallel_keys()) keys.push_back(k);
  }
  return keys;
}

Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::string& base_dir, const ParallelOverrides& overrides,
                        ParallelSection section) {
  ConfigMap root(parse_yaml(text, file), file, "");
  root.check_keys({"name", "description", "group", "model", "cluster", "parallel", "published"});
  Scenario s;
  s.file = file;
  s.group = root.text_or("group", "");
  parse_model(root.child("model"), base_dir, &s);
  parse_cluster(root.child("cluster"), base_dir, &s);
  if (root.has("published")) {
    ConfigMap pub = root.child("published");
    pub.check_keys({"tflops_per_gpu", "iteration_time_s", "tokens_per_s_per_gpu", "source"});
    PublishedFigures f;
    f.tflops_per_gpu = pub.positive_or("tflops_per_gpu", 0.0);
    f.iteration_time_s = pub.positive_or("iteration_time_s", 0.0);
    f.tokens_per_s_per_gpu = pub.positive_or("tokens_per_s_per_gpu", 0.0);
    f.source = pub.text_or("source", "");
    if (f.tflops_per_gpu <= 0 && f.iteration_time_s <= 0 && f.tokens_per_s_per_gpu <= 0)
      pub.fail("tflops_per_gpu",
               "missing; expected tflops_per_gpu, iteration_time_s or tokens_per_s_per_gpu");
    if (f.iteration_time_s > 0 && f.tokens_per_s_per_gpu > 0)
      pub.fail("tokens_per_s_per_gpu", "given with iteration_time_s; expected one of them");
    s.published = f;
  }
  if (section == ParallelSection::kOptional) {
    const bool none = !root.has("parallel");
    // A section of only the batch and shared settings names no configuration either.
    bool batch_only = !none && root.raw("parallel").size() > 0;
    std::string names_config;  // the first key that makes the section a configuration
    if (!none)
      for (const auto& kv : root.raw("parallel")) {
        const std::string k = kv.first.as<std::string>();
        bool shared = k == "global_batch_size";
        for (const std::string& sk : shared_parallel_keys()) shared = shared || k == sk;
        batch_only = batch_only && shared;
        if (!shared && names_config.empty()) names_config = k;
      }
    // A configuration without its microbatch: say which key made it one (a user who meant only
    // `fp8: hybrid` for the search wants `plan --fp8 on`).
    const YAML::Node section_node = none ? YAML::Node() : root.raw("parallel");
    if (!none && !batch_only && section_node.IsMap() && !section_node["micro_batch_size"])
      root.child("parallel")
          .fail("micro_batch_size",
                fmt::format(
                    "missing; expected an integer >= 1 ('{}' makes this section a "
                    "configuration; a section of only global_batch_size and the shared "
                    "settings leaves the configuration to the search, whose flags constrain it)",
                    names_config));
    if (none || batch_only) {
      s.has_parallel = false;
      s.parallel = ParallelConfig{};
      if (!none) {
        const ConfigMap p = root.child("parallel");
        std::vector<std::string> keys = shared_parallel_keys();
        keys.push_back("global_batch_size");
        p.check_keys(keys);
        parse_shared_settings(p, &s.parallel);
      }
      s.parallel.global_batch_size =
          none ? 1536 : static_cast<int>(root.child("parallel").integer("global_batch_size", 1));
      if (overrides.any())
        throw ConfigError(file, "parallel",
                          "missing; the parallel overrides need a configuration to override");
      return s;
    }
  }
  ParallelExtras x = parse_parallel(root.child("parallel"), &s);
  int lpv = x.layers_per_virtual;
  if (overrides.any()) {
    set_override_values(&s, overrides);
    lpv = keep_interleaving(s, lpv);
  }
  validate_parallel(&s, overrides.dp.value_or(x.dp_given), lpv, overrides);
  if (!root.child("parallel").has("schedule")) {
    s.parallel.schedule = s.parallel.virtual_stages > 1 ? "interleaved" : "1f1b";
  }
  // Checked once the schedule is known (written, or interleaved when there are chunks).
  if (s.parallel.overlap_p2p_comm && !s.parallel.p2p_overlappable())
    throw ConfigError(s.file, "parallel.overlap_p2p_comm",
                      "true without the interleaved schedule over p > 1; expected false (Megatron "
                      "overlaps only the interleaved schedule's sends and receives)");
  // 1F1B-R is 1F1B with full recomputation (its R passes re-run each layer's forward): another
  // granularity would leave them nothing to recompute.
  if (s.parallel.schedule == "1f1b-r" && s.parallel.recompute != "full")
    throw ConfigError(s.file,
                      overrides.recompute ? "--recompute" : "parallel.recompute_granularity",
                      fmt::format("{} with schedule 1f1b-r; expected full (1F1B-R recomputes every "
                                  "layer before its backward)",
                                  s.parallel.recompute));
  // Megatron's checks (schedules.py, forward_backward_pipelining_with_interleaving), read only by
  // that schedule: refused elsewhere rather than ignored.
  if (const int g = s.microbatch_group_size; g > 0) {
    const std::string key = "parallel.microbatch_group_size_per_vp_stage";
    const int p = s.parallel.pipeline_parallel;
    const long long m = s.num_microbatches();
    if (!s.parallel.p2p_overlappable())
      throw ConfigError(s.file, key,
                        fmt::format("{} without the interleaved schedule over p > 1; expected it "
                                    "only there (Megatron's interleaved schedule reads it)",
                                    g));
    if (g < p || g > m)
      throw ConfigError(
          s.file, key,
          fmt::format("{}; expected p = {} <= g <= {} microbatches per pipeline", g, p, m));
    if (m % g != 0 && m % g < p)
      throw ConfigError(s.file, key,
                        fmt::format("{} leaves a last group of {} < p = {} of the {} "
                                    "microbatches; expected m mod g to be 0 or at least p",
                                    g, m % g, p, m));
  }
  // Tokens per second per GPU is the step time of global_batch x seq_length tokens.
  if (s.published && s.published->tokens_per_s_per_gpu > 0)
    s.published->iteration_time_s = double(s.parallel.global_batch_size) * s.model.seq_length /
                                    (s.published->tokens_per_s_per_gpu * s.num_gpus());
  return s;
}

void require_uniform_cluster(const Scenario& s, const std::string& command) {
  if (s.topology.symmetric()) return;
  const TopologySpec& t = s.topology;
  throw ConfigError(s.file,
                    !t.gpu_slowdown.empty()          ? "cluster.slow_gpus"
                    : !t.nic_slowdown.empty()        ? "cluster.degraded_nics"
                    : !t.nic_failed.empty()          ? "cluster.failed_nics"
                    : !t.background_flows.empty()    ? "cluster.background_flows"
                    : t.num_failed_spine_links() > 0 ? "cluster.failed_spine_links"
                                                     : "cluster.degraded_spine_links",
                    fmt::format("`{}` assumes every GPU and NIC runs at the profile's rate, alone "
                                "on the fabric; `pipewright simulate` takes slow GPUs, degraded or "
                                "failed NICs and spine links, and background flows",
                                command));
}

Scenario load_scenario(const std::string& path, const ParallelOverrides& overrides,
                       ParallelSection section) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_scenario(read_file(path), path, dir, overrides, section);
}

void apply_overrides(Scenario* s, const ParallelOverrides& o) {
  const ParallelConfig& c = s->parallel;
  int lpv = c.virtual_stages > 1 ? s->model.num_layers / c.pipeline_parallel / c.virtual_stages : 0;
  set_override_values(s, o);
  validate_parallel(s, o.dp.value_or(0), keep_interleaving(*s, lpv), o);
}

}  // namespace pw::hw
