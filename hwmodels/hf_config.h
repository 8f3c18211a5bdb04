#pragma once
/// Hugging Face `config.json` import: the model shape of a llama, mistral, mixtral, qwen2, qwen3,
/// qwen3_moe, deepseek_v2 or deepseek_v3 checkpoint in pipewright's (Megatron's) terms. Every
/// field of the file is either read, or known not to change cost or memory (token ids,
/// initialiser, RoPE base, norm epsilon, dtype, DeepSeek's routing rules), or an error naming the
/// file and the field: a field this reader does not know could change the model (a sliding
/// window, a biased MLP), so it is never skipped silently. DeepSeek's multi-token prediction
/// depths (num_nextn_predict_layers) become mtp_num_layers. The training sequence length
/// is not in the file (max_position_embeddings is the context the model supports), so the scenario
/// gives seq_length.
#include <string>

#include "core/plan.h"

namespace pw::hw {

/// Architectures read (config.json `model_type`).
inline constexpr const char* kHfModelTypes =
    "llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v2, deepseek_v3";

/// What a config.json says beyond the shape that the caller checks against the training
/// sequence: the sliding attention window in tokens where one is on (mistral's
/// `sliding_window`, qwen2's with `use_sliding_window`), 0 where none is. A window at least as
/// long as the sequence changes nothing (every token sees all earlier ones); a shorter one is
/// not modelled (check_sliding_window).
struct HfConfigExtras {
  long long sliding_window = 0;
};

/// Parses config.json `text`; `file` names it in errors (ConfigError(file, field, ...)).
/// `seq_length` is left 0 for the caller to set; `extras` (when given) receives the rest.
ModelShape parse_hf_config(const std::string& text, const std::string& file,
                           HfConfigExtras* extras = nullptr);
/// Reads and parses a config.json file.
ModelShape load_hf_config(const std::string& path, HfConfigExtras* extras = nullptr);
/// Refuses (ConfigError naming `file` and sliding_window) a window shorter than `seq_length`.
void check_sliding_window(const HfConfigExtras& extras, int seq_length, const std::string& file);

}  // namespace pw::hw
