#include "core/plan_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/file_io.h"
#include "core/validator.h"

namespace pw {

namespace {
bool one_of(const std::vector<std::string>& names, const std::string& x) {
  return std::find(names.begin(), names.end(), x) != names.end();
}
}  // namespace

const std::vector<std::string>& cp_comm_type_names() {
  static const std::vector<std::string> names{"p2p", "all_gather", "a2a"};
  return names;
}

std::string cp_comm_type_choices() { return "p2p, all_gather or a2a"; }

bool is_cp_comm_type(const std::string& t) { return one_of(cp_comm_type_names(), t); }

const std::vector<std::string>& fp8_format_names() {
  static const std::vector<std::string> names{"off", "e4m3", "hybrid"};
  return names;
}

std::string fp8_format_choices() { return "off, e4m3 or hybrid"; }

bool is_fp8_format(const std::string& f) { return one_of(fp8_format_names(), f); }

const std::vector<std::string>& fp8_recipe_names() {
  static const std::vector<std::string> names{"delayed", "tensorwise"};
  return names;
}

std::string fp8_recipe_choices() { return "delayed or tensorwise"; }

bool is_fp8_recipe(const std::string& r) { return one_of(fp8_recipe_names(), r); }

std::string cp_label(const ParallelConfig& c) {
  if (c.context_parallel <= 1) return "";
  return fmt::format(" cp={}{}", c.context_parallel,
                     c.cp_comm_type == "p2p" ? "" : " " + c.cp_comm_type);
}

const std::vector<std::string>& zero3_gather_names() {
  static const std::vector<std::string> names{"layer", "tensor", "stage"};
  return names;
}

std::string zero3_gather_choices() { return "layer, tensor or stage"; }

bool is_zero3_gather(const std::string& g) { return one_of(zero3_gather_names(), g); }
namespace {

constexpr const char* kPlanFormat = "pipewright-plan";
constexpr const char* kRunFormat = "pipewright-measured-run";
constexpr std::int64_t kIntMax = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kTimeMax = std::numeric_limits<std::int64_t>::max();

using R = DocReader;

void check_header(const Doc& d, const R& r, const char* format, int version) {
  const std::string f = r.as_string(r.at(d, "", "format"), "format");
  if (f != format) r.fail("format", fmt::format("'{}', got '{}'", format, f));
  const std::int64_t v = r.as_int(r.at(d, "", "version"), "version", 0, kIntMax);
  if (v != version)
    r.fail("version",
           fmt::format("{} (this pipewright reads version {}), got {}", version, version, v));
}

int get_int(const Doc& obj, const R& r, const std::string& path, const char* key,
            std::int64_t lo = 0) {
  return static_cast<int>(r.as_int(r.at(obj, path, key), R::join(path, key), lo, kIntMax));
}
std::string get_str(const Doc& obj, const R& r, const std::string& path, const char* key) {
  return r.as_string(r.at(obj, path, key), R::join(path, key));
}

}  // namespace

const std::vector<std::string>& model_shape_keys() {
  static const std::vector<std::string> kKeys = {"name",
                                                 "num_layers",
                                                 "hidden_size",
                                                 "num_attention_heads",
                                                 "ffn_hidden_size",
                                                 "seq_length",
                                                 "vocab_size",
                                                 "num_query_groups",
                                                 "kv_channels",
                                                 "window_size",
                                                 "qk_layernorm",
                                                 "swiglu",
                                                 "normalization",
                                                 "untie_embeddings_and_output_weights",
                                                 "position_embedding_type",
                                                 "add_bias_linear",
                                                 "add_qkv_bias",
                                                 "q_lora_rank",
                                                 "kv_lora_rank",
                                                 "qk_head_dim",
                                                 "qk_pos_emb_head_dim",
                                                 "v_head_dim",
                                                 "num_experts",
                                                 "moe_router_topk",
                                                 "moe_ffn_hidden_size",
                                                 "moe_shared_expert_intermediate_size",
                                                 "moe_layer_freq",
                                                 "moe_first_dense_layers",
                                                 "moe_expert_capacity_factor",
                                                 "mtp_num_layers",
                                                 "use_flash_attn"};
  return kKeys;
}

namespace {

// Keys beyond GPT-3's shape are written only when they differ from the default, so plans of
// GPT-style models keep their form; all are read when present.
Doc model_to_doc(const ModelShape& m) {
  Doc d{{"name", m.name},
        {"num_layers", m.num_layers},
        {"hidden_size", m.hidden_size},
        {"num_attention_heads", m.num_attention_heads},
        {"ffn_hidden_size", m.ffn_hidden_size},
        {"seq_length", m.seq_length},
        {"vocab_size", m.vocab_size}};
  const ModelShape def;
  if (m.num_query_groups != def.num_query_groups) d["num_query_groups"] = m.num_query_groups;
  if (m.kv_channels != def.kv_channels) d["kv_channels"] = m.kv_channels;
  if (m.window_size != def.window_size) d["window_size"] = m.window_size;
  if (m.qk_layernorm != def.qk_layernorm) d["qk_layernorm"] = m.qk_layernorm;
  if (m.swiglu != def.swiglu) d["swiglu"] = m.swiglu;
  if (m.rmsnorm != def.rmsnorm) d["normalization"] = "RMSNorm";
  if (m.untie_embeddings != def.untie_embeddings)
    d["untie_embeddings_and_output_weights"] = m.untie_embeddings;
  if (m.rope != def.rope) d["position_embedding_type"] = "rope";
  if (m.bias != def.bias) d["add_bias_linear"] = m.bias;
  if (m.qkv_bias != def.qkv_bias) d["add_qkv_bias"] = m.qkv_bias;
  if (m.mla()) {
    d["q_lora_rank"] = m.q_lora_rank;
    d["kv_lora_rank"] = m.kv_lora_rank;
    d["qk_head_dim"] = m.qk_head_dim;
    d["qk_pos_emb_head_dim"] = m.qk_pos_emb_head_dim;
    d["v_head_dim"] = m.v_head_dim;
  }
  if (m.num_experts != def.num_experts) {
    d["num_experts"] = m.num_experts;
    d["moe_router_topk"] = m.moe_router_topk;
    d["moe_ffn_hidden_size"] = m.moe_ffn_hidden_size;
    d["moe_shared_expert_intermediate_size"] = m.moe_shared_expert_size;
    d["moe_layer_freq"] = m.moe_layer_freq;
    d["moe_first_dense_layers"] = m.moe_first_dense_layers;
    d["moe_expert_capacity_factor"] = m.moe_capacity_factor;
  }
  if (m.mtp_num_layers != def.mtp_num_layers) d["mtp_num_layers"] = m.mtp_num_layers;
  return d;
}

ModelShape model_from_doc(const Doc& d, const R& r) {
  const std::string p = "model";
  r.expect_keys(d, p, model_shape_keys());
  ModelShape m;
  m.name = get_str(d, r, p, "name");
  m.num_layers = get_int(d, r, p, "num_layers");
  m.hidden_size = get_int(d, r, p, "hidden_size");
  m.num_attention_heads = get_int(d, r, p, "num_attention_heads");
  m.ffn_hidden_size = get_int(d, r, p, "ffn_hidden_size");
  m.seq_length = get_int(d, r, p, "seq_length");
  m.vocab_size = get_int(d, r, p, "vocab_size");
  auto opt_int = [&](const char* key, int* out, std::int64_t lo = 0) {
    if (r.find(d, key)) *out = get_int(d, r, p, key, lo);
  };
  auto opt_bool = [&](const char* key, bool* out) {
    if (const Doc* v = r.find(d, key)) *out = r.as_bool(*v, R::join(p, key));
  };
  opt_int("num_query_groups", &m.num_query_groups);
  opt_int("kv_channels", &m.kv_channels);
  opt_int("window_size", &m.window_size);
  opt_int("q_lora_rank", &m.q_lora_rank);
  opt_int("kv_lora_rank", &m.kv_lora_rank);
  opt_int("qk_head_dim", &m.qk_head_dim);
  opt_int("qk_pos_emb_head_dim", &m.qk_pos_emb_head_dim);
  opt_int("v_head_dim", &m.v_head_dim);
  opt_bool("qk_layernorm", &m.qk_layernorm);
  opt_bool("swiglu", &m.swiglu);
  if (r.find(d, "normalization")) {
    const std::string n = get_str(d, r, p, "normalization");
    if (n != "LayerNorm" && n != "RMSNorm")
      r.fail("model.normalization", fmt::format("LayerNorm or RMSNorm, got '{}'", n));
    m.rmsnorm = n == "RMSNorm";
  }
  opt_bool("untie_embeddings_and_output_weights", &m.untie_embeddings);
  if (r.find(d, "position_embedding_type")) {
    const std::string n = get_str(d, r, p, "position_embedding_type");
    if (n != "rope" && n != "learned_absolute")
      r.fail("model.position_embedding_type", fmt::format("rope or learned_absolute, got '{}'", n));
    m.rope = n == "rope";
  }
  opt_bool("add_bias_linear", &m.bias);
  opt_bool("add_qkv_bias", &m.qkv_bias);
  opt_int("num_experts", &m.num_experts);
  opt_int("moe_router_topk", &m.moe_router_topk);
  opt_int("moe_ffn_hidden_size", &m.moe_ffn_hidden_size);
  opt_int("moe_shared_expert_intermediate_size", &m.moe_shared_expert_size);
  opt_int("moe_layer_freq", &m.moe_layer_freq, 1);
  opt_int("moe_first_dense_layers", &m.moe_first_dense_layers);
  opt_int("mtp_num_layers", &m.mtp_num_layers);
  if (const Doc* v = r.find(d, "moe_expert_capacity_factor")) {
    m.moe_capacity_factor = r.as_double(*v, "model.moe_expert_capacity_factor");
    if (!(m.moe_capacity_factor >= 0 && m.moe_capacity_factor <= 1e6))
      r.fail("model.moe_expert_capacity_factor", "a number >= 0 (0 = dropless)");
  }
  return m;
}

Doc config_to_doc(const ParallelConfig& c) {
  Doc d{{"tensor_parallel", c.tensor_parallel},
        {"pipeline_parallel", c.pipeline_parallel},
        {"data_parallel", c.data_parallel},
        {"virtual_stages", c.virtual_stages},
        {"micro_batch_size", c.micro_batch_size},
        {"global_batch_size", c.global_batch_size},
        {"sequence_parallel", c.sequence_parallel},
        {"recompute", c.recompute},
        {"zero_stage", c.zero_stage},
        {"optimizer_offload", c.optimizer_offload},
        {"schedule", c.schedule}};
  const ParallelConfig def;
  if (c.context_parallel != def.context_parallel) d["context_parallel"] = c.context_parallel;
  if (c.expert_parallel != def.expert_parallel) d["expert_parallel"] = c.expert_parallel;
  if (c.expert_tensor_parallel != def.expert_tensor_parallel)
    d["expert_tensor_parallel"] = c.expert_tensor_parallel;
  if (c.fp8 != def.fp8) d["fp8"] = c.fp8;
  if (c.fp8_recipe != def.fp8_recipe) d["fp8_recipe"] = c.fp8_recipe;
  if (c.grad_reduce_in_fp32 != def.grad_reduce_in_fp32)
    d["grad_reduce_in_fp32"] = c.grad_reduce_in_fp32;
  if (c.overlap_grad_reduce != def.overlap_grad_reduce)
    d["overlap_grad_reduce"] = c.overlap_grad_reduce;
  if (c.overlap_param_gather != def.overlap_param_gather)
    d["overlap_param_gather"] = c.overlap_param_gather;
  if (c.align_param_gather != def.align_param_gather)
    d["align_param_gather"] = c.align_param_gather;
  if (c.overlap_p2p_comm != def.overlap_p2p_comm) d["overlap_p2p_comm"] = c.overlap_p2p_comm;
  if (c.ddp_bucket_size != def.ddp_bucket_size)
    d["ddp_bucket_size"] = static_cast<std::int64_t>(c.ddp_bucket_size);
  if (c.tp_comm_overlap != def.tp_comm_overlap) d["tp_comm_overlap"] = c.tp_comm_overlap;
  if (c.cp_comm_type != def.cp_comm_type) d["cp_comm_type"] = c.cp_comm_type;
  if (c.mtp_standalone) d["mtp_standalone"] = true;
  if (c.zero_stage == 3) d["zero3_gather"] = c.zero3_gather;
  return d;
}

ParallelConfig config_from_doc(const Doc& d, const R& r) {
  const std::string p = "config";
  r.expect_keys(d, p,
                {"tensor_parallel",
                 "pipeline_parallel",
                 "data_parallel",
                 "virtual_stages",
                 "micro_batch_size",
                 "global_batch_size",
                 "sequence_parallel",
                 "recompute",
                 "zero_stage",
                 "optimizer_offload",
                 "schedule",
                 "context_parallel",
                 "expert_parallel",
                 "expert_tensor_parallel",
                 "fp8",
                 "fp8_recipe",
                 "grad_reduce_in_fp32",
                 "overlap_grad_reduce",
                 "overlap_param_gather",
                 "align_param_gather",
                 "ddp_bucket_size",
                 "overlap_p2p_comm",
                 "tp_comm_overlap",
                 "cp_comm_type",
                 "mtp_standalone",
                 "zero3_gather"});
  ParallelConfig c;
  c.tensor_parallel = get_int(d, r, p, "tensor_parallel", 1);
  c.pipeline_parallel = get_int(d, r, p, "pipeline_parallel", 1);
  c.data_parallel = get_int(d, r, p, "data_parallel", 1);
  c.virtual_stages = get_int(d, r, p, "virtual_stages", 1);
  c.micro_batch_size = get_int(d, r, p, "micro_batch_size", 1);
  c.global_batch_size = get_int(d, r, p, "global_batch_size", 1);
  c.sequence_parallel = r.as_bool(r.at(d, p, "sequence_parallel"), "config.sequence_parallel");
  c.recompute = get_str(d, r, p, "recompute");
  if (c.recompute != "none" && c.recompute != "selective" && c.recompute != "full")
    r.fail("config.recompute", fmt::format("none, selective or full, got '{}'", c.recompute));
  c.zero_stage = get_int(d, r, p, "zero_stage");
  if (c.zero_stage > 3) r.fail("config.zero_stage", "0..3");
  c.optimizer_offload = r.as_bool(r.at(d, p, "optimizer_offload"), "config.optimizer_offload");
  c.schedule = get_str(d, r, p, "schedule");
  if (r.find(d, "context_parallel")) c.context_parallel = get_int(d, r, p, "context_parallel", 1);
  if (r.find(d, "expert_parallel")) c.expert_parallel = get_int(d, r, p, "expert_parallel", 1);
  if (r.find(d, "expert_tensor_parallel"))
    c.expert_tensor_parallel = get_int(d, r, p, "expert_tensor_parallel", 1);
  if (r.find(d, "fp8")) {
    c.fp8 = get_str(d, r, p, "fp8");
    if (!is_fp8_format(c.fp8))
      r.fail("config.fp8", fmt::format("{}, got '{}'", fp8_format_choices(), c.fp8));
  }
  if (r.find(d, "fp8_recipe")) {
    c.fp8_recipe = get_str(d, r, p, "fp8_recipe");
    if (!is_fp8_recipe(c.fp8_recipe))
      r.fail("config.fp8_recipe", fmt::format("{}, got '{}'", fp8_recipe_choices(), c.fp8_recipe));
    if (c.fp8 == "off" && c.fp8_recipe != ParallelConfig{}.fp8_recipe)
      r.fail("config.fp8_recipe", "absent unless fp8 is e4m3 or hybrid");
  }
  if (const Doc* v = r.find(d, "grad_reduce_in_fp32"))
    c.grad_reduce_in_fp32 = r.as_bool(*v, "config.grad_reduce_in_fp32");
  if (const Doc* v = r.find(d, "overlap_grad_reduce"))
    c.overlap_grad_reduce = r.as_bool(*v, "config.overlap_grad_reduce");
  if (const Doc* v = r.find(d, "overlap_param_gather"))
    c.overlap_param_gather = r.as_bool(*v, "config.overlap_param_gather");
  if (const Doc* v = r.find(d, "align_param_gather"))
    c.align_param_gather = r.as_bool(*v, "config.align_param_gather");
  if (const Doc* v = r.find(d, "overlap_p2p_comm"))
    c.overlap_p2p_comm = r.as_bool(*v, "config.overlap_p2p_comm");
  if (const Doc* v = r.find(d, "ddp_bucket_size"))
    c.ddp_bucket_size =
        static_cast<double>(r.as_int(*v, "config.ddp_bucket_size", 1, std::int64_t{1} << 50));
  if (const Doc* v = r.find(d, "tp_comm_overlap"))
    c.tp_comm_overlap = r.as_bool(*v, "config.tp_comm_overlap");
  if (const Doc* v = r.find(d, "mtp_standalone"))
    c.mtp_standalone = r.as_bool(*v, "config.mtp_standalone");
  if (r.find(d, "cp_comm_type")) {
    c.cp_comm_type = get_str(d, r, p, "cp_comm_type");
    if (!is_cp_comm_type(c.cp_comm_type))
      r.fail("config.cp_comm_type",
             fmt::format("{}, got '{}'", cp_comm_type_choices(), c.cp_comm_type));
    if (c.context_parallel <= 1 && c.cp_comm_type != ParallelConfig{}.cp_comm_type)
      r.fail("config.cp_comm_type", "absent unless context_parallel > 1");
  }
  if (r.find(d, "zero3_gather")) {
    c.zero3_gather = get_str(d, r, p, "zero3_gather");
    if (!is_zero3_gather(c.zero3_gather))
      r.fail("config.zero3_gather",
             fmt::format("{}, got '{}'", zero3_gather_choices(), c.zero3_gather));
    if (c.zero_stage != 3)
      r.fail("config.zero3_gather",
             fmt::format("absent unless zero_stage is 3, got zero_stage {}", c.zero_stage));
  }
  if (c.overlap_param_gather && !c.overlap_grad_reduce)
    r.fail("config.overlap_param_gather", "false unless overlap_grad_reduce is true");
  if (!c.align_param_gather && !c.overlap_param_gather)
    r.fail("config.align_param_gather", "absent unless overlap_param_gather is true");
  if (c.ddp_bucket_size > 0 && !c.overlap_grad_reduce)
    r.fail("config.ddp_bucket_size", "absent unless overlap_grad_reduce is true");
  if (c.overlap_p2p_comm && !c.p2p_overlappable())
    r.fail("config.overlap_p2p_comm",
           "false unless the schedule is interleaved with virtual_stages > 1 and "
           "pipeline_parallel > 1 (Megatron overlaps only that schedule's transfers)");
  if (c.overlap_param_gather && (c.zero_stage < 1 || c.zero_stage > 2))
    r.fail("config.overlap_param_gather",
           fmt::format("false unless zero_stage is 1 or 2, got zero_stage {}", c.zero_stage));
  if (c.tp_comm_overlap && !(c.sequence_parallel && c.tensor_parallel > 1))
    r.fail("config.tp_comm_overlap",
           "false unless sequence_parallel is true and tensor_parallel > 1");
  return c;
}

std::vector<ActionTiming> timings_from_doc(const Doc& d, const R& r, const Schedule& s) {
  r.expect_array(d, "predicted");
  std::vector<ActionTiming> out;
  out.reserve(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::string p = R::index("predicted", i);
    const Doc& e = d[i];
    if (!e.is_array() || e.size() != 4) r.fail(p, "[device, index, start_ps, end_ps]");
    ActionTiming t;
    t.device =
        static_cast<std::int32_t>(r.as_int(e[0], R::index(p, 0), 0, s.placement.num_devices - 1));
    const auto n = static_cast<std::int64_t>(s.actions[t.device].size());
    t.index = static_cast<std::int32_t>(r.as_int(e[1], R::index(p, 1), 0, n - 1));
    t.start = r.as_int(e[2], R::index(p, 2), 0, kTimeMax);
    t.end = r.as_int(e[3], R::index(p, 3), t.start, kTimeMax);
    out.push_back(t);
  }
  return out;
}

Doc provenance_to_doc(const Provenance& p) {
  Doc d{{"version", p.version},
        {"profile_source", p.profile_source},
        {"created", p.created},
        {"command", p.command}};
  if (!p.prediction_source.empty()) d["prediction_source"] = p.prediction_source;
  return d;
}

Provenance provenance_from_doc(const Doc& d, const R& r) {
  const std::string p = "provenance";
  r.expect_keys(d, p, {"version", "profile_source", "created", "command", "prediction_source"});
  Provenance out{get_str(d, r, p, "version"), get_str(d, r, p, "profile_source"),
                 get_str(d, r, p, "created"), get_str(d, r, p, "command"), ""};
  if (d.contains("prediction_source"))
    out.prediction_source = get_str(d, r, p, "prediction_source");
  return out;
}

}  // namespace

Doc plan_to_doc(const Plan& plan) {
  Doc d = Doc::object();
  d["format"] = kPlanFormat;
  d["version"] = kPlanFormatVersion;
  d["model"] = model_to_doc(plan.model);
  if (plan.flash_attention) d["model"]["use_flash_attn"] = true;
  d["cluster"] = plan.cluster;
  d["config"] = config_to_doc(plan.config);
  d["rank_to_gpu"] = plan.rank_to_gpu;
  d["predicted_iteration_ps"] = plan.predicted_iteration;
  Doc pred = Doc::array();
  for (const ActionTiming& t : plan.predicted)
    pred.push_back(Doc::array({t.device, t.index, t.start, t.end}));
  d["predicted"] = std::move(pred);
  d["provenance"] = provenance_to_doc(plan.provenance);
  d["schedule_checksum"] = schedule_checksum(plan.schedule);
  d["schedule"] = schedule_to_doc(plan.schedule);
  return d;
}

Plan plan_from_doc(const Doc& d, const std::string& source) {
  const R r(source);
  // A scenario (model, cluster, parallel; no format) given where a plan is read: say what it is
  // and how to get a plan, not that its first key is unknown.
  if (!r.find(d, "format") && r.find(d, "parallel"))
    throw ConfigError(source, "format",
                      "a scenario, not a plan; expected a plan file (write one with `pipewright "
                      "plan SCENARIO --emit plan.yaml`)");
  r.expect_keys(
      d, "",
      {"format", "version", "model", "cluster", "config", "rank_to_gpu", "predicted_iteration_ps",
       "predicted", "provenance", "schedule_checksum", "schedule"});
  check_header(d, r, kPlanFormat, kPlanFormatVersion);
  Plan plan;
  // The checksum is checked before the schedule's legality, so a corrupted plan reads as such.
  plan.schedule = schedule_from_doc(r.at(d, "", "schedule"), r, "schedule", false);
  const std::string want = r.as_string(r.at(d, "", "schedule_checksum"), "schedule_checksum");
  const std::string got = schedule_checksum(plan.schedule);
  if (want != got)
    throw ConfigError(source, "schedule_checksum",
                      fmt::format("the schedule does not match its checksum (file says {}, "
                                  "schedule hashes to {}): the plan was edited or corrupted",
                                  want, got));
  validate_schedule(plan.schedule, source);
  plan.model = model_from_doc(r.at(d, "", "model"), r);
  const Doc* fused = r.find(r.at(d, "", "model"), "use_flash_attn");
  plan.flash_attention = fused != nullptr && r.as_bool(*fused, "model.use_flash_attn");
  plan.cluster = r.as_string(r.at(d, "", "cluster"), "cluster");
  plan.config = config_from_doc(r.at(d, "", "config"), r);
  if (plan.config.mtp_standalone) {
    // The depths' stage of their own: the one before the last, which holds the loss alone.
    const Placement& pl = plan.schedule.placement;
    const int per_pipe = pl.stages_per_pipeline();
    if (plan.model.mtp_num_layers <= 0 || per_pipe < 2)
      r.fail("config.mtp_standalone",
             "true without multi-token prediction depths (model.mtp_num_layers) and two "
             "stages; expected false");
    for (const StageInfo& st : pl.stages)
      if (st.index == per_pipe - 1 && st.layer_end > st.layer_begin)
        r.fail("config.mtp_standalone",
               fmt::format("true with {} transformer layers on the last stage; expected the "
                           "loss alone there",
                           st.layer_end - st.layer_begin));
  }
  const Doc& ranks = r.at(d, "", "rank_to_gpu");
  r.expect_array(ranks, "rank_to_gpu");
  for (std::size_t i = 0; i < ranks.size(); ++i)
    plan.rank_to_gpu.push_back(
        static_cast<int>(r.as_int(ranks[i], R::index("rank_to_gpu", i), 0, kIntMax)));
  plan.predicted_iteration =
      r.as_int(r.at(d, "", "predicted_iteration_ps"), "predicted_iteration_ps", 0, kTimeMax);
  plan.predicted = timings_from_doc(r.at(d, "", "predicted"), r, plan.schedule);
  plan.provenance = provenance_from_doc(r.at(d, "", "provenance"), r);
  return plan;
}

std::string plan_to_text(const Plan& plan, DocFormat format) {
  return dump_document(plan_to_doc(plan), format);
}

Plan parse_plan(const std::string& text, DocFormat format, const std::string& source) {
  return plan_from_doc(parse_document(text, format, source), source);
}

Plan load_plan(const std::string& path) {
  return parse_plan(read_file(path), doc_format_for_path(path), path);
}

void save_plan(const std::string& path, const Plan& plan) {
  write_file_atomic(path, plan_to_text(plan, doc_format_for_path(path)));
}

// --- measured runs -----------------------------------------------------------------------------

Doc measured_run_to_doc(const MeasuredRun& run) {
  Doc d = Doc::object();
  d["format"] = kRunFormat;
  d["version"] = kMeasuredRunFormatVersion;
  d["backend"] = run.backend;
  d["device"] = run.device;
  if (!run.optimizer.empty()) d["optimizer"] = run.optimizer;
  if (!run.probe_ms.empty()) d["probe_ms"] = run.probe_ms;
  d["iterations"] = run.iterations;
  d["iteration_time_ps"] = run.iteration_time;
  Doc acts = Doc::array();
  for (const MeasuredAction& m : run.actions)
    acts.push_back(
        Doc::array({m.rank, m.index, std::string(action_kind_name(m.action.kind)), m.action.stage,
                    m.action.microbatch, m.action.stage2, m.action.microbatch2, m.start, m.end}));
  d["actions"] = std::move(acts);
  return d;
}

MeasuredRun measured_run_from_doc(const Doc& d, const std::string& source) {
  const R r(source);
  r.expect_keys(d, "",
                {"format", "version", "backend", "device", "optimizer", "probe_ms", "iterations",
                 "iteration_time_ps", "actions"});
  check_header(d, r, kRunFormat, kMeasuredRunFormatVersion);
  MeasuredRun run;
  run.backend = r.as_string(r.at(d, "", "backend"), "backend");
  run.device = r.as_string(r.at(d, "", "device"), "device");
  if (const Doc* v = r.find(d, "optimizer")) {  // optional: absent in older files
    run.optimizer = r.as_string(*v, "optimizer");
    if (run.optimizer != "sgd" && run.optimizer != "adam")
      r.fail("optimizer", fmt::format("sgd or adam, got '{}'", run.optimizer));
  }
  if (const Doc* v = r.find(d, "probe_ms")) {  // optional: the CPU executor's, since 2026-11-30
    r.expect_array(*v, "probe_ms");
    for (std::size_t i = 0; i < v->size(); ++i) {
      const double ms = r.as_double((*v)[i], R::index("probe_ms", i));
      if (!(ms > 0))
        r.fail(R::index("probe_ms", i), fmt::format("a positive time (ms), got {}", ms));
      run.probe_ms.push_back(ms);
    }
  }
  run.iterations = static_cast<int>(r.as_int(r.at(d, "", "iterations"), "iterations", 1, kIntMax));
  run.iteration_time = r.as_int(r.at(d, "", "iteration_time_ps"), "iteration_time_ps", 0, kTimeMax);
  const Doc& acts = r.at(d, "", "actions");
  r.expect_array(acts, "actions");
  run.actions.reserve(acts.size());
  for (std::size_t i = 0; i < acts.size(); ++i) {
    const std::string p = R::index("actions", i);
    const Doc& e = acts[i];
    if (!e.is_array() || e.size() != 9)
      r.fail(p, "[rank, index, KIND, stage, microbatch, stage2, microbatch2, start_ps, end_ps]");
    MeasuredAction m;
    m.rank = static_cast<std::int32_t>(r.as_int(e[0], R::index(p, 0), 0, kIntMax));
    m.index = static_cast<std::int32_t>(r.as_int(e[1], R::index(p, 1), 0, kIntMax));
    const std::string kind = r.as_string(e[2], R::index(p, 2));
    if (!parse_action_kind(kind, &m.action.kind))
      r.fail(R::index(p, 2), fmt::format("an action kind, got '{}'", kind));
    m.action.stage = static_cast<std::int16_t>(r.as_int(e[3], R::index(p, 3), -1, 32767));
    m.action.microbatch = static_cast<std::int32_t>(r.as_int(e[4], R::index(p, 4), -1, kIntMax));
    m.action.stage2 = static_cast<std::int16_t>(r.as_int(e[5], R::index(p, 5), -1, 32767));
    m.action.microbatch2 = static_cast<std::int32_t>(r.as_int(e[6], R::index(p, 6), -1, kIntMax));
    m.start = r.as_int(e[7], R::index(p, 7), std::numeric_limits<std::int64_t>::min(), kTimeMax);
    m.end = r.as_int(e[8], R::index(p, 8), m.start, kTimeMax);
    run.actions.push_back(m);
  }
  return run;
}

std::string measured_run_to_text(const MeasuredRun& run, DocFormat format) {
  return dump_document(measured_run_to_doc(run), format);
}

MeasuredRun parse_measured_run(const std::string& text, DocFormat format,
                               const std::string& source) {
  return measured_run_from_doc(parse_document(text, format, source), source);
}

MeasuredRun load_measured_run(const std::string& path) {
  return parse_measured_run(read_file(path), doc_format_for_path(path), path);
}

void save_measured_run(const std::string& path, const MeasuredRun& run) {
  write_file_atomic(path, measured_run_to_text(run, doc_format_for_path(path)));
}

}  // namespace pw
