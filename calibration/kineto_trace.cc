#include "calibration/kineto_trace.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/error.h"
#include "core/input_limits.h"
#include "hwmodels/gpu_model.h"

namespace pw::calibration {
namespace {

using Json = nlohmann::json;

struct CpuOp {
  std::string name;
  const Json* args = nullptr;
};

// PyTorch's "Input type" strings to the calibration's dtype names and element sizes.
bool dtype_of(const std::string& t, std::string* name, double* size) {
  if (t == "c10::BFloat16") return *name = "bf16", *size = 2, true;
  if (t == "c10::Half") return *name = "fp16", *size = 2, true;
  if (t == "float") return *name = "fp32", *size = 4, true;
  return false;
}

// Element sizes of record_param_comms' "dtype" strings.
double comm_elem_size(const std::string& t) {
  if (t == "BFloat16" || t == "Half") return 2;
  if (t == "Float" || t == "Int") return 4;
  if (t == "Double" || t == "Long") return 8;
  if (t == "Byte" || t == "Char" || t == "Bool") return 1;
  return 0;
}

// nccl-tests' op names for PyTorch's collective names.
std::string comm_op(const std::string& c) {
  if (c == "allreduce" || c == "all_reduce" || c == "allreduce_coalesced") return "all_reduce";
  if (c == "allgather" || c == "all_gather" || c == "_allgather_base" ||
      c == "allgather_into_tensor_coalesced")
    return "all_gather";
  if (c == "reduce_scatter" || c == "_reduce_scatter_base" ||
      c == "reduce_scatter_tensor_coalesced")
    return "reduce_scatter";
  if (c == "broadcast") return "broadcast";
  if (c == "send" || c == "recv") return "send_recv";
  return "";
}

bool is_elementwise(const std::string& op) {
  static const char* const kOps[] = {"add",  "sub",  "mul",     "div", "gelu", "silu",
                                     "relu", "tanh", "sigmoid", "neg", "copy_"};
  if (op.rfind("aten::", 0) != 0) return false;
  std::string n = op.substr(6);
  if (n.size() > 9 && n.substr(n.size() - 9) == "_backward") n = n.substr(0, n.size() - 9);
  if (!n.empty() && n.back() == '_' && n != "copy_") n.pop_back();  // in-place forms
  for (const char* k : kOps)
    if (n == k) return true;
  return false;
}

double elements(const Json& dims) {
  double e = 1;
  for (const Json& d : dims) {
    if (!d.is_number_integer() || d.get<long long>() < 0) return -1;
    e *= static_cast<double>(d.get<long long>());
  }
  return e;
}

// [m, k] x [k, n] (with a leading batch for bmm) from the op's last two inputs.
bool gemm_shape(const std::string& op, const Json& dims, long long* m, long long* n, long long* k,
                long long* batch) {
  if (!dims.is_array() || dims.size() < 2) return false;
  const Json& a = dims[dims.size() - 2];
  const Json& b = dims[dims.size() - 1];
  auto ints = [](const Json& v, std::vector<long long>* out) {
    if (!v.is_array()) return false;
    for (const Json& x : v) {
      if (!x.is_number_integer() || x.get<long long>() <= 0) return false;
      out->push_back(x.get<long long>());
    }
    return true;
  };
  std::vector<long long> da, db;
  if (!ints(a, &da) || !ints(b, &db)) return false;
  const bool batched = op == "aten::bmm" || op == "aten::baddbmm";
  const std::size_t rank = batched ? 3 : 2;
  if (da.size() != rank || db.size() != rank) return false;
  const std::size_t o = batched ? 1 : 0;
  if (batched && da[0] != db[0]) return false;
  if (da[o + 1] != db[o]) return false;
  *batch = batched ? da[0] : 1;
  *m = da[o];
  *k = da[o + 1];
  *n = db[o + 1];
  return true;
}

// PyTorch's fused attention ops (native_functions.yaml): whether the op is a backward, its tensor
// layout ([batch, seq, heads, dim] for the kernel-level ops, [batch, heads, seq, dim] for the
// scaled_dot_product ones), the input positions of query and key, and the position of is_causal
// (or of the memory-efficient kernel's custom_mask_type, where 0 means no mask).
struct AttentionOp {
  const char* name;
  bool backward;
  bool seq_major;
  int query, key, causal;
  bool mask_type;
};
constexpr AttentionOp kAttentionOps[] = {
    {"aten::_scaled_dot_product_flash_attention", false, false, 0, 1, 4, false},
    {"aten::_scaled_dot_product_flash_attention_backward", true, false, 1, 2, 11, false},
    {"aten::_scaled_dot_product_efficient_attention", false, false, 0, 1, 6, false},
    {"aten::_scaled_dot_product_efficient_attention_backward", true, false, 1, 2, 11, false},
    {"aten::_scaled_dot_product_cudnn_attention", false, false, 0, 1, 6, false},
    {"aten::_scaled_dot_product_cudnn_attention_backward", true, false, 1, 2, 14, false},
    {"aten::_flash_attention_forward", false, true, 0, 1, 8, false},
    {"aten::_flash_attention_backward", true, true, 1, 2, 11, false},
    {"aten::_efficient_attention_forward", false, true, 0, 1, 9, true},
    {"aten::_efficient_attention_backward", true, true, 1, 2, 14, true},
    // cuDNN's kernel-level ops, which launch the kernels under the scaled_dot_product_cudnn ops
    // (PyTorch 2.11 on an H100 picks cuDNN for SDPA): [batch, heads, seq, dim].
    {"aten::_cudnn_attention_forward", false, false, 0, 1, 10, false},
    {"aten::_cudnn_attention_backward", true, false, 1, 2, 14, false},
};

const AttentionOp* attention_op(const std::string& name) {
  for (const AttentionOp& a : kAttentionOps)
    if (name == a.name) return &a;
  return nullptr;
}

// One fused attention call's shape from the op's recorded inputs: 4-dimensional query and key
// (variable-length batches are 3-dimensional and not used), 16-bit, and the causal flag from
// "Concrete Inputs" (recorded with record_shapes=True since PyTorch 2.1; without it the FLOPs are
// unknown and the call is skipped).
bool attention_shape(const AttentionOp& op, const Json& args, AttentionSample* a) {
  auto dims = args.find("Input Dims");
  auto types = args.find("Input type");
  auto concrete = args.find("Concrete Inputs");
  if (dims == args.end() || types == args.end() || concrete == args.end() || !dims->is_array() ||
      !types->is_array() || !concrete->is_array())
    return false;
  const auto at = [](const Json& arr, int i) -> const Json* {
    return i < static_cast<int>(arr.size()) ? &arr[static_cast<std::size_t>(i)] : nullptr;
  };
  const Json* q = at(*dims, op.query);
  const Json* k = at(*dims, op.key);
  const Json* t = at(*types, op.query);
  const Json* c = at(*concrete, op.causal);
  if (q == nullptr || k == nullptr || t == nullptr || c == nullptr || !t->is_string() ||
      !c->is_string())
    return false;
  auto four = [](const Json& v, long long out[4]) {
    if (!v.is_array() || v.size() != 4) return false;
    for (int i = 0; i < 4; ++i) {
      if (!v[i].is_number_integer() || v[i].get<long long>() <= 0) return false;
      out[i] = v[i].get<long long>();
    }
    return true;
  };
  long long qd[4], kd[4];
  double esize = 0;
  if (!four(*q, qd) || !four(*k, kd) || !dtype_of(t->get<std::string>(), &a->dtype, &esize) ||
      esize != 2)
    return false;
  const std::string cv = c->get<std::string>();
  if (op.mask_type) {
    if (cv != "0" && cv != "1" && cv != "2") return false;
    a->causal = cv != "0";
  } else {
    if (cv != "True" && cv != "False") return false;
    a->causal = cv == "True";
  }
  const int s = op.seq_major ? 1 : 2, h = op.seq_major ? 2 : 1;
  if (qd[0] != kd[0] || qd[3] != kd[3]) return false;
  a->pass = op.backward ? "backward" : "forward";
  a->heads = qd[0] * qd[h];
  a->seq_q = qd[s];
  a->seq_k = kd[s];
  a->head_dim = qd[3];
  return a->flops() > 0;  // a causal call with one key computes nothing the model counts
}

}  // namespace

RawResults raw_from_kineto(const std::string& text, const std::string& file,
                           const hw::HardwareProfile& base, KinetoSummary* summary) {
  const Json doc = parse_json_limited(text, file);
  const Json* events = nullptr;
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array())
    events = &doc["traceEvents"];
  else if (doc.is_array())
    events = &doc;
  if (events == nullptr)
    throw ConfigError(file, "traceEvents",
                      "expected a Chrome trace (an object with a traceEvents array), as "
                      "torch.profiler's export_chrome_trace writes");
  auto str = [](const Json& e, const char* key) {
    auto it = e.find(key);
    return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto ext_id = [](const Json& e) -> long long {
    auto a = e.find("args");
    if (a == e.end() || !a->is_object()) return -1;
    auto it = a->find("External id");
    return it != a->end() && it->is_number_integer() ? it->get<long long>() : -1;
  };
  std::map<long long, CpuOp> ops;
  bool shapes = false;
  for (const Json& e : *events) {
    if (!e.is_object() || str(e, "cat") != "cpu_op") continue;
    const long long id = ext_id(e);
    if (id < 0) continue;
    ops[id] = {str(e, "name"), &e["args"]};
    shapes = shapes || e["args"].contains("Input Dims");
  }
  KinetoSummary sum;
  std::map<std::tuple<std::string, long long, long long, long long, long long>, std::vector<double>>
      gemms;
  std::map<std::pair<std::string, double>, std::vector<double>> elementwise;
  std::map<std::tuple<std::string, int, double>, std::vector<double>> comms;
  // Fused attention: each call's kernels summed (a backward launches several), by External id.
  std::map<long long, std::pair<AttentionSample, double>> attention_calls;
  for (const Json& e : *events) {
    if (!e.is_object() || str(e, "cat") != "kernel" || str(e, "ph") != "X") continue;
    ++sum.kernels;
    auto dur = e.find("dur");
    if (dur == e.end() || !dur->is_number() || dur->get<double>() <= 0) {
      ++sum.skipped;
      continue;
    }
    const double seconds = dur->get<double>() * 1e-6;
    auto op = ops.find(ext_id(e));
    if (op == ops.end()) {
      ++sum.skipped;
      continue;
    }
    const Json& args = *op->second.args;
    const std::string& name = op->second.name;
    const std::string kernel = str(e, "name");
    if (kernel.rfind("nccl", 0) == 0 && name == "record_param_comms") {
      const std::string c = comm_op(str(args, "Collective name"));
      const double size = comm_elem_size(str(args, "dtype"));
      auto num = [&](const char* key) {
        auto it = args.find(key);
        return it != args.end() && it->is_number() ? it->get<double>() : -1.0;
      };
      const double in = num("In msg nelems"), out = num("Out msg nelems");
      const int ranks = static_cast<int>(num("Group size"));
      if (c.empty() || size <= 0 || in < 0 || out < 0 || ranks < 1) {
        ++sum.skipped;
        continue;
      }
      const double bytes = size * (c == "all_gather" ? out : in);
      comms[{c, ranks, bytes}].push_back(seconds);
      ++sum.nccl;
      continue;
    }
    if (const AttentionOp* aop = attention_op(name)) {
      AttentionSample a;
      if (!attention_shape(*aop, args, &a)) {
        ++sum.skipped;
        continue;
      }
      attention_calls.try_emplace(op->first, a, 0.0).first->second.second += seconds;
      ++sum.attention;
      continue;
    }
    auto dims = args.find("Input Dims");
    auto types = args.find("Input type");
    if (dims == args.end() || types == args.end() || !types->is_array() || types->empty()) {
      ++sum.skipped;
      continue;
    }
    std::string dtype;
    double esize = 0;
    if (name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" ||
        name == "aten::baddbmm") {
      long long m = 0, n = 0, k = 0, batch = 1;
      const Json& t = (*types)[types->size() - 1];
      if (!t.is_string() || !dtype_of(t.get<std::string>(), &dtype, &esize) ||
          !gemm_shape(name, *dims, &m, &n, &k, &batch)) {
        ++sum.skipped;
        continue;
      }
      gemms[{dtype, m, n, k, batch}].push_back(seconds);
      ++sum.gemm;
      continue;
    }
    if (is_elementwise(name)) {
      double bytes = 0, largest = 0;
      bool ok = (*types)[0].is_string() &&
                dtype_of((*types)[0].get<std::string>(), &dtype, &esize) && dims->is_array();
      for (std::size_t i = 0; ok && i < dims->size(); ++i) {
        if ((*dims)[i].is_array() && (*dims)[i].empty()) continue;  // a scalar argument
        const double el = elements((*dims)[i]);
        if (el < 0) ok = false;
        bytes += el * esize;
        largest = std::max(largest, el);
      }
      if (!ok || largest <= 0) {
        ++sum.skipped;
        continue;
      }
      bytes += largest * esize;  // the output
      elementwise[{dtype, bytes}].push_back(seconds);
      ++sum.elementwise;
      continue;
    }
    ++sum.skipped;
  }
  if (sum.kernels == 0)
    throw ConfigError(file, "traceEvents",
                      "no GPU kernel events (\"cat\": \"kernel\"); expected a trace profiled with "
                      "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  if (!shapes)
    throw ConfigError(file, "record_shapes",
                      "the CPU ops carry no \"Input Dims\"; profile with record_shapes=True");
  RawResults raw;
  RawProvenance& p = raw.provenance;
  p.backend = "cuda";
  p.device = base.gpu.name;
  p.compute_units = base.gpu.sm_count;
  p.memory_bytes = base.gpu.hbm_capacity.value;
  p.memory_bandwidth = base.gpu.hbm_bandwidth.value;
  for (hw::DType d : {hw::DType::kBf16, hw::DType::kFp16, hw::DType::kFp32, hw::DType::kTf32})
    if (base.gpu.peak_flops[static_cast<int>(d)] > 0)
      p.peak_flops[hw::dtype_name(d)] = base.gpu.peak_flops[static_cast<int>(d)];
  p.command = "PyTorch profiler trace " + file;
  for (auto& [key, times] : gemms) {
    const auto& [dtype, m, n, k, batch] = key;
    raw.gemms.push_back({"trace", dtype, m, n, k, batch, summarize(times)});
  }
  for (auto& [key, times] : elementwise)
    raw.memory.push_back({"elementwise", key.first, key.second, summarize(times)});
  std::map<std::tuple<std::string, std::string, long long, long long, long long, long long, bool>,
           std::vector<double>>
      attention;
  for (const auto& [id, call] : attention_calls) {
    const AttentionSample& a = call.first;
    attention[{a.pass, a.dtype, a.heads, a.seq_q, a.seq_k, a.head_dim, a.causal}].push_back(
        call.second);
  }
  for (auto& [key, times] : attention) {
    const auto& [pass, dtype, heads, seq_q, seq_k, head_dim, causal] = key;
    raw.attention.push_back({pass, dtype, heads, seq_q, seq_k, head_dim, causal, summarize(times)});
  }
  for (auto& [key, times] : comms) {
    const auto& [op, ranks, bytes] = key;
    CollectiveSample c;
    c.library = "nccl";
    c.op = op;
    c.ranks = ranks;
    c.bytes = bytes;
    c.time = summarize(times);
    raw.collectives.push_back(c);
  }
  if (summary) *summary = sum;
  return raw;
}

}  // namespace pw::calibration
