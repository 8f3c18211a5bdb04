#pragma once
/// The training frameworks a plan can be launched with, what each of them can run, and the
/// launch configuration that runs a plan with one of them (`pipewright export`, `plan
/// --framework`). One table serves both: the search keeps only configurations the framework
/// runs, and the exporter refuses exactly the plans the search would not have kept.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/plan.h"

namespace pw {

enum class Framework : std::uint8_t { kAny, kMegatron, kTorchtitan, kNemo, kDeepspeed };

/// "any", "megatron", "torchtitan", "nemo", "deepspeed"; false otherwise.
bool parse_framework(const std::string& name, Framework* out);
std::string_view framework_name(Framework fw);
/// The framework's own name for messages ("Megatron-LM", "torchtitan", "NeMo", "DeepSpeed").
std::string_view framework_title(Framework fw);

/// How a framework runs a schedule generator's order.
enum class ScheduleSupport : std::uint8_t {
  kNone,    ///< cannot run it
  kNative,  ///< the framework's own schedule of that name runs the same order
  kCsv,     ///< runs it as a custom order (torchtitan: pipeline_parallel_schedule_csv)
};

/// Whether `fw` runs generator `schedule` (pipelines > 1: BitPipe-style two-replica pipelines;
/// v_shape: stage i and 2p-1-i on device i). torchtitan's CSV path runs loop placements only:
/// PyTorch's _PipelineScheduleRuntime maps stage s to rank s mod p, and only its ZBVZeroBubble
/// and DualPipeV classes place stages in a V.
ScheduleSupport framework_schedule_support(Framework fw, const std::string& schedule, int pipelines,
                                           bool v_shape = false);
/// The schedule of `fw` nearest to `schedule` (for "... cannot run X; nearest: Y").
std::string framework_nearest_schedule(Framework fw, const std::string& schedule, bool v_shape,
                                       int chunks);

/// One configuration as the frameworks see it: the parallel sizes, the schedule and the layers
/// of each pipeline stage in global stage order.
struct FrameworkQuery {
  const ModelShape* model = nullptr;
  const ParallelConfig* config = nullptr;
  const std::vector<int>* stage_layers = nullptr;  ///< layers per stage, global stage order
  int pipelines = 1;                               ///< model replicas in the pipeline
  bool v_shape = false;                            ///< stage i and 2p-1-i on device i
};

/// Why `fw` cannot build the model ("" when it can): torchtitan selects models by flavor, so a
/// shape none of its flavors has cannot be launched with it.
std::string framework_model_problem(Framework fw, const ModelShape& model);

/// Why `fw` cannot run the configuration ("" when it can): the schedule, a ZeRO stage, the
/// layer split, sequence parallelism, offload, expert parallelism. Each reason is one line that
/// names the setting and what the framework offers instead.
std::string framework_problem(Framework fw, const FrameworkQuery& q);

/// What an export writes: the main file and, for torchtitan custom orders, a schedule CSV to
/// be written beside it (`csv_path` as the main file references it).
struct FrameworkExport {
  std::string text;
  std::string csv_path;
  std::string csv_text;
  /// What the framework takes in code rather than in the written file (DeepSpeed's
  /// PipelineModule arguments), one line each; the CLI prints them on stderr.
  std::vector<std::string> notes;
};

/// The launch configuration of `plan` for `fw` (not kAny):
/// - Megatron-LM: the argument list of pretrain_gpt.py, one flag per line, `#` comments;
/// - torchtitan: the job TOML ([model], [training], [parallelism], [activation_checkpoint]);
///   a schedule torchtitan has no class for goes into a PyTorch CSV (compute_comms form) named
///   `csv_path` (required then; the TOML points at it);
/// - NeMo 2: `nemo llm pretrain --factory RECIPE` with one override per line (its Megatron-core
///   strategy, data, optimizer and precision keys);
/// - DeepSpeed: the JSON config (batch, ZeRO, offload, AutoTP, bf16) with the pipeline's
///   PipelineModule arguments in `notes`.
/// Throws ConfigError(source, "config.<key>" or "schedule", ...) naming what the framework
/// cannot run and the nearest setting it can.
FrameworkExport export_plan(const Plan& plan, Framework fw, const std::string& source,
                            const std::string& csv_path);

/// Layers per stage of a plan's placement in global stage order.
std::vector<int> plan_stage_layers(const Plan& plan);

}  // namespace pw
