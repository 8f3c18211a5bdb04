#include "calibration/raw_results.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_limits.h"
#include "hwmodels/transformer.h"

namespace pw::calibration {
namespace {

using nlohmann::ordered_json;

constexpr const char* kFormat = "pipewright-calibration-raw";
constexpr int kVersion = 1;

ordered_json timing_json(const Timing& t) {
  return ordered_json{{"median_s", t.median_s},
                      {"min_s", t.min_s},
                      {"max_s", t.max_s},
                      {"iterations", t.iterations}};
}

/// Reads fields out of one JSON object with errors that name the file and the key path.
class Reader {
 public:
  Reader(const nlohmann::json& j, std::string source, std::string path)
      : j_(j), source_(std::move(source)), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_, "expected an object");
  }

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw ConfigError(source_, key, msg);
  }
  std::string key(const char* name) const { return path_.empty() ? name : path_ + "." + name; }

  const nlohmann::json& at(const char* name) const {
    auto it = j_.find(name);
    if (it == j_.end()) fail(key(name), "missing field");
    return *it;
  }
  std::string str(const char* name) const {
    const auto& v = at(name);
    if (!v.is_string()) fail(key(name), "expected a string");
    return v.get<std::string>();
  }
  std::string str_or(const char* name, const std::string& dflt) const {
    return j_.contains(name) ? str(name) : dflt;
  }
  double num(const char* name) const {
    const auto& v = at(name);
    if (!v.is_number()) fail(key(name), "expected a number");
    double d = v.get<double>();
    if (!(d >= 0)) fail(key(name), "expected a non-negative number, got " + v.dump());
    return d;
  }
  std::int64_t integer(const char* name) const {
    const auto& v = at(name);
    if (!v.is_number_integer()) fail(key(name), "expected an integer");
    auto i = v.get<std::int64_t>();
    if (i < 0) fail(key(name), "expected a non-negative integer, got " + v.dump());
    return i;
  }
  bool boolean(const char* name) const {
    const auto& v = at(name);
    if (!v.is_boolean()) fail(key(name), "expected true or false");
    return v.get<bool>();
  }
  bool boolean_or(const char* name, bool dflt) const {
    return j_.contains(name) ? boolean(name) : dflt;
  }
  Timing timing() const {
    Reader t(at("time"), source_, key("time"));
    Timing out{t.num("median_s"), t.num("min_s"), t.num("max_s"),
               static_cast<int>(t.integer("iterations"))};
    if (out.median_s <= 0) t.fail(t.key("median_s"), "expected a positive time");
    if (out.min_s > out.median_s || out.median_s > out.max_s)
      t.fail(t.key("median_s"), "expected min_s <= median_s <= max_s");
    return out;
  }
  /// Iterates the array `name` (missing = empty), handing each element's reader to `fn`.
  template <typename Fn>
  void each(const char* name, Fn fn) const {
    if (!j_.contains(name)) return;
    const auto& arr = j_.at(name);
    if (!arr.is_array()) fail(key(name), "expected an array");
    for (std::size_t i = 0; i < arr.size(); ++i)
      fn(Reader(arr[i], source_, key(name) + "[" + std::to_string(i) + "]"));
  }

 private:
  const nlohmann::json& j_;
  std::string source_;
  std::string path_;
};

RawProvenance read_provenance(const Reader& r) {
  RawProvenance p;
  p.backend = r.str("backend");
  if (p.backend != "cpu" && p.backend != "cuda")
    r.fail(r.key("backend"), "expected cpu or cuda, got '" + p.backend + "'");
  p.device = r.str("device");
  p.host = r.str_or("host", "");
  p.driver = r.str_or("driver", "");
  p.cuda = r.str_or("cuda", "");
  p.cublas = r.str_or("cublas", "");
  p.nccl = r.str_or("nccl", "");
  p.mpi = r.str_or("mpi", "");
  p.eigen = r.str_or("eigen", "");
  p.compiler = r.str_or("compiler", "");
  p.clocks = r.str_or("clocks", "");
  p.date = r.str("date");
  p.command = r.str_or("command", "");
  p.device_count = static_cast<int>(r.integer("device_count"));
  p.compute_units = static_cast<int>(r.integer("compute_units"));
  if (p.compute_units < 1) r.fail(r.key("compute_units"), "expected at least 1");
  p.memory_bytes = r.num("memory_bytes");
  p.memory_bandwidth = r.num("memory_bandwidth");
  const auto& peaks = r.at("peak_flops");
  if (!peaks.is_object()) r.fail(r.key("peak_flops"), "expected an object {dtype: FLOP/s}");
  for (const auto& [dtype, v] : peaks.items()) {
    if (!v.is_number() || v.get<double>() <= 0)
      r.fail(r.key("peak_flops") + "." + dtype, "expected a positive number (FLOP/s)");
    p.peak_flops[dtype] = v.get<double>();
  }
  p.quick = r.boolean_or("quick", false);
  return p;
}

}  // namespace

