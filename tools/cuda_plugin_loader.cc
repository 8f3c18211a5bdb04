#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "tools/cuda_plugin.h"

namespace pw::tools {

const CudaPlugin* load_cuda_plugin(std::string* why) {
  static const CudaPlugin* plugin = nullptr;
  static std::string reason;
  static bool tried = false;
  if (tried) {
    if (why && !plugin) *why = reason;
    return plugin;
  }
  tried = true;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("PIPEWRIGHT_CUDA_PLUGIN"); env && *env) {
    candidates.push_back(env);
  } else {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      candidates.push_back((exe.parent_path() / kCudaPluginFile).string());
      candidates.push_back((exe.parent_path() / PW_CUDA_PLUGIN_RELDIR / kCudaPluginFile)
                               .lexically_normal()
                               .string());
    }
  }
  std::string tried_list;
  for (const std::string& path : candidates) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried_list += (tried_list.empty() ? "" : ", ") + path;
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      reason = fmt::format("the CUDA plugin {} cannot be loaded: {}", path, err ? err : "?");
      if (why) *why = reason;
      return nullptr;
    }
    auto entry = reinterpret_cast<CudaPluginEntry>(dlsym(handle, kCudaPluginSymbol));
    const CudaPlugin* p = entry ? entry() : nullptr;
    if (p == nullptr || p->abi != kCudaPluginAbi) {
      reason = fmt::format("the CUDA plugin {} is not this pipewright's (ABI {}, expected {})",
                           path, p ? p->abi : -1, kCudaPluginAbi);
      if (why) *why = reason;
      return nullptr;
    }
    plugin = p;
    return plugin;
  }
  reason = fmt::format(
      "the CUDA backend plugin {} was not found (looked for {}); it is built when nvcc, cuBLAS "
      "and NCCL are present at configure time",
      kCudaPluginFile, tried_list.empty() ? "no location to look in" : tried_list);
  if (why) *why = reason;
  return nullptr;
}

}  // namespace pw::tools
