#include "calibration/nccl_tests.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "calibration/base_profile.h"
#include "core/error.h"
#include "hwmodels/topology.h"

namespace pw::calibration {

using hw::CollectiveKind;

TimePs nccl_tests_model_time(const hw::HardwareProfile& profile, CollectiveKind kind, int ranks,
                             int nodes, double bytes) {
  const hw::Topology topo(hw::topology_spec(profile, nodes));
  const int per = ranks / nodes, gpn = profile.node.gpus_per_node;
  std::vector<int> group;
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < per; ++i) group.push_back(n * gpn + i);
  const hw::GroupNetwork net = hw::describe_group(topo, profile, group);
  return hw::collective_time(kind, hw::CollectiveAlgo::kAuto, Bytes{bytes}, net);
}

namespace {

double model_seconds(const hw::HardwareProfile& p, const NcclTestsLog& log, double bytes) {
  return ps_to_seconds(nccl_tests_model_time(p, log.kind, log.ranks, log.nodes, bytes));
}

// Bisection on a knob the model time decreases with (a bandwidth share): the knob at which the
// model's time at `bytes` equals `target_s`, within [lo, hi].
template <class Set>
double solve_decreasing(double lo, double hi, double target_s, const Set& time_at) {
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (time_at(mid) > target_s)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

// A line t = c + d S fitted to rows [a, b) minimising the relative squared error.
struct Line {
  double c = 0, d = 0, sse = 0;
};

Line fit_line(const std::vector<NcclTestsRow>& rows, std::size_t a, std::size_t b) {
  double sww = 0, swx = 0, swy = 0, swxx = 0, swxy = 0;
  for (std::size_t i = a; i < b; ++i) {
    const double w = 1.0 / (rows[i].time_s * rows[i].time_s);
    const double x = rows[i].bytes, y = rows[i].time_s;
    sww += w;
    swx += w * x;
    swy += w * y;
    swxx += w * x * x;
    swxy += w * x * y;
  }
  Line l;
  const double det = sww * swxx - swx * swx;
  if (b - a >= 2 && det > 0) {
    l.d = (sww * swxy - swx * swy) / det;
    l.c = (swy - l.d * swx) / sww;
  } else {
    l.c = swy / sww;
  }
  if (l.d < 0) {  // a decreasing line is no protocol: flat at the weighted mean
    l.d = 0;
    l.c = swy / sww;
  }
  for (std::size_t i = a; i < b; ++i) {
    const double e = (l.c + l.d * rows[i].bytes - rows[i].time_s) / rows[i].time_s;
    l.sse += e * e;
  }
  return l;
}

// The algorithm kAuto picks at `bytes` and its time as alpha + beta * S with the profile's
// collective step latency, and H: the seconds one more second of step latency adds.
struct AlgoLine {
  hw::CollectiveAlgo algo;
  double alpha = 0, beta = 0, hops = 0;
};

AlgoLine algo_line(const hw::HardwareProfile& p, const NcclTestsLog& log, double bytes) {
  const hw::Topology topo(hw::topology_spec(p, log.nodes));
  const int per = log.ranks / log.nodes, gpn = p.node.gpus_per_node;
  std::vector<int> group;
  for (int n = 0; n < log.nodes; ++n)
    for (int i = 0; i < per; ++i) group.push_back(n * gpn + i);
  hw::GroupNetwork net = hw::describe_group(topo, p, group);
  AlgoLine l;
  l.algo = hw::choose_algorithm(log.kind, Bytes{bytes}, net);
  auto t = [&](double s) {
    return ps_to_seconds(hw::collective_time(log.kind, l.algo, Bytes{s}, net));
  };
  const double s1 = 64.0 * 1024 * 1024, t1 = t(s1), t2 = t(2 * s1);
  l.beta = (t2 - t1) / s1;
  l.alpha = t1 - l.beta * s1;
  net.step_latency += seconds_to_ps(1e-6);
  const double t1b = ps_to_seconds(hw::collective_time(log.kind, l.algo, Bytes{s1}, net));
  l.hops = (t1b - t1) / 1e-6;
  return l;
}

constexpr double kLargeBytes = 1024.0 * 1024;  // the rows a fit is judged on first

// The lower envelope of `lines` at `bytes` (the model takes the fastest protocol).
double envelope(const std::vector<Line>& lines, double bytes) {
  double t = std::numeric_limits<double>::infinity();
  for (const Line& l : lines) t = std::min(t, l.c + l.d * bytes);
  return t;
}

// Up to three lines over contiguous size ranges of `rows` (each range at least 2 rows): the first
// ones fitted by relative least squares, the last one (the largest messages) at slope
// `beta_last`, the fitted bandwidth, with only its intercept free. The split kept is
// the one whose envelope has the smallest worst busbw error over the rows of 1 MiB and more (the
// messages training moves; all rows when there are none), the relative squared error over
// every row breaking ties. An empty result: no split has enough rows.
std::vector<Line> envelope_lines(const std::vector<NcclTestsRow>& rows, double beta_last) {
  const std::size_t n = rows.size();
  const bool any_large = !rows.empty() && rows.back().bytes >= kLargeBytes;
  double best_worst = std::numeric_limits<double>::infinity(), best_sse = best_worst;
  std::vector<Line> best;
  std::vector<Line> ls;
  for (std::size_t i1 = 0; i1 <= n; ++i1)
    for (std::size_t i2 = i1; i2 <= n; ++i2) {
      // Segments [0, i1), [i1, i2), [i2, n); the last one is always present.
      if (i2 == n || n - i2 < 2) continue;
      if ((i1 > 0 && i1 < 2) || (i2 > i1 && i2 - i1 < 2)) continue;
      ls.clear();
      if (i1 > 0) ls.push_back(fit_line(rows, 0, i1));
      if (i2 > i1) ls.push_back(fit_line(rows, i1, i2));
      Line last;
      double sw = 0, swr = 0;
      for (std::size_t i = i2; i < n; ++i) {
        const double w = 1.0 / (rows[i].time_s * rows[i].time_s);
        sw += w;
        swr += w * (rows[i].time_s - beta_last * rows[i].bytes);
      }
      last.c = swr / sw;
      last.d = beta_last;
      ls.push_back(last);
      // Score the envelope over every row, not each line over its own range.
      double worst = 0, sse = 0;
      for (const NcclTestsRow& r : rows) {
        const double t = envelope(ls, r.bytes);
        const double e = (t - r.time_s) / r.time_s;
        sse += e * e;
        if (r.bytes >= kLargeBytes || !any_large)
          worst = std::max(worst, std::abs(r.time_s / t - 1.0));  // busbw error
      }
      if (worst < best_worst - 1e-12 || (worst <= best_worst + 1e-12 && sse < best_sse - 1e-15)) {
        best_worst = worst;
        best_sse = sse;
        best = ls;
      }
    }
  return best;
}

bool same_scope(const hw::CollectiveSizeCorrection& c, const NcclTestsLog& log) {
  return c.kind == log.kind && c.multi_node == (log.nodes > 1);
}

NcclTestsReport predict(const hw::HardwareProfile& p, const NcclTestsLog& log) {
  hw::HardwareProfile alone = p;
  std::erase_if(alone.collective_size_corrections,
                [&](const hw::CollectiveSizeCorrection& c) { return same_scope(c, log); });
  NcclTestsReport r;
  r.corrected = alone.collective_size_corrections.size() != p.collective_size_corrections.size();
  r.file = log.file;
  r.collective = log.collective;
  r.ranks = log.ranks;
  r.nodes = log.nodes;
  const double factor = hw::bus_factor(log.kind, log.ranks);
  double mean = 0;
  for (const NcclTestsRow& row : log.rows) mean += std::log(row.time_s);
  mean /= static_cast<double>(log.rows.size());
  double ss_res = 0, ss_tot = 0;
  for (const NcclTestsRow& row : log.rows) {
    const double t = model_seconds(p, log, row.bytes);
    NcclTestsPrediction e;
    e.bytes = row.bytes;
    // busbw recomputed from the measured time (the printed one is rounded to 0.01 GB/s).
    e.measured_busbw = row.bytes / row.time_s * factor;
    e.predicted_busbw = t > 0 ? row.bytes / t * factor : 0;
    e.error_pct = 100.0 * (e.predicted_busbw - e.measured_busbw) / e.measured_busbw;
    double& worst = row.bytes >= kLargeBytes ? r.worst_large_pct : r.worst_small_pct;
    worst = std::max(worst, std::abs(e.error_pct));
    const double tm = r.corrected ? model_seconds(alone, log, row.bytes) : t;
    e.model_busbw = tm > 0 ? row.bytes / tm * factor : 0;
    e.model_error_pct = 100.0 * (e.model_busbw - e.measured_busbw) / e.measured_busbw;
    double& worst_m = row.bytes >= kLargeBytes ? r.worst_large_model_pct : r.worst_small_model_pct;
    worst_m = std::max(worst_m, std::abs(e.model_error_pct));
    ss_res += std::pow(std::log(t) - std::log(row.time_s), 2);
    ss_tot += std::pow(std::log(row.time_s) - mean, 2);
    r.rows.push_back(e);
  }
  r.r2_log_time = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
  return r;
}

// Fits the protocols and the intra-node bandwidth to one single-node log.
void fit_single_node(const NcclTestsLog& log, hw::HardwareProfile* p,
                     std::vector<std::string>* notes) {
  p->collective_protocols.clear();
  const NcclTestsRow& big = log.rows.back();
  const bool nvls = log.kind == CollectiveKind::kAllReduce && p->node.nvls && log.ranks > 1;
  double* knob = nvls ? &p->node.nvls_efficiency : &p->node.intra.efficiency;
  const double hi = nvls ? 4.0 : 1.0;
  *knob = solve_decreasing(1e-3, hi, big.time_s, [&](double k) {
    *knob = k;
    return model_seconds(*p, log, big.bytes);
  });
  notes->push_back(fmt::format("{}: {} = {:.4f} (the model's time at {:.0f} B equals the log's)",
                               log.file, nvls ? "node.nvls_efficiency" : "node.intra.efficiency",
                               *knob, big.bytes));
  // Protocols: the lower envelope of up to three lines over contiguous size ranges.
  const AlgoLine al = algo_line(*p, log, big.bytes);
  const std::vector<NcclTestsRow>& rows = log.rows;
  const std::vector<Line> lines = envelope_lines(rows, al.beta);
  // The largest-size line needs 2 rows: a log with fewer cannot give protocols.
  if (lines.empty())
    throw ConfigError(log.file, "",
                      fmt::format("{} row(s); expected at least 2 sizes to fit", rows.size()));
  // Each line: bandwidth share beta / d (at most 1) and latency (c - alpha) / H per step; the
  // smallest latency moves into the collective step latency.
  static const char* const kNames3[] = {"LL", "LL128", "Simple"};
  static const char* const kNames2[] = {"LL128", "Simple"};
  std::vector<hw::CollectiveProtocol> protos;
  for (std::size_t j = 0; j < lines.size(); ++j) {
    hw::CollectiveProtocol pr;
    pr.name = lines.size() == 3 ? kNames3[j] : lines.size() == 2 ? kNames2[j] : "Simple";
    pr.bandwidth_efficiency = lines[j].d > 0 ? std::clamp(al.beta / lines[j].d, 1e-3, 1.0) : 1.0;
    const double lat = al.hops > 0 ? (lines[j].c - al.alpha) / al.hops : 0.0;
    pr.step_latency = seconds_to_ps(lat);  // may be negative until shifted below
    protos.push_back(pr);
  }
  TimePs shift = std::numeric_limits<TimePs>::max();
  for (const auto& pr : protos) shift = std::min(shift, pr.step_latency);
  TimePs step = p->collective_step_latency + shift;
  if (step < 0) {
    notes->push_back(fmt::format(
        "{}: the log's smallest latency is below the links' own ({:.2f} us short); the collective "
        "step latency is 0",
        log.file, ps_to_seconds(-step) * 1e6));
    shift -= step;
    step = 0;
  }
  p->collective_step_latency = step;
  for (auto& pr : protos) pr.step_latency -= shift;
  p->collective_protocols = protos;
  std::string desc;
  for (const auto& pr : protos)
    desc += fmt::format("{}{} +{:.2f} us/step at {:.3f} of the bandwidth", desc.empty() ? "" : "; ",
                        pr.name, ps_to_seconds(pr.step_latency) * 1e6, pr.bandwidth_efficiency);
  notes->push_back(fmt::format(
      "{}: collectives.step_latency_us = {:.3f}; protocols: {} ({} "
      "algorithm, {:.1f} step latencies per collective)",
      log.file, ps_to_seconds(step) * 1e6, desc, hw::collective_algo_name(al.algo), al.hops));
}

void fit_multi_node(const NcclTestsLog& log, hw::HardwareProfile* p,
                    std::vector<std::string>* notes) {
  const NcclTestsRow& big = log.rows.back();
  const NcclTestsRow& small = log.rows.front();
  // Bandwidth from the largest message, latency from the smallest; each moves the other's end a
  // little, so three rounds.
  for (int round = 0; round < 3; ++round) {
    p->node.nic.efficiency = solve_decreasing(1e-3, 1.0, big.time_s, [&](double k) {
      p->node.nic.efficiency = k;
      return model_seconds(*p, log, big.bytes);
    });
    double lo = 0, hi = 1e-3;  // latency grows the time: bisect on it directly
    for (int i = 0; i < 60; ++i) {
      const double mid = 0.5 * (lo + hi);
      p->node.nic.latency = seconds_to_ps(mid);
      if (model_seconds(*p, log, small.bytes) < small.time_s)
        lo = mid;
      else
        hi = mid;
    }
    p->node.nic.latency = seconds_to_ps(0.5 * (lo + hi));
  }
  notes->push_back(
      fmt::format("{}: node.nic.efficiency = {:.4f} (at {:.0f} B), "
                  "node.nic.latency_us = {:.3f} (at {:.0f} B)",
                  log.file, p->node.nic.efficiency, big.bytes,
                  ps_to_seconds(p->node.nic.latency) * 1e6, small.bytes));
}

}  // namespace

NcclTestsFit fit_nccl_tests(const std::vector<NcclTestsLog>& logs, const hw::HardwareProfile& base,
                            const NcclTestsOptions& options) {
  NcclTestsFit fit;
  fit.profile = base;
  for (const NcclTestsLog& log : logs) {
    if (log.ranks / log.nodes > base.node.gpus_per_node)
      throw ConfigError(log.file, "",
                        fmt::format("{} ranks per node; the base profile '{}' has {} GPUs per node",
                                    log.ranks / log.nodes, base.name, base.node.gpus_per_node));
  }
  // Single-node logs first (they set the protocols the multi-node fit runs under); the last
  // single-node log wins if there are several.
  // The base's size corrections were measured against the model as it was: the protocols
  // (refitted by any single-node log) underlie every one, the NIC (a multi-node log) the
  // multi-node ones.
  bool any_single = false, any_multi = false;
  for (const NcclTestsLog& log : logs) (log.nodes == 1 ? any_single : any_multi) = true;
  auto& corr = fit.profile.collective_size_corrections;
  const std::size_t had = corr.size();
  std::erase_if(corr, [&](const hw::CollectiveSizeCorrection& c) {
    return any_single || (any_multi && c.multi_node);
  });
  if (corr.size() != had)
    fit.notes.push_back(fmt::format(
        "the base profile's {} size correction(s) {} dropped: they were measured against the "
        "model this fit changes",
        had - corr.size(), had - corr.size() == 1 ? "is" : "are"));
  for (const NcclTestsLog& log : logs)
    if (log.nodes == 1) fit_single_node(log, &fit.profile, &fit.notes);
  for (const NcclTestsLog& log : logs)
    if (log.nodes > 1) fit_multi_node(log, &fit.profile, &fit.notes);
  if (options.size_corrections) {
    // Every log's ratios against the fitted model, before any of them is applied; a later log
    // of the same collective and scope replaces an earlier one (one table each), and says so.
    std::vector<hw::CollectiveSizeCorrection> fitted;
    for (const NcclTestsLog& log : logs) {
      hw::CollectiveSizeCorrection c;
      c.kind = log.kind;
      c.multi_node = log.nodes > 1;
      c.source = log.file;
      c.ranks = log.ranks;
      c.nodes = log.nodes;
      double lo = std::numeric_limits<double>::infinity(), hi = 0;
      for (const NcclTestsRow& row : log.rows) {
        const double f = row.time_s / model_seconds(fit.profile, log, row.bytes);
        c.table.bytes.push_back(row.bytes);
        c.table.factor.push_back(std::clamp(f, 1e-3, 1e3));
        lo = std::min(lo, f);
        hi = std::max(hi, f);
      }
      for (auto it = fitted.begin(); it != fitted.end(); ++it)
        if (it->kind == c.kind && it->multi_node == c.multi_node) {
          fit.notes.push_back(
              fmt::format("{}: its size correction replaces the one of {} (one "
                          "per collective and scope)",
                          log.file, it->source));
          fitted.erase(it);
          break;
        }
      fit.notes.push_back(fmt::format(
          "{}: collectives.size_corrections {} {}: measured / modelled time {:.3f} to {:.3f} "
          "over {} sizes",
          log.file, log.collective, c.multi_node ? "multi_node" : "single_node", lo, hi,
          log.rows.size()));
      fitted.push_back(std::move(c));
    }
    for (auto& c : fitted) {
      std::erase_if(corr, [&](const hw::CollectiveSizeCorrection& o) {
        return o.kind == c.kind && o.multi_node == c.multi_node;
      });
      corr.push_back(std::move(c));
    }
  }
  for (const NcclTestsLog& log : logs) fit.reports.push_back(predict(fit.profile, log));
  return fit;
}

namespace {

// A fitted figure as the profile writes it: six decimals, as the shortest text that reads back
// to that value (a double put into a YAML node is written with 17 significant digits, e.g.
// 0.80000000000000004, whatever the emitter's precision).
std::string rounded(double v, int digits) {
  const double s = std::pow(10.0, digits);
  return fmt::format("{}", std::round(v * s) / s);
}

}  // namespace

std::string nccl_tests_profile_yaml(const NcclTestsFit& fit, const std::string& base_text,
                                    const std::string& base_file, const std::string& name,
                                    const std::vector<std::string>& log_files) {
  YAML::Node doc = load_base_profile(base_text, base_file, false);
  std::string files;
  for (const std::string& f : log_files) files += (files.empty() ? "" : ", ") + f;
  // Provenance: each log with its collective and group (nccl-tests output carries no date).
  std::string logs;
  for (const NcclTestsReport& r : fit.reports)
    logs += fmt::format("{}{} ({}, {} ranks on {} node{})", logs.empty() ? "" : ", ", r.file,
                        r.collective, r.ranks, r.nodes, r.nodes == 1 ? "" : "s");
  const std::string src =
      "fitted by `pipewright calibrate --from-nccl-tests` from " + (logs.empty() ? files : logs);
  const hw::HardwareProfile& p = fit.profile;
  doc["name"] = name;
  doc["description"] =
      fmt::format("{} with collectives fitted to nccl-tests ({})",
                  doc["description"] ? doc["description"].as<std::string>() : "", files);
  YAML::Node node = doc["node"];
  bool single = false, multi = false;
  for (const NcclTestsReport& r : fit.reports) (r.nodes == 1 ? single : multi) = true;
  if (single) {
    node["intra"]["efficiency"] = rounded(p.node.intra.efficiency, 6);
    node["nvls_efficiency"] = rounded(p.node.nvls_efficiency, 6);
    node["intra"]["source"] = src;
    YAML::Node coll = doc["collectives"];
    coll["step_latency_us"] = rounded(ps_to_seconds(p.collective_step_latency) * 1e6, 6);
    YAML::Node list(YAML::NodeType::Sequence);
    for (const hw::CollectiveProtocol& pr : p.collective_protocols) {
      YAML::Node e;
      e["name"] = pr.name;
      e["step_latency_us"] = rounded(ps_to_seconds(pr.step_latency) * 1e6, 6);
      e["bandwidth_efficiency"] = rounded(pr.bandwidth_efficiency, 6);
      list.push_back(e);
    }
    coll["protocols"] = list;
    coll["source"] = src;
  }
  // The corrections the fit kept (the base's that still hold, and the logs'); none: no key.
  if (!p.collective_size_corrections.empty()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const hw::CollectiveSizeCorrection& c : p.collective_size_corrections) {
      YAML::Node e;
      e["collective"] = hw::nccl_tests_name(c.kind);
      e["scope"] = c.multi_node ? "multi_node" : "single_node";
      if (!c.source.empty()) e["source"] = c.source;
      if (c.ranks > 0) e["ranks"] = c.ranks;
      if (c.nodes > 0) e["nodes"] = c.nodes;
      YAML::Node pts(YAML::NodeType::Sequence);
      for (std::size_t i = 0; i < c.table.bytes.size(); ++i) {
        YAML::Node pt(YAML::NodeType::Sequence);
        // Six significant digits, written as text: the emitter's own double form keeps 17.
        pt.push_back(fmt::format("{:.0f}", c.table.bytes[i]));
        pt.push_back(fmt::format("{:.6g}", c.table.factor[i]));
        pt.SetStyle(YAML::EmitterStyle::Flow);
        pts.push_back(pt);
      }
      e["points"] = pts;
      list.push_back(e);
    }
    doc["collectives"]["size_corrections"] = list;
  } else if (doc["collectives"] && doc["collectives"]["size_corrections"]) {
    doc["collectives"].remove("size_corrections");
  }
  if (multi) {
    node["nic"]["efficiency"] = rounded(p.node.nic.efficiency, 6);
    node["nic"]["latency_us"] = rounded(ps_to_seconds(p.node.nic.latency) * 1e6, 6);
    node["nic"]["source"] = src;
  }
  YAML::Emitter out;
  out << doc;
  return "# Hardware profile: " + base_file + " with its collective model fitted to nccl-tests " +
         "logs.\n# Regenerate rather than edit: pipewright calibrate --from-nccl-tests LOG... " +
         "--base " + base_file + "\n" + out.c_str() + "\n";
}

