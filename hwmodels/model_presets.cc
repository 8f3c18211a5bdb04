#include "hwmodels/model_presets.h"

namespace pw::hw {
namespace {

ModelPreset preset(const char* name, int layers, int hidden, int heads, int seq, int vocab,
                   const char* source) {
  return ModelPreset{ModelShape{name, layers, hidden, heads, 4 * hidden, seq, vocab}, source};
}

// A Llama-style decoder: grouped-query attention, SwiGLU, RMSNorm, RoPE, untied embeddings, no
// biases.
ModelShape llama(const char* name, int layers, int hidden, int heads, int kv, int ffn, int seq,
                 int vocab) {
  ModelShape m{name, layers, hidden, heads, ffn, seq, vocab};
  m.num_query_groups = kv == heads ? 0 : kv;
  m.swiglu = true;
  m.rmsnorm = true;
  m.rope = true;
  m.untie_embeddings = true;
  m.bias = false;
  return m;
}

// The output layer shares the embedding's weights (tie_word_embeddings).
ModelShape tied(ModelShape m) {
  m.untie_embeddings = false;
  return m;
}

// Every layer attends over a sliding window of `window` earlier tokens (ModelShape::window_size).
ModelShape windowed(ModelShape m, int window) {
  m.window_size = window;
  return m;
}

ModelShape moe(ModelShape m, int experts, int topk, int expert_ffn) {
  m.num_experts = experts;
  m.moe_router_topk = topk;
  m.moe_ffn_hidden_size = expert_ffn;
  return m;
}

// Qwen3: heads of 128 channels whatever the hidden size (kv_channels set only where heads x 128
// is not the hidden size, as a config.json import gives it) and per-head query/key norms.
ModelShape qwen3(ModelShape m) {
  m.kv_channels = 128 * m.num_attention_heads == m.hidden_size ? 0 : 128;
  m.qk_layernorm = true;
  return m;
}

// A dense Qwen3 (8 key/value heads); the three smallest tie the output layer to the embedding.
ModelShape qwen3_dense(const char* name, int layers, int hidden, int heads, int ffn, bool tie) {
  const ModelShape m = qwen3(llama(name, layers, hidden, heads, 8, ffn, 4096, 151936));
  return tie ? tied(m) : m;
}

// Qwen2.5: a Llama-style decoder with biases on the q, k, v projection only.
ModelShape qwen25(const char* name, int layers, int hidden, int heads, int kv, int ffn) {
  ModelShape m = llama(name, layers, hidden, heads, kv, ffn, 4096, 152064);
  m.qkv_bias = true;
  return m;
}

// DeepSeek-V3 (671B): multi-head latent attention (128 heads, query latent 1536, key/value
// latent 512, per-head query/key 128 + 64 rotary, value 128), three dense layers (FFN 18432)
// then MoE layers of 256 routed experts (top 8, width 2048) and one shared expert; RMSNorm,
// untied; one multi-token prediction depth (its config's num_nextn_predict_layers), whose
// module DeepSeek counts apart from the 671B.
ModelShape deepseek_v3() {
  ModelShape m = llama("deepseek-v3", 61, 7168, 128, 128, 18432, 4096, 129280);
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_head_dim = 128;
  m.qk_pos_emb_head_dim = 64;
  m.v_head_dim = 128;
  m = moe(m, 256, 8, 2048);
  m.moe_shared_expert_size = 2048;
  m.moe_first_dense_layers = 3;
  m.mtp_num_layers = 1;
  return m;
}

// Nemotron-4: GQA, squared-ReLU MLP (not gated), LayerNorm, RoPE, untied, no biases.
ModelShape nemotron(const char* name, int layers, int hidden, int heads, int ffn) {
  ModelShape m = llama(name, layers, hidden, heads, 8, ffn, 4096, 256000);
  m.swiglu = false;
  m.rmsnorm = false;
  return m;
}

std::vector<ModelPreset> make_presets() {
  const char* weak = "Narayanan et al. SC21, weak-scaling table (s = 2048, V = 51200)";
  const char* kort = "Korthikanti et al. 2022, Table 3 (s = 2048, V = 51200)";
  const char* zb =
      "Qi et al. 2023 (zero bubble), Table 3 shapes; seq_length 1024 and V = 51200 are "
      "pipewright assumptions";
  const char* qwen25_source =
      "Qwen2.5 technical report (2024), the Qwen/Qwen2.5 config.json files and NeMo's "
      "Qwen25Config classes; sequence 4096 is NeMo's Qwen2Config default";
  const char* qwen3_source =
      "Qwen3 technical report (2025), the Qwen/Qwen3 config.json files and torchtitan's qwen3 "
      "flavors; sequence 4096 is the report's first pre-training stage";
  return {
      preset("gpt3-175b", 96, 12288, 96, 2048, 51200, "Brown et al. 2020; Narayanan et al. SC21"),
      preset("megatron-1.7b", 24, 2304, 24, 2048, 51200, weak),
      preset("megatron-3.6b", 30, 3072, 32, 2048, 51200, weak),
      preset("megatron-7.5b", 36, 4096, 32, 2048, 51200, weak),
      preset("megatron-18.4b", 40, 6144, 48, 2048, 51200, weak),
      preset("megatron-39.1b", 48, 8192, 64, 2048, 51200, weak),
      preset("megatron-76.1b", 60, 10240, 80, 2048, 51200, weak),
      preset("megatron-145.6b", 80, 12288, 96, 2048, 51200, weak),
      preset("megatron-310.1b", 96, 16384, 128, 2048, 51200, weak),
      preset("megatron-529.6b", 105, 20480, 128, 2048, 51200, weak),
      preset("megatron-1t", 128, 25600, 160, 2048, 51200, weak),
      preset("korthikanti-22b", 48, 6144, 64, 2048, 51200, kort),
      preset("korthikanti-175b", 96, 12288, 96, 2048, 51200, kort),
      preset("korthikanti-530b", 105, 20480, 128, 2048, 51200, kort),
      preset("korthikanti-1t", 128, 25600, 160, 2048, 51200, kort),
      preset("zb-1.5b", 22, 2304, 24, 1024, 51200, zb),
      preset("zb-6.2b", 30, 4096, 32, 1024, 51200, zb),
      preset("zb-14.6b", 46, 5120, 40, 1024, 51200, zb),
      preset("zb-28.3b", 62, 6144, 48, 1024, 51200, zb),
      preset("megatron-1008b", 128, 25600, 160, 2048, 51200,
             "alias of megatron-1t (the 1008B row of Narayanan et al. SC21)"),
      preset("cm-98.5b", 78, 10240, 80, 1024, 51200,
             "Qi et al. 2024 (controllable memory), 98.5B model; sequence 1024, V = 51200"),
      {llama("llama2-7b", 32, 4096, 32, 32, 11008, 4096, 32000),
       "Touvron et al. 2023 (Llama 2), Table 1 and meta-llama/Llama-2-7b-hf config.json"},
      {llama("llama2-13b", 40, 5120, 40, 40, 13824, 4096, 32000),
       "Touvron et al. 2023 (Llama 2), meta-llama/Llama-2-13b-hf config.json"},
      {llama("llama2-70b", 80, 8192, 64, 8, 28672, 4096, 32000),
       "Touvron et al. 2023 (Llama 2, GQA), meta-llama/Llama-2-70b-hf config.json"},
      {llama("llama3-8b", 32, 4096, 32, 8, 14336, 8192, 128256),
       "Dubey et al. 2024 (Llama 3), Table 3; shared/reference/h100-runs.md"},
      {llama("llama3-70b", 80, 8192, 64, 8, 28672, 8192, 128256),
       "Dubey et al. 2024 (Llama 3), Table 3; shared/reference/h100-runs.md"},
      {tied(llama("llama3.2-1b", 16, 2048, 32, 8, 8192, 8192, 128256)),
       "Meta 2024, meta-llama/Llama-3.2-1B config.json (output layer tied to the embedding); "
       "torchtitan's llama3 1B flavor, NeMo's Llama32Config1B"},
      {tied(llama("llama3.2-3b", 28, 3072, 24, 8, 8192, 8192, 128256)),
       "Meta 2024, meta-llama/Llama-3.2-3B config.json (output layer tied to the embedding); "
       "torchtitan's llama3 3B flavor, NeMo's Llama32Config3B"},
      {llama("llama3.1-405b", 126, 16384, 128, 8, 53248, 8192, 128256),
       "Dubey et al. 2024 (Llama 3), Table 3 (405B: 126 layers, h 16384, FFN 53248)"},
      {windowed(llama("mistral-7b", 32, 4096, 32, 8, 14336, 8192, 32000), 4096),
       "Jiang et al. 2023 (Mistral 7B), Table 1: every layer attends over a 4,096-token window, "
       "context 8,192"},
      {moe(llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 4096, 32000), 8, 2, 14336),
       "Jiang et al. 2024 (Mixtral), Table 1; sequence 4096 is a pipewright choice"},
      {moe(llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 4096, 32768), 8, 2, 16384),
       "mistralai/Mixtral-8x22B-v0.1 config.json; sequence 4096 is a pipewright choice"},
      {qwen25("qwen2.5-7b", 28, 3584, 28, 4, 18944), qwen25_source},
      {qwen25("qwen2.5-14b", 48, 5120, 40, 8, 13824), qwen25_source},
      {qwen25("qwen2.5-32b", 64, 5120, 40, 8, 27648), qwen25_source},
      {qwen25("qwen2.5-72b", 80, 8192, 64, 8, 29568), qwen25_source},
      {qwen3_dense("qwen3-0.6b", 28, 1024, 16, 3072, true), qwen3_source},
      {qwen3_dense("qwen3-1.7b", 28, 2048, 16, 6144, true), qwen3_source},
      {qwen3_dense("qwen3-4b", 36, 2560, 32, 9728, true), qwen3_source},
      {qwen3_dense("qwen3-8b", 36, 4096, 32, 12288, false), qwen3_source},
      {qwen3_dense("qwen3-14b", 40, 5120, 40, 17408, false), qwen3_source},
      {qwen3_dense("qwen3-32b", 64, 5120, 64, 25600, false), qwen3_source},
      {qwen3(moe(llama("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 4096, 151936), 128, 8, 768)),
       "Qwen3 technical report (2025), Qwen/Qwen3-30B-A3B config.json; "
       "shared/reference/h100-runs.md"},
      {qwen3(moe(llama("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 4096, 151936), 128, 8, 1536)),
       "Qwen3 technical report (2025), Qwen/Qwen3-235B-A22B config.json"},
      {deepseek_v3(),
       "DeepSeek-AI 2024 (DeepSeek-V3 technical report), deepseek-ai/DeepSeek-V3 config.json; "
       "sequence 4096 is its pre-training length"},
      {nemotron("nemotron4-15b", 32, 6144, 48, 24576),
       "Parmar et al. 2024 (Nemotron-4 15B), Table 1"},
      {nemotron("nemotron4-340b", 96, 18432, 96, 73728),
       "NVIDIA 2024 (Nemotron-4 340B technical report), Table 1"},
  };
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> kPresets = make_presets();
  return kPresets;
}

const ModelPreset* find_model_preset(const std::string& name) {
  for (const ModelPreset& p : model_presets()) {
    if (p.shape.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const ModelPreset& p : model_presets()) names.push_back(p.shape.name);
  return names;
}

}  // namespace pw::hw
