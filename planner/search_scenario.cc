#include "planner/search_scenario.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/profile.h"
#include "planner/search.h"

namespace pw {
namespace {

void check_keys(const YAML::Node& n, const std::string& file, const std::string& path,
                const std::vector<std::string>& valid) {
  if (!n.IsMap()) throw ConfigError(file, path, "expected a mapping");
  std::vector<std::string> seen;
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (std::find(seen.begin(), seen.end(), k) != seen.end())
      throw ConfigError(file, path + "." + k, "given twice; expected each key once");
    seen.push_back(k);
    if (std::find(valid.begin(), valid.end(), k) == valid.end())
      throw ConfigError(file, path + "." + k,
                        "unknown key (did you mean '" + nearest_name(k, valid) + "'?)");
  }
}

template <typename T>
T get(const YAML::Node& n, const std::string& key, const std::string& file, const std::string& path,
      const char* expected) {
  try {
    return n[key].as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError(file, path + "." + key, std::string("expected ") + expected);
  }
}

int positive(const YAML::Node& n, const std::string& key, const std::string& file,
             const std::string& path) {
  const int v = get<int>(n, key, file, path, "a positive integer");
  if (v <= 0) throw ConfigError(file, path + "." + key, "expected a positive integer");
  return v;
}

void parse_model(const YAML::Node& n, const std::string& file, ModelShape* m) {
  check_keys(n, file, "model",
             {"preset", "name", "num_layers", "hidden_size", "num_attention_heads",
              "ffn_hidden_size", "seq_length", "vocab_size"});
  if (n["preset"]) {
    const std::string p = get<std::string>(n, "preset", file, "model", "a model preset name");
    if (!model_preset(p, m))
      throw ConfigError(file, "model.preset",
                        "unknown model preset '" + p + "' (did you mean '" +
                            nearest_name(p, model_preset_names()) + "'?)");
  } else {
    m->name = "custom";
    for (const char* k :
         {"num_layers", "hidden_size", "num_attention_heads", "seq_length", "vocab_size"})
      if (!n[k]) throw ConfigError(file, std::string("model.") + k, "missing (or give a preset)");
  }
  if (n["name"]) m->name = get<std::string>(n, "name", file, "model", "a string");
  if (n["num_layers"]) m->num_layers = positive(n, "num_layers", file, "model");
  if (n["hidden_size"]) m->hidden_size = positive(n, "hidden_size", file, "model");
  if (n["num_attention_heads"])
    m->num_attention_heads = positive(n, "num_attention_heads", file, "model");
  if (n["ffn_hidden_size"]) m->ffn_hidden_size = positive(n, "ffn_hidden_size", file, "model");
  if (n["seq_length"]) m->seq_length = positive(n, "seq_length", file, "model");
  if (n["vocab_size"]) m->vocab_size = positive(n, "vocab_size", file, "model");
  if (m->ffn_hidden_size == 0) m->ffn_hidden_size = 4 * m->hidden_size;
  if (m->hidden_size % m->num_attention_heads)
    throw ConfigError(file, "model.num_attention_heads", "must divide hidden_size");
}

void parse_cluster(const YAML::Node& n, const std::string& file, PlanScenario* s) {
  check_keys(n, file, "cluster", {"profile", "nodes"});
  const std::string p = get<std::string>(n, "profile", file, "cluster", "a profile name");
  // The planner's tuned presets first; any other shipped or calibrated hwmodels profile (a name
  // or a YAML path relative to the scenario) is converted (resolve_profile names the nearest
  // shipped profile when neither matches).
  const std::string dir = std::filesystem::path(file).parent_path().string();
  if (!gpu_node_preset(p, &s->gpu)) {
    s->profile = hw::resolve_profile(p, dir, file, "cluster.profile");
    s->gpu = gpu_node_from_profile(*s->profile);
  } else {
    PlanProblem pr;
    pr.gpu = s->gpu;
    s->profile = des_profile(pr);
  }
  s->cluster = p;
  s->nodes = positive(n, "nodes", file, "cluster");
}

void parse_parallel(const YAML::Node& n, const std::string& file, PlanScenario* s) {
  check_keys(
      n, file, "parallel",
      {"tensor_model_parallel_size", "pipeline_model_parallel_size",
       "num_layers_per_virtual_pipeline_stage", "micro_batch_size", "global_batch_size",
       "sequence_parallel", "recompute_granularity", "zero_stage", "schedule", "optimizer_offload",
       "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"});
  ParallelConfig& c = s->parallel;
  const std::string P = "parallel";
  if (n["global_batch_size"]) c.global_batch_size = positive(n, "global_batch_size", file, P);
  const bool only_batch = n.size() == 1 && n["global_batch_size"];
  s->has_parallel = !only_batch;
  if (!s->has_parallel) return;
  c.tensor_parallel = positive(n, "tensor_model_parallel_size", file, P);
  c.pipeline_parallel = positive(n, "pipeline_model_parallel_size", file, P);
  if (n["decoder_first_pipeline_num_layers"])
    s->first_stage_layers = positive(n, "decoder_first_pipeline_num_layers", file, P);
  if (n["decoder_last_pipeline_num_layers"])
    s->last_stage_layers = positive(n, "decoder_last_pipeline_num_layers", file, P);
  if (n["micro_batch_size"]) c.micro_batch_size = positive(n, "micro_batch_size", file, P);
  if (n["sequence_parallel"])
    c.sequence_parallel = get<bool>(n, "sequence_parallel", file, P, "true or false");
  if (n["optimizer_offload"])
    c.optimizer_offload = get<bool>(n, "optimizer_offload", file, P, "true or false");
  if (n["zero_stage"]) {
    c.zero_stage = get<int>(n, "zero_stage", file, P, "0, 1, 2 or 3");
    if (c.zero_stage < 0 || c.zero_stage > 3)
      throw ConfigError(file, "parallel.zero_stage", "expected 0, 1, 2 or 3");
  }
  if (n["recompute_granularity"]) {
    c.recompute = get<std::string>(n, "recompute_granularity", file, P, "none|selective|full");
    if (c.recompute != "none" && c.recompute != "selective" && c.recompute != "full")
      throw ConfigError(file, "parallel.recompute_granularity",
                        "expected none, selective or full (did you mean '" +
                            nearest_name(c.recompute, {"none", "selective", "full"}) + "'?)");
  }
  c.schedule = n["schedule"] ? get<std::string>(n, "schedule", file, P, "a schedule name")
                             : std::string("1f1b");
  const int L = s->model.num_layers;
  if (n["num_layers_per_virtual_pipeline_stage"]) {
    const int per = positive(n, "num_layers_per_virtual_pipeline_stage", file, P);
    if (L % (per * c.pipeline_parallel))
      throw ConfigError(file, "parallel.num_layers_per_virtual_pipeline_stage",
                        "layers must split evenly into p * v chunks");
    c.virtual_stages = L / (per * c.pipeline_parallel);
  }
  const int tp = c.tensor_parallel * c.pipeline_parallel;
  if (s->num_gpus() % tp)
    throw ConfigError(file, "parallel", "t * p does not divide the cluster's GPU count");
  c.data_parallel = s->num_gpus() / tp;
  if (c.global_batch_size % (c.micro_batch_size * c.data_parallel))
    throw ConfigError(file, "parallel.global_batch_size",
                      "must be a multiple of micro_batch_size * data-parallel size");
}

}  // namespace