std::string nccl_tests_report(const NcclTestsFit& fit) {
  std::string out;
  for (const std::string& n : fit.notes) out += "fit  " + n + "\n";
  for (const NcclTestsReport& r : fit.reports) {
    out +=
        fmt::format("{}: {} over {} ranks on {} node(s)\n", r.file, r.collective, r.ranks, r.nodes);
    if (r.corrected) {
      // The model alone first: what the (algorithm, protocol) constants explain, and so what
      // carries to other group sizes; then the profile with the log's size correction.
      out +=
          "        size (B)   busbw meas (GB/s)   model alone (GB/s)    error   "
          "with size correction    error\n";
      for (const NcclTestsPrediction& e : r.rows)
        out +=
            fmt::format("{:>16.0f}   {:>17.2f}   {:>18.2f}   {:>+6.1f}%   {:>20.2f}   {:>+6.1f}%\n",
                        e.bytes, e.measured_busbw * 1e-9, e.model_busbw * 1e-9, e.model_error_pct,
                        e.predicted_busbw * 1e-9, e.error_pct);
      out +=
          fmt::format("{}: model alone: worst |busbw error| {:.1f}% at >= 1 MiB, {:.1f}% below\n",
                      r.file, r.worst_large_model_pct, r.worst_small_model_pct);
    } else {
      out += "        size (B)   busbw meas (GB/s)   busbw pred (GB/s)    error\n";
      for (const NcclTestsPrediction& e : r.rows)
        out += fmt::format("{:>16.0f}   {:>17.2f}   {:>17.2f}   {:>+6.1f}%\n", e.bytes,
                           e.measured_busbw * 1e-9, e.predicted_busbw * 1e-9, e.error_pct);
    }
    out += fmt::format(
        "{}: {}worst |busbw error| {:.1f}% at >= 1 MiB, {:.1f}% below; R2(log "
        "time)={:.4f}\n",
        r.file, r.corrected ? "with size correction: " : "", r.worst_large_pct, r.worst_small_pct,
        r.r2_log_time);
  }
  return out;
}

}  // namespace pw::calibration
