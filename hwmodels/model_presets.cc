#include "hwmodels/model_presets.h"

namespace pw::hw {
namespace {

ModelPreset preset(const char* name, int layers, int hidden, int heads, int seq, int vocab,
                   const char* source) {
  return ModelPreset{ModelShape{name, layers, hidden, heads, 4 * hidden, seq, vocab}, source};
}

std::vector<ModelPreset> make_presets() {
  const char* weak = "Narayanan et al. SC21, weak-scaling table (s = 2048, V = 51200)";
  const char* kort = "Korthikanti et al. 2022, Table 3 (s = 2048, V = 51200)";
  const char* zb =
      "Qi et al. 2023 (zero bubble), Table 3 shapes; seq_length 1024 and V = 51200 are "
      "pipewright assumptions";
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
