#include "calibration/host_adam.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "calibration/base_profile.h"
#include "core/error.h"
#include "hwmodels/optimizer.h"

namespace pw::calibration {
namespace {

// bf16 <-> fp32 by the top 16 bits (truncation: the measured cost is the traffic, not rounding).
float from_bf16(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<std::uint16_t>(u >> 16);
}

struct Slices {
  std::vector<float> master, m, v;
  std::vector<std::uint16_t> grad, weight;
};

// One Adam step (Kingma & Ba; lr 1e-4, betas 0.9 / 0.95, eps 1e-8) over [begin, end).
void adam_range(Slices& s, std::size_t begin, std::size_t end, int step) {
  constexpr float kLr = 1e-4f, kB1 = 0.9f, kB2 = 0.95f, kEps = 1e-8f;
  const float c1 = 1.0f / (1.0f - std::pow(kB1, static_cast<float>(step)));
  const float c2 = 1.0f / (1.0f - std::pow(kB2, static_cast<float>(step)));
  float* const w = s.master.data();
  float* const m = s.m.data();
  float* const v = s.v.data();
  const std::uint16_t* const g = s.grad.data();
  std::uint16_t* const out = s.weight.data();
  for (std::size_t i = begin; i < end; ++i) {
    const float gi = from_bf16(g[i]);
    m[i] = kB1 * m[i] + (1.0f - kB1) * gi;
    v[i] = kB2 * v[i] + (1.0f - kB2) * gi * gi;
    w[i] -= kLr * (m[i] * c1) / (std::sqrt(v[i] * c2) + kEps);
    out[i] = to_bf16(w[i]);
  }
}

}  // namespace

HostAdamResult measure_host_adam(std::size_t params, int reps, int threads) {
  HostAdamResult r;
  r.params = params;
  r.threads = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  Slices s;
  s.master.assign(params, 0.5f);
  s.m.assign(params, 0.0f);
  s.v.assign(params, 0.0f);
  s.grad.assign(params, to_bf16(1e-3f));
  s.weight.assign(params, 0);
  auto step = [&](int t) {
    std::vector<std::thread> pool;
    const std::size_t share = (params + r.threads - 1) / r.threads;
    for (int k = 0; k < r.threads; ++k) {
      const std::size_t b = std::min(params, k * share), e = std::min(params, b + share);
      pool.emplace_back([&s, b, e, t] { adam_range(s, b, e, t); });
    }
    for (std::thread& th : pool) th.join();
  };
  step(1);  // pages touched, threads warm
  r.best_seconds = 0;
  for (int i = 0; i < std::max(1, reps); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step(i + 2);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0 || sec < r.best_seconds) r.best_seconds = sec;
  }
  r.params_per_s = r.best_seconds > 0 ? static_cast<double>(params) / r.best_seconds : 0;
  return r;
}

std::string host_adam_profile_yaml(const HostAdamResult& r, const std::string& base_text,
                                   const std::string& base_file, const std::string& name) {
  YAML::Node doc = load_base_profile(base_text, base_file, false);
  doc["name"] = name;
  doc["description"] =
      fmt::format("{} with the host's Adam measured",
                  doc["description"] ? doc["description"].as<std::string>() : std::string());
  YAML::Node node = doc["node"];
  // Six significant digits, as text: the emitter's own double form keeps 17.
  node["host_memory_bandwidth_gb_per_s"] =
      fmt::format("{:.6g}", r.params_per_s * hw::kAdamBytesPerParam / 1e9);
  node["host_memory_efficiency"] = 1;
  YAML::Emitter out;
  out << doc;
  return "# Hardware profile: " + base_file + " with the host's Adam throughput measured (" +
         fmt::format("{:.4g} parameters/s on {} threads, {} parameters a step", r.params_per_s,
                     r.threads, r.params) +
         ").\n# node.host_memory_bandwidth_gb_per_s is the bytes a second that Adam moved "
         "(28 a parameter),\n# with host_memory_efficiency 1. Regenerate rather than edit: "
         "pipewright calibrate --host-adam --base " +
         base_file + "\n" + out.c_str() + "\n";
}

std::string host_adam_report(const HostAdamResult& r, int gpus_per_node) {
  return fmt::format(
      "host Adam  {:.4g} parameters/s on {} threads ({} parameters, best step {:.3f} s): {:.1f} "
      "GB/s of {:.0f}-byte updates; per GPU of {} a node {:.4g} parameters/s\n",
      r.params_per_s, r.threads, r.params, r.best_seconds,
      r.params_per_s * hw::kAdamBytesPerParam / 1e9, hw::kAdamBytesPerParam, gpus_per_node,
      r.params_per_s / std::max(1, gpus_per_node));
}

}  // namespace pw::calibration
