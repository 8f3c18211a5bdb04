#include "core/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "core/file_io.h"

namespace pw {
namespace {

// Microseconds with six decimals, from integer picoseconds (exact, no floating point).
void append_us(std::string* out, TimePs ps) {
  const bool neg = ps < 0;
  const TimePs a = neg ? -ps : ps;
  fmt::format_to(std::back_inserter(*out), "{}{}.{:06}", neg ? "-" : "", a / 1'000'000,
                 a % 1'000'000);
}

void append_str(std::string* out, const std::string& s) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(*out), "\\u{:04x}", static_cast<int>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void metadata(std::string* out, const char* what, int pid, int tid, const std::string& name) {
  fmt::format_to(std::back_inserter(*out),
                 ",\n{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
                 what, pid, tid);
  append_str(out, name);
  *out += "}}";
}

}  // namespace

Trace select_processes(const Trace& trace, const std::vector<int>& keep) {
  const int n = static_cast<int>(trace.process_names.size());
  std::vector<int> new_pid(static_cast<std::size_t>(n), -1);
  Trace out;
  for (const int p : keep) {
    if (p < 0 || p >= n || new_pid[p] >= 0) continue;
    new_pid[p] = static_cast<int>(out.process_names.size());
    out.process_names.push_back(trace.process_names[p]);
    out.thread_names.push_back(p < static_cast<int>(trace.thread_names.size())
                                   ? trace.thread_names[p]
                                   : std::vector<std::string>{});
  }
  // Flow ids with both ends kept.
  std::vector<std::uint8_t> ends;
  auto mark = [&](std::int32_t id, std::uint8_t bit) {
    if (id < 0) return;
    if (static_cast<std::size_t>(id) >= ends.size()) ends.resize(id + 1, 0);
    ends[id] |= bit;
  };
  for (const TraceSlice& s : trace.slices) {
    if (s.pid < 0 || s.pid >= n || new_pid[s.pid] < 0) continue;
    mark(s.flow_out, 1);
    mark(s.flow_in, 2);
  }
  auto both = [&](std::int32_t id) {
    return id >= 0 && static_cast<std::size_t>(id) < ends.size() && ends[id] == 3;
  };
  for (const TraceSlice& s : trace.slices) {
    if (s.pid < 0 || s.pid >= n || new_pid[s.pid] < 0) continue;
    TraceSlice c = s;
    c.pid = new_pid[s.pid];
    if (!both(c.flow_out)) c.flow_out = -1;
    if (!both(c.flow_in)) c.flow_in = -1;
    out.slices.push_back(std::move(c));
  }
  for (const TraceCounter& c : trace.counters) {
    if (c.pid < 0 || c.pid >= n || new_pid[c.pid] < 0) continue;
    TraceCounter k = c;
    k.pid = new_pid[c.pid];
    out.counters.push_back(k);
  }
  return out;
}

std::string trace_to_json(const Trace& trace) {
  std::string out;
  out.reserve(256 + trace.slices.size() * 160 + trace.counters.size() * 96);
  out += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",";
    out += "\n";
    first = false;
  };
  for (std::size_t p = 0; p < trace.process_names.size(); ++p) {
    const int pid = static_cast<int>(p);
    sep();
    fmt::format_to(
        std::back_inserter(out),
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":", pid);
    append_str(&out, trace.process_names[p]);
    out += "}}";
    out += ",\n";
    fmt::format_to(std::back_inserter(out),
                   "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":0,"
                   "\"args\":{{\"sort_index\":{}}}}}",
                   pid, pid);
    if (p < trace.thread_names.size()) {
      for (std::size_t t = 0; t < trace.thread_names[p].size(); ++t) {
        metadata(&out, "thread_name", pid, static_cast<int>(t), trace.thread_names[p][t]);
        out += ",\n";
        fmt::format_to(std::back_inserter(out),
                       "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":{},"
                       "\"args\":{{\"sort_index\":{}}}}}",
                       pid, t, t);
      }
    }
  }
  for (const TraceSlice& s : trace.slices) {
    sep();
    out += "{\"name\":";
    append_str(&out, s.name);
    out += ",\"cat\":";
    append_str(&out, s.category.empty() ? std::string("compute") : s.category);
    fmt::format_to(std::back_inserter(out), ",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", s.pid,
                   s.tid);
    append_us(&out, s.start);
    out += ",\"dur\":";
    append_us(&out, s.duration);
    fmt::format_to(std::back_inserter(out), ",\"args\":{{\"stage\":{},\"microbatch\":{}}}}}",
                   s.stage, s.microbatch);
    if (s.flow_out >= 0) {
      // Bound to this slice: a point just inside its end.
      out += ",\n";
      fmt::format_to(std::back_inserter(out),
                     "{{\"name\":\"transfer\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":{},\"pid\":{},"
                     "\"tid\":{},\"ts\":",
                     s.flow_out, s.pid, s.tid);
      append_us(&out, s.start + std::max<TimePs>(0, s.duration - 1));
      out += "}";
    }
    if (s.flow_in >= 0) {
      out += ",\n";
      fmt::format_to(std::back_inserter(out),
                     "{{\"name\":\"transfer\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":{},"
                     "\"pid\":{},\"tid\":{},\"ts\":",
                     s.flow_in, s.pid, s.tid);
      append_us(&out, s.start);
      out += "}";
    }
  }
  for (const TraceCounter& c : trace.counters) {
    sep();
    out += "{\"name\":";
    append_str(&out, c.name);
    fmt::format_to(std::back_inserter(out), ",\"ph\":\"C\",\"pid\":{},\"tid\":0,\"ts\":", c.pid);
    append_us(&out, c.time);
    fmt::format_to(std::back_inserter(out), ",\"args\":{{\"value\":{}}}}}", c.value);
  }
  out += "\n]}\n";
  return out;
}

void write_trace_file(const std::string& path, const Trace& trace) {
  const std::string json = trace_to_json(trace);
  write_file_atomic(path, is_gzip_path(path) ? gzip(json) : json);
}

}  // namespace pw
