#pragma once
/// YAML/JSON (de)serialisation of Plan and MeasuredRun (core/plan.h). Times are integer
/// picoseconds (keys end in `_ps`), so a round trip is lossless. A plan carries a format version
/// and the checksum of its schedule; loading rejects a plan whose schedule does not match its
/// checksum (edited or corrupted), then validates the schedule and the predicted timings.
///
/// Plan document:
///   format: pipewright-plan
///   version: 1
///   model: {name, num_layers, hidden_size, num_attention_heads, ffn_hidden_size, seq_length,
///           vocab_size}
///   cluster: NAME
///   config: {tensor_parallel, pipeline_parallel, data_parallel, virtual_stages,
///            micro_batch_size, global_batch_size, sequence_parallel, recompute, zero_stage,
///            optimizer_offload, schedule}
///   rank_to_gpu: [0, 8, ...]
///   predicted_iteration_ps: 33000000000
///   predicted: [[device, index, start_ps, end_ps], ...]   # may be empty
///   provenance: {version, profile_source, created, command}
///   schedule_checksum: 16 hex digits (see schedule_checksum)
///   schedule: {...}                                        # see core/schedule_io.h
///
/// Measured run document:
///   format: pipewright-measured-run
///   version: 1
///   backend: cpu
///   device: "..."
///   iterations: 10
///   iteration_time_ps: 123
///   actions: [[rank, index, KIND, stage, microbatch, stage2, microbatch2, start_ps, end_ps], ...]
#include <string>

#include "core/plan.h"
#include "core/schedule_io.h"

namespace pw {

/// The keys of a model shape as plans and scenarios spell them (Megatron's names): name,
/// num_layers, ..., vocab_size, then num_query_groups ... moe_expert_capacity_factor, and
/// use_flash_attn (the plan's attention pricing; not a shape field). Both
/// readers check against this one list.
const std::vector<std::string>& model_shape_keys();

inline constexpr int kPlanFormatVersion = 1;
inline constexpr int kMeasuredRunFormatVersion = 1;

Doc plan_to_doc(const Plan& plan);
/// Reads and checks a plan (format, version, checksum, schedule legality, timings that refer to
/// existing actions with 0 <= start <= end). Throws ConfigError naming source and key path.
Plan plan_from_doc(const Doc& doc, const std::string& source);
std::string plan_to_text(const Plan& plan, DocFormat format);
Plan parse_plan(const std::string& text, DocFormat format, const std::string& source);
/// Format by extension (.json, else YAML).
Plan load_plan(const std::string& path);
void save_plan(const std::string& path, const Plan& plan);

Doc measured_run_to_doc(const MeasuredRun& run);
MeasuredRun measured_run_from_doc(const Doc& doc, const std::string& source);
std::string measured_run_to_text(const MeasuredRun& run, DocFormat format);
MeasuredRun parse_measured_run(const std::string& text, DocFormat format,
                               const std::string& source);
MeasuredRun load_measured_run(const std::string& path);
void save_measured_run(const std::string& path, const MeasuredRun& run);

}  // namespace pw