double AttentionSample::flops() const {
  return hw::fused_attention_flops(heads, seq_q, seq_k, head_dim, causal, pass == "backward");
}

Timing summarize(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  std::size_t n = samples.size();
  double median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  return {median, samples.front(), samples.back(), static_cast<int>(n)};
}

double busbw_factor(const std::string& op, int ranks) {
  if (ranks < 1) return 1.0;
  double n = ranks;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return (n - 1) / n;
  return 1.0;
}

double CollectiveSample::busbw() const { return algbw() * busbw_factor(op, ranks); }

std::string raw_to_json(const RawResults& raw) {
  const RawProvenance& p = raw.provenance;
  ordered_json prov{{"backend", p.backend},
                    {"device", p.device},
                    {"host", p.host},
                    {"driver", p.driver},
                    {"cuda", p.cuda},
                    {"cublas", p.cublas},
                    {"nccl", p.nccl},
                    {"mpi", p.mpi},
                    {"eigen", p.eigen},
                    {"compiler", p.compiler},
                    {"clocks", p.clocks},
                    {"date", p.date},
                    {"command", p.command},
                    {"device_count", p.device_count},
                    {"compute_units", p.compute_units},
                    {"memory_bytes", p.memory_bytes},
                    {"memory_bandwidth", p.memory_bandwidth},
                    {"peak_flops", p.peak_flops},
                    {"quick", p.quick}};
  ordered_json gemms = ordered_json::array();
  for (const auto& g : raw.gemms)
    gemms.push_back({{"op", g.op},
                     {"dtype", g.dtype},
                     {"m", g.m},
                     {"n", g.n},
                     {"k", g.k},
                     {"batch", g.batch},
                     {"time", timing_json(g.time)},
                     {"tflops", g.flops() / g.time.median_s * 1e-12}});
  ordered_json memory = ordered_json::array();
  for (const auto& m : raw.memory)
    memory.push_back({{"kernel", m.kernel},
                      {"dtype", m.dtype},
                      {"bytes", m.bytes},
                      {"time", timing_json(m.time)},
                      {"gbps", m.bytes / m.time.median_s * 1e-9}});
  ordered_json layers = ordered_json::array();
  for (const auto& l : raw.layers)
    layers.push_back({{"pass", l.pass},
                      {"hidden", l.hidden},
                      {"heads", l.heads},
                      {"seq", l.seq},
                      {"time", timing_json(l.time)}});
  ordered_json attention = ordered_json::array();
  for (const auto& a : raw.attention)
    attention.push_back({{"pass", a.pass},
                         {"dtype", a.dtype},
                         {"heads", a.heads},
                         {"seq_q", a.seq_q},
                         {"seq_k", a.seq_k},
                         {"head_dim", a.head_dim},
                         {"causal", a.causal},
                         {"time", timing_json(a.time)},
                         {"tflops", a.flops() / a.time.median_s * 1e-12}});
  ordered_json transfers = ordered_json::array();
  for (const auto& t : raw.transfers)
    transfers.push_back({{"link", t.link},
                         {"bytes", t.bytes},
                         {"time", timing_json(t.time)},
                         {"gbps", t.bytes / t.time.median_s * 1e-9}});
  ordered_json colls = ordered_json::array();
  for (const auto& c : raw.collectives)
    colls.push_back({{"library", c.library},
                     {"op", c.op},
                     {"ranks", c.ranks},
                     {"bytes", c.bytes},
                     {"time", timing_json(c.time)},
                     {"algbw_gbps", c.algbw() * 1e-9},
                     {"busbw_gbps", c.busbw() * 1e-9},
                     {"wrong", c.wrong}});
  ordered_json doc{{"format", kFormat},      {"version", kVersion},
                   {"provenance", prov},     {"launch_latency_s", raw.launch_latency_s},
                   {"gemm", gemms},          {"memory", memory},
                   {"transfers", transfers}, {"collectives", colls}};
  if (!raw.layers.empty()) doc["layers"] = layers;  // older readers and files have none
  if (!raw.core_probes.empty()) {
    ordered_json probes = ordered_json::array();
    for (const CoreProbe& c : raw.core_probes)
      probes.push_back({{"core", c.core}, {"time", timing_json(c.time)}});
    doc["core_probes"] = probes;
    doc["pinned_core"] = raw.pinned_core;
  }
  if (!raw.attention.empty()) doc["attention"] = attention;
  return doc.dump(1) + "\n";
}

