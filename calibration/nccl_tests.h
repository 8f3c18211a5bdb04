#pragma once
/// Calibration from what a user already has: nccl-tests logs (all_reduce_perf, all_gather_perf,
/// reduce_scatter_perf, alltoall_perf, sendrecv_perf; text output or the JSON of `-J`) fitted
/// into a hardware profile's collective and link model (`pipewright calibrate
/// --from-nccl-tests LOG...`).
///
/// The fit keeps hwmodels' model and sets its constants, so the profile plugs into `plan`,
/// `simulate` and `estimate` like any other:
/// - single-node logs: the intra-node bandwidth (node.nvls_efficiency for an NVLS all-reduce,
///   node.intra.efficiency otherwise) from the largest messages; then NCCL's protocols as the
///   lower envelope of up to three lines t = c + d S fitted to the log (relative least squares
///   over every split of the sizes into contiguous ranges): each line becomes a protocol
///   (collectives.protocols: the latency it adds per algorithm step, the share of the bandwidth it
///   reaches) and the smallest latency the collective step latency;
/// - multi-node logs: the NIC efficiency from the largest messages and the NIC latency from the
///   smallest, with the protocols in place.
/// Then each log's measured / modelled time at each of its sizes becomes the profile's size
/// correction for its collective and scope (one node or several; hwmodels applies it to every
/// time of that collective, interpolated in log size), unless turned off.
/// Every log is then predicted row by row with the fitted profile (busbw error per size, worst
/// error at >= 1 MiB and below, R^2 of log time), with and without the correction.
#include <string>
#include <vector>

#include "hwmodels/collectives.h"
#include "hwmodels/profile.h"

namespace pw::calibration {

/// What a log does not say about itself (nccl-tests prints ranks and hosts only with its
/// "# Using devices" lines, and the collective only in newer versions): 0 / "" = from the log.
struct NcclTestsHints {
  std::string collective;  ///< all_reduce | all_gather | reduce_scatter | alltoall | sendrecv
  int ranks = 0;
  int nodes = 0;
};

struct NcclTestsRow {
  double bytes = 0;   ///< nccl-tests' size column
  double time_s = 0;  ///< the faster of the out-of-place and in-place times
  double busbw = 0;   ///< out-of-place busbw as printed, bytes/s (informational)
  int line = 0;
};

struct NcclTestsLog {
  std::string file;
  std::string collective;  ///< nccl-tests' name, e.g. all_reduce
  hw::CollectiveKind kind = hw::CollectiveKind::kAllReduce;
  int ranks = 0;
  int nodes = 0;
  std::vector<NcclTestsRow> rows;  ///< ascending size
};

/// Parses nccl-tests output: the text form, or the JSON `-J FILE.json` writes (a document that
/// starts with '{': collective from its program name in `args`, ranks and nodes from
/// `devices`, rows from `results`). Throws ConfigError(file, "line L" or the JSON key, ...) for a
/// row that is not nccl-tests' 12- or 13-column layout (a truncated log) or a JSON record
/// without a size or time, a collective it cannot tell or does not know, no rows, sizes out of
/// order, or rank/node counts neither the log nor `hints` give.
NcclTestsLog parse_nccl_tests(const std::string& text, const std::string& file,
                              const NcclTestsHints& hints = {});

/// One row as the fitted profile predicts it.
struct NcclTestsPrediction {
  double bytes = 0;
  double measured_busbw = 0;   ///< bytes/s
  double predicted_busbw = 0;  ///< the fitted profile's (size corrections included)
  double error_pct = 0;        ///< (predicted - measured) / measured busbw, percent
  double model_busbw = 0;      ///< the (algorithm, protocol) model alone, no size correction
  double model_error_pct = 0;
};

struct NcclTestsReport {
  std::string file;
  std::string collective;
  int ranks = 0, nodes = 0;
  std::vector<NcclTestsPrediction> rows;
  double worst_large_pct = 0;  ///< worst |error| at >= 1 MiB
  double worst_small_pct = 0;  ///< worst |error| below 1 MiB
  double r2_log_time = 0;
  /// The same for the model alone (without the log's size correction); equal to the above
  /// when no correction was fitted.
  double worst_large_model_pct = 0, worst_small_model_pct = 0;
  bool corrected = false;  ///< the profile carries a size correction for this log's collective
};

struct NcclTestsOptions {
  /// Keep each log's measured / modelled time by size as the profile's size correction for its
  /// collective and scope (collectives.size_corrections); off: the (algorithm, protocol) model
  /// alone.
  bool size_corrections = true;
};

struct NcclTestsFit {
  hw::HardwareProfile profile;           ///< the base with the fitted constants
  std::vector<NcclTestsReport> reports;  ///< one per log, with the fitted profile
  std::vector<std::string> notes;        ///< what was fitted from what, one line each
};

/// Fits `logs` into `base`. Throws ConfigError when a log's group does not fit the base profile
/// (more ranks per node than its GPUs per node). Size corrections are relative to the model
/// they were fitted on: refitting the protocols (any single-node log) drops the base's
/// corrections, refitting the NIC (a multi-node log) drops its multi-node ones (a note says so).
NcclTestsFit fit_nccl_tests(const std::vector<NcclTestsLog>& logs, const hw::HardwareProfile& base,
                            const NcclTestsOptions& options = {});

/// The model's time for one log's collective at `bytes` on `profile` (nccl-tests' size
/// semantics), on `nodes` nodes with ranks / nodes ranks each.
TimePs nccl_tests_model_time(const hw::HardwareProfile& profile, hw::CollectiveKind kind, int ranks,
                             int nodes, double bytes);

/// The base profile's YAML with the fitted constants written in, with provenance (`source`
/// fields naming the logs). Throws ConfigError when the base text is not a profile.
std::string nccl_tests_profile_yaml(const NcclTestsFit& fit, const std::string& base_text,
                                    const std::string& base_file, const std::string& name,
                                    const std::vector<std::string>& log_files);

/// The fit report: notes, then per log the rows (size, measured and predicted busbw, error) and
/// the summary line.
std::string nccl_tests_report(const NcclTestsFit& fit);

}  // namespace pw::calibration
