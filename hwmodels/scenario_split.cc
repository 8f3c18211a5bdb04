// The pipeline split a scenario names (hwmodels/scenario_split.h): Megatron's layout or its
// first and last stage sizes, and the layers per stage they give.
#include "hwmodels/scenario_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/pipeline_layout.h"

namespace pw::hw {

std::vector<int> Scenario::stage_layers() const {
  if (!layout_layers.empty()) return layout_layers;
  const int p = std::max(1, parallel.pipeline_parallel), L = model.num_layers;
  if (!uneven_split()) return std::vector<int>(static_cast<std::size_t>(p), L / p);
  const int middle = p - (first_stage_layers > 0 ? 1 : 0) - (last_stage_layers > 0 ? 1 : 0);
  const int each = middle > 0 ? (L - first_stage_layers - last_stage_layers) / middle : 0;
  std::vector<int> out(static_cast<std::size_t>(p), each);
  if (first_stage_layers > 0) out.front() = first_stage_layers;
  if (last_stage_layers > 0) out.back() = last_stage_layers;
  return out;
}

// Megatron's pipeline_model_parallel_layout: its stages (a multiple of p; v = stages / p chunks
// per device) as Megatron checks them (E first, L last, once each; the model's transformer and
// multi-token prediction layers, these after those), in the form the workload model has: any
// stage may hold no transformer layer (an empty middle stage passes its activations on, as
// Megatron's transformer block of no layers does), the multi-token prediction layers with the
// loss on the last or on the stage right before it (Megatron's mtp_standalone).
// Sets virtual_stages and, when the stages differ, layout_layers.
void apply_pipeline_layout(Scenario* s, const std::string& pp_key, int layers_per_virtual) {
  const std::string key = "parallel.pipeline_model_parallel_layout";
  ParallelConfig& c = s->parallel;
  if (layers_per_virtual > 0 || s->first_stage_layers > 0 || s->last_stage_layers > 0)
    throw ConfigError(
        s->file, key,
        fmt::format("given with {}; expected one of them (Megatron takes one)",
                    layers_per_virtual > 0 ? "num_layers_per_virtual_pipeline_stage"
                                           : "decoder_first/last_pipeline_num_layers"));
  std::vector<std::string> stages;
  std::string problem;
  if (!parse_pipeline_layout(s->pipeline_layout, &stages, &problem))
    throw ConfigError(s->file, key, problem);
  const int S = static_cast<int>(stages.size()), p = c.pipeline_parallel;
  if (S % p != 0)
    throw ConfigError(
        s->file, key,
        fmt::format("{} stages over {} = {}; expected a multiple of it", S, pp_key, p));
  std::string flat;
  for (const std::string& st : stages) flat += st;
  auto count = [&](char ch) { return static_cast<int>(std::count(flat.begin(), flat.end(), ch)); };
  if (flat.empty() || flat.front() != 'E' || flat.back() != 'L' || count('E') != 1 ||
      count('L') != 1)
    throw ConfigError(s->file, key,
                      "expected the embedding E once, first, and the loss L once, last");
  if (count('t') != s->model.num_layers || count('m') != s->model.mtp_num_layers)
    throw ConfigError(
        s->file, key,
        fmt::format("{} transformer layers (t) and {} multi-token prediction layers "
                    "(m); expected model.num_layers {} and mtp_num_layers {}",
                    count('t'), count('m'), s->model.num_layers, s->model.mtp_num_layers));
  if (count('m') > 0 && flat.find('t', flat.find('m')) != std::string::npos)
    throw ConfigError(s->file, key,
                      "a transformer layer (t) after a multi-token prediction layer (m); expected "
                      "the depths after the model's layers (Megatron's rule)");
  std::vector<int> layers(S);
  c.mtp_standalone = false;
  for (int i = 0; i < S; ++i) {
    const std::string& st = stages[i];
    layers[i] = static_cast<int>(std::count(st.begin(), st.end(), 't'));
    const int here = static_cast<int>(std::count(st.begin(), st.end(), 'm'));
    if (here == 0 || i == S - 1) continue;
    // The depths on a stage of their own (Megatron's mtp_standalone): all of them, on the
    // stage right before the loss's, which is then the last chunk of its pipeline rank (Megatron
    // keeps the depths in a rank's last virtual stage).
    if (here != s->model.mtp_num_layers || i != S - 2 || p < 2)
      throw ConfigError(
          s->file, key,
          fmt::format("stage {} ('{}') holds {} of the {} multi-token prediction layers; "
                      "expected all of them on the last stage with L, or on the stage right "
                      "before it{}",
                      i, st, here, s->model.mtp_num_layers,
                      p < 2 ? " with pipeline_model_parallel_size >= 2 (the depths in a rank's "
                              "last virtual stage)"
                            : ""));
    c.mtp_standalone = true;
  }
  c.virtual_stages = S / p;
  s->layout_layers.clear();
  if (std::count(layers.begin(), layers.end(), layers.front()) != S) s->layout_layers = layers;
}

// Megatron's rule: the layers left after the first and last stage's spread evenly over the
// stages between them, at least one each.
void validate_uneven_split(const Scenario& s, const std::string& pp_key, int layers_per_virtual) {
  const int p = s.parallel.pipeline_parallel, L = s.model.num_layers;
  const std::string key = s.first_stage_layers > 0 ? "parallel.decoder_first_pipeline_num_layers"
                                                   : "parallel.decoder_last_pipeline_num_layers";
  if (p < 2) {
    throw ConfigError(s.file, key,
                      fmt::format("an uneven split needs {} >= 2 (it is {}); expected the key to "
                                  "be absent",
                                  pp_key, p));
  }
  if (layers_per_virtual > 0) {
    throw ConfigError(s.file, key,
                      "an uneven split with num_layers_per_virtual_pipeline_stage (interleaving) "
                      "is not supported; expected one of them");
  }
  const int middle = p - (s.first_stage_layers > 0 ? 1 : 0) - (s.last_stage_layers > 0 ? 1 : 0);
  const int rest = L - s.first_stage_layers - s.last_stage_layers;
  const bool ok = middle == 0 ? rest == 0 : rest >= middle && rest % middle == 0;
  if (!ok) {
    throw ConfigError(
        s.file, key,
        fmt::format("num_layers {} - first {} - last {} = {} layers do not spread evenly over "
                    "the {} other pipeline stage(s) ({} = {}); expected a multiple of {}{}",
                    L, s.first_stage_layers, s.last_stage_layers, rest, middle, pp_key, p,
                    std::max(1, middle), middle > 0 ? " (at least one layer each)" : ""));
  }
}

}  // namespace pw::hw