RawResults raw_from_json(const std::string& text, const std::string& source) {
  const nlohmann::json doc = parse_json_limited(text, source);
  Reader top(doc, source, "");
  if (top.str("format") != kFormat)
    top.fail("format",
             std::string("expected '") + kFormat + "' (a pipewright calibration raw file)");
  if (top.integer("version") != kVersion)
    top.fail("version", "expected " + std::to_string(kVersion));
  RawResults raw;
  raw.provenance = read_provenance(Reader(top.at("provenance"), source, "provenance"));
  raw.launch_latency_s = top.num("launch_latency_s");
  top.each("gemm", [&](const Reader& r) {
    GemmSample g{r.str("op"),    r.str("dtype"),     r.integer("m"), r.integer("n"),
                 r.integer("k"), r.integer("batch"), r.timing()};
    if (g.m == 0 || g.n == 0 || g.k == 0 || g.batch == 0)
      r.fail(r.key("m"), "expected positive m, n, k and batch");
    raw.gemms.push_back(g);
  });
  top.each("memory", [&](const Reader& r) {
    raw.memory.push_back({r.str("kernel"), r.str("dtype"), r.num("bytes"), r.timing()});
  });
  top.each("layers", [&](const Reader& r) {
    LayerSample l{r.str("pass"), r.integer("hidden"), r.integer("heads"), r.integer("seq"),
                  r.timing()};
    if (l.pass != "forward" && l.pass != "backward_input" && l.pass != "backward_weight")
      r.fail(r.key("pass"), "expected forward, backward_input or backward_weight");
    if (l.hidden <= 0 || l.heads <= 0 || l.seq <= 0 || l.hidden % l.heads != 0)
      r.fail(r.key("hidden"), "expected positive hidden, heads and seq, heads dividing hidden");
    raw.layers.push_back(l);
  });
  top.each("attention", [&](const Reader& r) {
    AttentionSample a{r.str("pass"),       r.str("dtype"),     r.integer("heads"),
                      r.integer("seq_q"),  r.integer("seq_k"), r.integer("head_dim"),
                      r.boolean("causal"), r.timing()};
    if (a.pass != "forward" && a.pass != "backward")
      r.fail(r.key("pass"), "expected forward or backward");
    if (a.heads <= 0 || a.seq_q <= 0 || a.seq_k <= 0 || a.head_dim <= 0)
      r.fail(r.key("heads"), "expected positive heads, seq_q, seq_k and head_dim");
    if (a.flops() <= 0)  // causal with one key: nothing the model counts, nothing to fit
      r.fail(r.key("seq_k"), "expected a call with work: a causal call needs at least 2 keys");
    raw.attention.push_back(a);
  });
  top.each("transfers", [&](const Reader& r) {
    raw.transfers.push_back({r.str("link"), r.num("bytes"), r.timing()});
  });
  top.each("core_probes", [&](const Reader& r) {
    const std::int64_t core = r.integer("core");
    for (const CoreProbe& c : raw.core_probes)
      if (c.core == core) r.fail(r.key("core"), "expected each core once");
    raw.core_probes.push_back({static_cast<int>(core), r.timing()});
  });
  if (doc.contains("pinned_core")) {
    const auto& v = doc["pinned_core"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < -1 ||
        v.get<std::int64_t>() > std::numeric_limits<int>::max())
      top.fail("pinned_core", "expected an integer (a probed core, or -1: not pinned)");
    raw.pinned_core = static_cast<int>(v.get<std::int64_t>());
    bool probed = raw.pinned_core == -1;
    for (const CoreProbe& c : raw.core_probes) probed = probed || c.core == raw.pinned_core;
    if (!probed)
      top.fail("pinned_core", fmt::format("expected one of the cores in core_probes, or -1; got {}",
                                          raw.pinned_core));
  } else if (!raw.core_probes.empty()) {
    top.fail("pinned_core", "missing field (core_probes are given)");
  }
  top.each("collectives", [&](const Reader& r) {
    CollectiveSample c{r.str("library"), r.str("op"), static_cast<int>(r.integer("ranks")),
                       r.num("bytes"),   r.timing(),  r.integer("wrong")};
    if (c.ranks < 1) r.fail(r.key("ranks"), "expected at least 1 rank");
    raw.collectives.push_back(c);
  });
  return raw;
}

}  // namespace pw::calibration
