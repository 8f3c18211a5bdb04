#include "core/schedule_io.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "core/input_limits.h"
#include "core/validator.h"

namespace pw {
namespace {

// --- YAML -> tree ------------------------------------------------------------------------------

bool parse_int(const std::string& s, std::int64_t* out) {
  const char* b = s.data();
  const char* e = b + s.size();
  if (b != e && *b == '+') ++b;
  auto [ptr, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && ptr == e && b != e;
}

bool parse_float(const std::string& s, double* out) {
  if (s == ".inf" || s == "+.inf") return *out = std::numeric_limits<double>::infinity(), true;
  if (s == "-.inf") return *out = -std::numeric_limits<double>::infinity(), true;
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

Doc scalar_to_doc(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  std::int64_t i = 0;
  if (parse_int(s, &i)) return i;
  double d = 0;
  if (parse_float(s, &d)) return d;
  return s;
}

Doc yaml_to_doc(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_doc(n);
    case YAML::NodeType::Sequence: {
      Doc arr = Doc::array();
      for (const YAML::Node& c : n) arr.push_back(yaml_to_doc(c));
      return arr;
    }
    case YAML::NodeType::Map: {
      Doc obj = Doc::object();
      for (const auto& kv : n) obj[kv.first.as<std::string>()] = yaml_to_doc(kv.second);
      return obj;
    }
  }
  return nullptr;
}

// --- tree -> YAML ------------------------------------------------------------------------------

std::string float_text(double d) {
  if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// Nesting depth of arrays (scalars 0).
int array_depth(const Doc& d) {
  if (!d.is_array()) return d.is_object() ? 99 : 0;
  int depth = 0;
  for (const Doc& c : d) depth = std::max(depth, array_depth(c));
  return depth + 1;
}

// Lists of scalars and lists of such lists go on one line; anything deeper is a block.
bool flow_friendly(const Doc& d) {
  if (d.is_array()) return array_depth(d) <= 2;
  if (d.is_object()) {
    if (d.size() > 8) return false;
    for (const auto& kv : d.items())
      if (kv.value().is_structured()) return false;
    return true;
  }
  return true;
}

void emit(YAML::Emitter& out, const Doc& d);

void emit_scalar(YAML::Emitter& out, const Doc& d) {
  if (d.is_null()) {
    out << YAML::Null;
  } else if (d.is_boolean()) {
    out << (d.get<bool>() ? "true" : "false");
  } else if (d.is_number_integer()) {
    out << fmt::format("{}", d.get<std::int64_t>());
  } else if (d.is_number_unsigned()) {
    out << fmt::format("{}", d.get<std::uint64_t>());
  } else if (d.is_number_float()) {
    out << float_text(d.get<double>());
  } else {
    const std::string s = d.get<std::string>();
    // Quote strings that would read back as another type.
    YAML::Node probe(s);
    const Doc typed = scalar_to_doc(probe);
    if (!typed.is_string() || s.empty()) {
      out << YAML::DoubleQuoted << s;
    } else {
      out << s;
    }
  }
}

void emit(YAML::Emitter& out, const Doc& d) {
  if (d.is_array()) {
    if (d.empty() || flow_friendly(d)) out << YAML::Flow;
    out << YAML::BeginSeq;
    for (const Doc& c : d) emit(out, c);
    out << YAML::EndSeq;
  } else if (d.is_object()) {
    if (d.empty() || flow_friendly(d)) out << YAML::Flow;
    out << YAML::BeginMap;
    for (const auto& kv : d.items()) {
      out << YAML::Key << kv.key() << YAML::Value;
      emit(out, kv.value());
    }
    out << YAML::EndMap;
  } else {
    emit_scalar(out, d);
  }
}

// --- schedule <-> tree -------------------------------------------------------------------------

constexpr const char* kScheduleFormat = "pipewright-schedule";
constexpr int kScheduleVersion = 1;

Doc action_to_doc(const Action& a) {
  Doc arr = Doc::array({std::string(action_kind_name(a.kind)), a.stage, a.microbatch});
  if (a.kind == ActionKind::kOverlapFB) {
    arr.push_back(a.stage2);
    arr.push_back(a.microbatch2);
  }
  return arr;
}

Action action_from_doc(const Doc& d, const DocReader& r, const std::string& path) {
  r.expect_array(d, path);
  if (d.size() < 3) r.fail(path, "[KIND, stage, microbatch]");
  Action a;
  const std::string kind = r.as_string(d[0], DocReader::index(path, 0));
  if (!parse_action_kind(kind, &a.kind))
    r.fail(DocReader::index(path, 0),
           fmt::format("an action kind (F, B, W, BW, R, SEND_F, RECV_F, SEND_B, RECV_B, "
                       "OVERLAP_F_B, REDUCE_GRAD, UNSHARD, RESHARD, PAIR_REDUCE, OPT), got '{}'",
                       kind));
  const std::size_t want = a.kind == ActionKind::kOverlapFB ? 5 : 3;
  if (d.size() != want)
    r.fail(path, a.kind == ActionKind::kOverlapFB
                     ? "[OVERLAP_F_B, stage, microbatch, stage2, microbatch2]"
                     : "[KIND, stage, microbatch] (3 entries)");
  a.stage = static_cast<std::int16_t>(r.as_int(d[1], DocReader::index(path, 1), -1, 32767));
  a.microbatch = static_cast<std::int32_t>(
      r.as_int(d[2], DocReader::index(path, 2), -1, std::numeric_limits<std::int32_t>::max()));
  if (want == 5) {
    a.stage2 = static_cast<std::int16_t>(r.as_int(d[3], DocReader::index(path, 3), 0, 32767));
    a.microbatch2 = static_cast<std::int32_t>(
        r.as_int(d[4], DocReader::index(path, 4), 0, std::numeric_limits<std::int32_t>::max()));
  }
  return a;
}

PlacementKind placement_kind_from(const std::string& s, const DocReader& r,
                                  const std::string& path) {
  for (PlacementKind k :
       {PlacementKind::kLinear, PlacementKind::kLoop, PlacementKind::kV, PlacementKind::kExplicit})
    if (placement_kind_name(k) == s) return k;
  r.fail(path, fmt::format("one of linear, loop, v, explicit, got '{}'", s));
}

Placement placement_from_doc(const Doc& d, const DocReader& r, const std::string& path) {
  r.expect_keys(d, path, {"kind", "num_devices", "num_layers", "stages"});
  Placement pl;
  pl.kind = placement_kind_from(r.as_string(r.at(d, path, "kind"), DocReader::join(path, "kind")),
                                r, DocReader::join(path, "kind"));
  pl.num_devices = static_cast<int>(
      r.as_int(r.at(d, path, "num_devices"), DocReader::join(path, "num_devices"), 1, 1 << 20));
  pl.num_layers = static_cast<int>(
      r.as_int(r.at(d, path, "num_layers"), DocReader::join(path, "num_layers"), 0, 1 << 24));
  const std::string spath = DocReader::join(path, "stages");
  const Doc& stages = r.at(d, path, "stages");
  r.expect_array(stages, spath);
  if (stages.size() > 32767) r.fail(spath, "at most 32767 stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string sp = DocReader::index(spath, i);
    const Doc& s = stages[i];
    r.expect_keys(s, sp, {"device", "layer_begin", "layer_end", "pipeline", "index"});
    StageInfo st;
    auto get = [&](const char* key) {
      return static_cast<int>(r.as_int(r.at(s, sp, key), DocReader::join(sp, key), 0, 1 << 24));
    };
    st.device = get("device");
    st.layer_begin = get("layer_begin");
    st.layer_end = get("layer_end");
    st.pipeline = get("pipeline");
    st.index = get("index");
    pl.stages.push_back(st);
  }
  return pl;
}

}  // namespace

// --- documents ---------------------------------------------------------------------------------

DocFormat doc_format_for_path(const std::string& path) {
  const std::string ext = ".json";
  const bool json = path.size() >= ext.size() && path.compare(path.size() - 5, 5, ext) == 0;
  return json ? DocFormat::kJson : DocFormat::kYaml;
}

Doc parse_document(const std::string& text, DocFormat format, const std::string& source) {
  if (format == DocFormat::kJson) return parse_ordered_json_limited(text, source);
  try {
    return yaml_to_doc(load_yaml_limited(text, source));
  } catch (const YAML::Exception& e) {
    throw ConfigError(source, "",
                      fmt::format("YAML syntax error at line {}: {}", e.mark.line + 1, e.msg));
  }
}

std::string dump_document(const Doc& doc, DocFormat format) {
  if (format == DocFormat::kJson) return doc.dump(2) + "\n";
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, doc);
  return std::string(out.c_str()) + "\n";
}

// --- DocReader ---------------------------------------------------------------------------------

void DocReader::fail(const std::string& path, const std::string& expected) const {
  throw ConfigError(source_, path, "expected " + expected);
}

void DocReader::expect_keys(const Doc& obj, const std::string& path,
                            std::initializer_list<std::string> known) const {
  expect_keys(obj, path, std::vector<std::string>(known));
}

void DocReader::expect_keys(const Doc& obj, const std::string& path,
                            const std::vector<std::string>& names) const {
  if (!obj.is_object()) fail(path.empty() ? "(root)" : path, "a map");
  for (const auto& kv : obj.items()) {
    bool ok = false;
    for (const std::string& k : names) ok = ok || k == kv.key();
    if (!ok)
      throw ConfigError(
          source_, join(path, kv.key()),
          fmt::format("unknown key (did you mean '{}'?)", nearest_name(kv.key(), names)));
  }
}

const Doc& DocReader::at(const Doc& obj, const std::string& path, std::string_view key) const {
  if (!obj.is_object()) fail(path.empty() ? "(root)" : path, "a map");
  auto it = obj.find(key);
  if (it == obj.end()) fail(join(path, key), "this key (it is missing)");
  return *it;
}

const Doc* DocReader::find(const Doc& obj, std::string_view key) const {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

void DocReader::expect_array(const Doc& v, const std::string& path) const {
  if (!v.is_array()) fail(path, "a list");
}

std::int64_t DocReader::as_int(const Doc& v, const std::string& path, std::int64_t lo,
                               std::int64_t hi) const {
  std::int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
  } else if (v.is_number_unsigned() &&
             v.get<std::uint64_t>() <=
                 static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    x = static_cast<std::int64_t>(v.get<std::uint64_t>());
  } else {
    fail(path, fmt::format("an integer in {}..{}, got {}", lo, hi, v.dump()));
  }
  if (x < lo || x > hi) fail(path, fmt::format("an integer in {}..{}, got {}", lo, hi, x));
  return x;
}

double DocReader::as_double(const Doc& v, const std::string& path) const {
  if (!v.is_number()) fail(path, fmt::format("a number, got {}", v.dump()));
  return v.get<double>();
}

std::string DocReader::as_string(const Doc& v, const std::string& path) const {
  if (!v.is_string()) fail(path, fmt::format("a string, got {}", v.dump()));
  return v.get<std::string>();
}

bool DocReader::as_bool(const Doc& v, const std::string& path) const {
  if (!v.is_boolean()) fail(path, fmt::format("true or false, got {}", v.dump()));
  return v.get<bool>();
}

std::string DocReader::join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string DocReader::index(const std::string& path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

// --- schedules ---------------------------------------------------------------------------------

Doc schedule_to_doc(const Schedule& s) {
  Doc d = Doc::object();
  d["format"] = kScheduleFormat;
  d["version"] = kScheduleVersion;
  d["name"] = s.name;
  d["num_microbatches"] = s.num_microbatches;
  Doc pl = Doc::object();
  pl["kind"] = std::string(placement_kind_name(s.placement.kind));
  pl["num_devices"] = s.placement.num_devices;
  pl["num_layers"] = s.placement.num_layers;
  Doc stages = Doc::array();
  for (const StageInfo& st : s.placement.stages) {
    Doc o = Doc::object();
    o["device"] = st.device;
    o["layer_begin"] = st.layer_begin;
    o["layer_end"] = st.layer_end;
    o["pipeline"] = st.pipeline;
    o["index"] = st.index;
    stages.push_back(std::move(o));
  }
  pl["stages"] = std::move(stages);
  d["placement"] = std::move(pl);
  Doc actions = Doc::array();
  for (const auto& dev : s.actions) {
    Doc list = Doc::array();
    for (const Action& a : dev) list.push_back(action_to_doc(a));
    actions.push_back(std::move(list));
  }
  d["actions"] = std::move(actions);
  return d;
}

Schedule schedule_from_doc(const Doc& d, const DocReader& r, const std::string& path,
                           bool validate) {
  r.expect_keys(d, path, {"format", "version", "name", "num_microbatches", "placement", "actions"});
  const std::string fpath = DocReader::join(path, "format");
  if (r.as_string(r.at(d, path, "format"), fpath) != kScheduleFormat)
    r.fail(fpath, fmt::format("'{}'", kScheduleFormat));
  r.as_int(r.at(d, path, "version"), DocReader::join(path, "version"), kScheduleVersion,
           kScheduleVersion);
  Schedule s;
  s.name = r.as_string(r.at(d, path, "name"), DocReader::join(path, "name"));
  s.num_microbatches = static_cast<int>(r.as_int(
      r.at(d, path, "num_microbatches"), DocReader::join(path, "num_microbatches"), 1, 1 << 24));
  s.placement =
      placement_from_doc(r.at(d, path, "placement"), r, DocReader::join(path, "placement"));
  const std::string apath = DocReader::join(path, "actions");
  const Doc& actions = r.at(d, path, "actions");
  r.expect_array(actions, apath);
  if (static_cast<int>(actions.size()) != s.placement.num_devices)
    r.fail(apath, fmt::format("one list per device ({}), got {}", s.placement.num_devices,
                              actions.size()));
  s.actions.resize(actions.size());
  for (std::size_t dev = 0; dev < actions.size(); ++dev) {
    const std::string dpath = DocReader::index(apath, dev);
    r.expect_array(actions[dev], dpath);
    s.actions[dev].reserve(actions[dev].size());
    for (std::size_t k = 0; k < actions[dev].size(); ++k)
      s.actions[dev].push_back(action_from_doc(actions[dev][k], r, DocReader::index(dpath, k)));
  }
  if (validate) validate_schedule(s, r.source());
  return s;
}

std::string schedule_checksum(const Schedule& schedule) {
  const std::string canon = schedule_to_doc(schedule).dump();
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : canon) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

std::string schedule_to_text(const Schedule& schedule, DocFormat format) {
  return dump_document(schedule_to_doc(schedule), format);
}

Schedule parse_schedule(const std::string& text, DocFormat format, const std::string& source) {
  return schedule_from_doc(parse_document(text, format, source), DocReader(source));
}

Schedule load_schedule(const std::string& path) {
  return parse_schedule(read_file(path), doc_format_for_path(path), path);
}

void save_schedule(const std::string& path, const Schedule& schedule) {
  write_file_atomic(path, schedule_to_text(schedule, doc_format_for_path(path)));
}

}  // namespace pw
