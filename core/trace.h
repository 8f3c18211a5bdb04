#pragma once
/// Chrome/Perfetto trace JSON, shared by the simulator (predicted) and the executor (measured):
/// one process per GPU, one thread per stream, complete events, flow arrows, counter tracks.
#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"

namespace pw {

struct TraceSlice {
  std::int32_t pid = 0;  ///< GPU / device
  std::int32_t tid = 0;  ///< stream
  std::string name;      ///< e.g. "F3"
  std::string category;  ///< e.g. "compute", "pp", "dp", "tp"
  TimePs start = 0;
  TimePs duration = 0;
  std::int32_t stage = -1;
  std::int32_t microbatch = -1;
  std::int32_t flow_out = -1;  ///< id of a flow arrow starting at this slice's end, or -1
  std::int32_t flow_in = -1;   ///< id of a flow arrow ending at this slice's start, or -1
};

struct TraceCounter {
  std::int32_t pid = 0;
  std::string name;  ///< e.g. "activation memory (GB)"
  TimePs time = 0;
  double value = 0;
};

struct Trace {
  std::vector<std::string> process_names;  ///< index = pid
  /// thread_names[pid][tid]
  std::vector<std::vector<std::string>> thread_names;
  std::vector<TraceSlice> slices;
  std::vector<TraceCounter> counters;
};

/// The processes `keep` (pids, ascending, each < process_names.size()) of `trace`, renumbered
/// 0..k-1 in that order: their threads, slices and counters; a flow arrow stays only when both
/// its ends do.
Trace select_processes(const Trace& trace, const std::vector<int>& keep);

/// Serialises to Chrome trace-event JSON (timestamps in microseconds with picosecond decimals),
/// deterministic byte for byte for the same input.
std::string trace_to_json(const Trace& trace);

/// Writes trace_to_json(trace) to `path` whole or not at all; gzip-compressed when the path ends
/// in ".gz" (Perfetto and chrome://tracing open .json.gz as they are), byte-identical across runs.
void write_trace_file(const std::string& path, const Trace& trace);

}  // namespace pw
