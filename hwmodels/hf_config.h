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

/// Parses config.json `text`; `file` names it in errors (ConfigError(file, field, ...)).
/// `seq_length` is left 0 for the caller to set. A sliding window on every layer is read into
/// window_size; some layers sliding and others not is refused (layer_types, max_window_layers).
ModelShape parse_hf_config(const std::string& text, const std::string& file);
/// Reads and parses a config.json file.
ModelShape load_hf_config(const std::string& path);

}  // namespace pw::hw
