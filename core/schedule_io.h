#pragma once
/// YAML and JSON (de)serialisation of the schedule IR, and the small document layer that plan_io
/// shares: both syntaxes are parsed into one JSON tree and read through DocReader, so every error
/// names the file, the key path (e.g. `placement.stages[3].device`) and what was expected.
///
/// Schedule document (YAML shown; JSON has the same keys):
///   format: pipewright-schedule
///   version: 1
///   name: 1f1b
///   num_microbatches: 8
///   placement:
///     kind: linear                     # linear | loop | v | explicit
///     num_devices: 4
///     num_layers: 4
///     stages:                          # in global stage order
///       - {device: 0, layer_begin: 0, layer_end: 1, pipeline: 0, index: 0}
///   actions:                           # one list per device, in execution order
///     - [[F, 0, 0], [F, 0, 1], [BW, 0, 0]]   # [kind, stage, microbatch]
///   # OVERLAP_F_B is [OVERLAP_F_B, stage, microbatch, stage2, microbatch2]
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/schedule.h"

namespace pw {

using Doc = nlohmann::ordered_json;

enum class DocFormat : std::uint8_t { kYaml, kJson };

/// kJson for paths ending in ".json", kYaml otherwise.
DocFormat doc_format_for_path(const std::string& path);

/// Parses YAML or JSON text into a tree. Plain YAML scalars are typed (integer, float, true/false,
/// null, else string); quoted scalars stay strings. Throws ConfigError(source, "", "... line N
/// ...") on a syntax error.
Doc parse_document(const std::string& text, DocFormat format, const std::string& source);

/// Renders a tree deterministically: JSON indented by 2; YAML in block style with short scalar
/// lists and scalar-only maps in flow style. Floats print in shortest round-trip form, so
/// parse_document(dump_document(d)) == d up to integer-valued floats reading back as integers.
std::string dump_document(const Doc& doc, DocFormat format);

/// Typed access to a document with error messages that carry the file and the key path.
class DocReader {
 public:
  explicit DocReader(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  /// Throws ConfigError(source, path, "expected " + expected).
  [[noreturn]] void fail(const std::string& path, const std::string& expected) const;
  /// `obj` must be a map; every key must be in `known` (unknown keys name the nearest one).
  void expect_keys(const Doc& obj, const std::string& path,
                   std::initializer_list<std::string> known) const;
  void expect_keys(const Doc& obj, const std::string& path,
                   const std::vector<std::string>& known) const;
  /// Required member; `path` is the map's own path ("" for the root).
  const Doc& at(const Doc& obj, const std::string& path, std::string_view key) const;
  /// Optional member (nullptr when absent).
  const Doc* find(const Doc& obj, std::string_view key) const;
  void expect_array(const Doc& v, const std::string& path) const;
  std::int64_t as_int(const Doc& v, const std::string& path, std::int64_t lo,
                      std::int64_t hi) const;
  double as_double(const Doc& v, const std::string& path) const;
  std::string as_string(const Doc& v, const std::string& path) const;
  bool as_bool(const Doc& v, const std::string& path) const;

  /// "a.b" or "b" when `path` is empty; index form "a[3]".
  static std::string join(const std::string& path, std::string_view key);
  static std::string index(const std::string& path, std::size_t i);

 private:
  std::string source_;
};

/// The schedule as a document tree (see the file comment for the layout).
Doc schedule_to_doc(const Schedule& schedule);
/// Reads a schedule from `doc` (the schedule map found at `path`, "" for the root) and, unless
/// `validate` is false, validates it with validate_schedule; throws ConfigError naming source, key
/// path and expectation.
Schedule schedule_from_doc(const Doc& doc, const DocReader& reader, const std::string& path = "",
                           bool validate = true);
/// FNV-1a 64-bit hash of the schedule's canonical (compact JSON) form, as 16 hex digits. Equal
/// schedules give equal checksums whatever file syntax they came from.
std::string schedule_checksum(const Schedule& schedule);

std::string schedule_to_text(const Schedule& schedule, DocFormat format);
/// Parses and validates; `source` names the input in errors.
Schedule parse_schedule(const std::string& text, DocFormat format, const std::string& source);
/// Loads (format by extension) and validates.
Schedule load_schedule(const std::string& path);
/// Writes atomically (format by extension).
void save_schedule(const std::string& path, const Schedule& schedule);

}  // namespace pw
