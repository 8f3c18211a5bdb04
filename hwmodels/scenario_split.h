#pragma once
/// The pipeline split a scenario names: Megatron's pipeline_model_parallel_layout (its stages,
/// the chunks per device, a stage of the multi-token prediction depths alone) or its first and
/// last stage sizes (decoder_first/last_pipeline_num_layers), checked as Megatron checks them.
/// Every bad value is a ConfigError naming the file and key. Part of the scenario loader
/// (hwmodels/scenario.cc), kept apart as one idea.
#include <string>

#include "hwmodels/scenario.h"

namespace pw::hw {

/// Reads s->pipeline_layout into the scenario: sets virtual_stages, the layout's layers per
/// stage (layout_layers, when the stages differ) and mtp_standalone. `pp_key` names the pipeline
/// size in messages (the YAML key or the CLI flag); `layers_per_virtual` is the scenario's
/// num_layers_per_virtual_pipeline_stage (Megatron takes one of the two).
void apply_pipeline_layout(Scenario* s, const std::string& pp_key, int layers_per_virtual);

/// Megatron's rule for first/last stage sizes: the layers left spread evenly over the stages
/// between them, at least one each, over p >= 2 and without interleaving.
void validate_uneven_split(const Scenario& s, const std::string& pp_key, int layers_per_virtual);

}  // namespace pw::hw