PlanScenario default_plan_scenario() {
  PlanScenario s;
  model_preset("gpt3-175b", &s.model);
  gpu_node_preset("dgx-a100-80gb", &s.gpu);
  s.cluster = "dgx-a100-80gb";
  PlanProblem pr;
  pr.gpu = s.gpu;
  s.profile = des_profile(pr);
  s.nodes = 128;
  s.has_parallel = true;
  ParallelConfig& c = s.parallel;
  c.tensor_parallel = 8;
  c.pipeline_parallel = 8;
  c.data_parallel = 16;
  c.virtual_stages = 3;  // interleaving as in Korthikanti et al.'s 175B runs
  c.micro_batch_size = 1;
  c.global_batch_size = 1536;
  c.recompute = "full";  // the SC21 175B run used full activation recomputation
  c.zero_stage = 0;
  c.schedule = "interleaved";
  s.published_tflops = 138;
  s.published_source = "Narayanan et al. SC21, Table 1";
  return s;
}

PlanScenario parse_plan_scenario(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(file, "", std::string("not valid YAML: ") + e.what());
  }
  if (!root.IsMap()) throw ConfigError(file, "", "expected a mapping with model and cluster");
  check_keys(root, file, "", {"model", "cluster", "parallel", "published", "name", "description"});
  PlanScenario s;
  s.file = file;
  s.parallel.global_batch_size = 1536;
  if (!root["model"]) throw ConfigError(file, "model", "missing");
  if (!root["cluster"]) throw ConfigError(file, "cluster", "missing");
  parse_model(root["model"], file, &s.model);
  parse_cluster(root["cluster"], file, &s);
  if (root["parallel"]) parse_parallel(root["parallel"], file, &s);
  if (const YAML::Node p = root["published"]) {
    check_keys(p, file, "published", {"tflops_per_gpu", "source", "iteration_time_s"});
    if (p["tflops_per_gpu"])
      s.published_tflops = get<double>(p, "tflops_per_gpu", file, "published", "a number");
    if (p["source"]) s.published_source = get<std::string>(p, "source", file, "published", "text");
  }
  return s;
}

PlanScenario load_plan_scenario(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::exception&) {
    throw ConfigError(path, "", "cannot read the scenario file");
  }
  return parse_plan_scenario(text, path);
}

}  // namespace pw
