// `pipewright calibrate`: measure this machine (or refit a raw file) and write a hardware profile.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "calibration/calibrate.h"
#include "calibration/host_adam.h"
#include "calibration/mpi_bench.h"
#include "calibration/nccl_tests.h"
#include "core/error.h"
#include "core/file_io.h"
#include "hwmodels/profile.h"
#include "tools/command.h"
#include "tools/cuda_plugin.h"

namespace pw::tools {
namespace {

struct CalibrateArgs {
  std::string backend = "auto";
  bool quick = false;
  std::string out, raw, from_raw, from_trace, base, name;
  std::string mpirun;  ///< "" = not given (mpirun)
  bool skip_mpi = false;
  int ranks = INT_MIN;     ///< INT_MIN: not given (the number of cores)
  std::string mpi_worker;  // hidden: this process is one rank of the MPI benchmark job
  std::vector<std::string> argv;
  // --from-nccl-tests LOG...: fit the base profile's collective model to the user's logs.
  std::vector<std::string> nccl_logs;
  calibration::NcclTestsHints nccl_hints;
  std::string size_corrections;  ///< "" (not given: on), on, off
  bool host_adam = false;        ///< --host-adam: time the host's Adam into the base profile
};

// `calibrate --host-adam --base PROFILE --out FILE [--quick]`: the host CPU's Adam throughput (an
// offloaded optimizer's update) measured on this machine and written into the base profile.
void run_host_adam(const CalibrateArgs& a, int* status) {
  if (a.base.empty())
    throw ConfigError("", "--base",
                      "--host-adam writes the measured rate into a base profile: give --base (a "
                      "shipped name such as dgx-h100, or a YAML file)");
  if (a.out.empty()) throw ConfigError("", "--out", "expected the profile YAML to write");
  if (a.backend != "auto" || !a.from_raw.empty() || !a.from_trace.empty() || !a.raw.empty() ||
      a.skip_mpi || a.ranks != INT_MIN || !a.mpirun.empty() || !a.nccl_logs.empty() ||
      !a.nccl_hints.collective.empty() || a.nccl_hints.ranks != 0 || a.nccl_hints.nodes != 0 ||
      !a.size_corrections.empty())
    throw ConfigError("", "--host-adam",
                      "times the host's Adam alone; --backend, --from-raw, --from-trace, --raw, "
                      "--skip-mpi, --ranks, --mpirun, --from-nccl-tests, --log-* and "
                      "--size-corrections do not apply");
  const hw::HardwareProfile base = hw::resolve_profile(a.base, ".", "", "--base");
  // 16 bytes a parameter held: 1 GiB (quick: 256 MiB), well past the caches.
  const calibration::HostAdamResult r =
      calibration::measure_host_adam(a.quick ? (16u << 20) : (64u << 20), a.quick ? 3 : 5);
  const std::string base_path = base.file.empty() ? a.base : base.file;
  const std::string yaml = calibration::host_adam_profile_yaml(
      r, read_file(base_path), base_path, a.name.empty() ? base.name + "-host" : a.name);
  hw::parse_profile(yaml, a.out);  // the written profile must load as any other
  write_file_atomic(a.out, yaml);
  std::printf("%swrote %s\n", calibration::host_adam_report(r, base.node.gpus_per_node).c_str(),
              a.out.c_str());
  *status = 0;
}

// `calibrate --from-nccl-tests LOG... --base PROFILE --out FILE`: every log read (one line, exit
// 2, nothing written for one that cannot be), fitted, reported, and the profile written.
void run_nccl_tests(const CalibrateArgs& a, int* status) {
  if (a.base.empty())
    throw ConfigError("", "--base",
                      "--from-nccl-tests fits the collectives of a base profile: give --base "
                      "(a shipped name such as dgx-h100, or a YAML file)");
  if (a.out.empty()) throw ConfigError("", "--out", "expected the profile YAML to write");
  if (a.backend != "auto" || a.quick || !a.from_raw.empty() || !a.from_trace.empty() ||
      !a.raw.empty() || a.skip_mpi || a.ranks != INT_MIN || !a.mpirun.empty())
    throw ConfigError("", "--from-nccl-tests",
                      "fits logs; --backend, --quick, --from-raw, --from-trace, --raw, --skip-mpi, "
                      "--ranks and --mpirun do not apply");
  const hw::HardwareProfile base = hw::resolve_profile(a.base, ".", "", "--base");
  std::vector<calibration::NcclTestsLog> logs;
  for (const std::string& f : a.nccl_logs)
    logs.push_back(calibration::parse_nccl_tests(read_file(f), f, a.nccl_hints));
  calibration::NcclTestsOptions opt;
  opt.size_corrections = a.size_corrections != "off";
  const calibration::NcclTestsFit fit = calibration::fit_nccl_tests(logs, base, opt);
  const std::string base_path = base.file.empty() ? a.base : base.file;
  const std::string yaml = calibration::nccl_tests_profile_yaml(
      fit, read_file(base_path), base_path, a.name.empty() ? base.name + "-nccl" : a.name,
      a.nccl_logs);
  // The written profile must load as any other.
  hw::parse_profile(yaml, a.out);
  write_file_atomic(a.out, yaml);
  std::printf("%swrote %s\n", calibration::nccl_tests_report(fit).c_str(), a.out.c_str());
  *status = 0;
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("pipewright");
}

/// Progress on a terminal: one line rewritten in place; nothing when stderr is a pipe or file.
calibration::Progress terminal_progress() {
  if (isatty(STDERR_FILENO) == 0) return {};
  return [](const std::string& line) {
    std::fprintf(stderr, "\r\033[K[calibrate] %s", line.c_str());
    std::fflush(stderr);
  };
}

std::string resolve_backend(const std::string& asked) {
  if (asked != "auto") return asked;
  std::string why;
  if (const CudaPlugin* cuda = load_cuda_plugin(&why); cuda && cuda->device_count(&why) > 0)
    return "cuda";
  return "cpu";
}

/// A measurement on this machine (no --from-raw, --from-trace): each flag that the resolved
/// backend does not read is refused before anything is measured.
void check_measuring_flags(const CalibrateArgs& a, const std::string& backend) {
  if (backend == "cpu" && !a.base.empty())
    throw ConfigError("", "--base",
                      "applies to the cuda backend (the node and fabric a calibrated GPU joins); "
                      "the cpu backend's profile describes this host as it is measured");
  if (backend == "cuda" && (a.skip_mpi || !a.mpirun.empty() || a.ranks != INT_MIN))
    throw ConfigError("",
                      a.skip_mpi          ? "--skip-mpi"
                      : !a.mpirun.empty() ? "--mpirun"
                                          : "--ranks",
                      "applies to the cpu backend (its MPI job and ranks per host); the cuda "
                      "backend measures this node's GPUs");
  // --skip-mpi's --raw/--out rule is calibrate()'s (calibration/calibrate.cc).
  if (a.skip_mpi && !a.mpirun.empty())
    throw ConfigError("", "--mpirun", "launches the MPI job that --skip-mpi skips");
  if (a.skip_mpi && a.ranks != INT_MIN)
    throw ConfigError("", "--ranks",
                      "sets the ranks per host of the profile, which --skip-mpi does not write");
}

void run(const CalibrateArgs& a, int* status) {
  if (a.host_adam) {
    run_host_adam(a, status);
    return;
  }
  if (!a.nccl_logs.empty()) {
    run_nccl_tests(a, status);
    return;
  }
  if (!a.nccl_hints.collective.empty() || a.nccl_hints.ranks != 0 || a.nccl_hints.nodes != 0)
    throw ConfigError("",
                      !a.nccl_hints.collective.empty() ? "--log-collective"
                      : a.nccl_hints.ranks != 0        ? "--log-ranks"
                                                       : "--log-nodes",
                      "--log-collective, --log-ranks and --log-nodes describe --from-nccl-tests "
                      "logs; none was given");
  if (!a.size_corrections.empty())
    throw ConfigError("", "--size-corrections",
                      "applies to --from-nccl-tests (the size corrections it fits); none was "
                      "given");
  if (!a.mpi_worker.empty()) {
    *status = calibration::run_mpi_worker(a.mpi_worker, a.quick);
    return;
  }
  calibration::CalibrateOptions o;
  o.backend = !a.from_trace.empty() ? "cuda"
              : a.from_raw.empty()  ? resolve_backend(a.backend)
                                    : a.backend;  // "" = from the file
  o.quick = a.quick;
  o.out = a.out;
  o.raw_out = a.raw;
  o.from_raw = a.from_raw;
  o.from_trace = a.from_trace;
  if (!a.from_trace.empty() && (!a.from_raw.empty() || a.backend != "auto" || a.quick ||
                                a.skip_mpi || a.ranks != INT_MIN || !a.mpirun.empty()))
    throw ConfigError("", "--from-trace",
                      "fits a profiler trace; --from-raw, --backend, --quick, --skip-mpi, --ranks "
                      "and --mpirun do not apply");
  if (!a.from_raw.empty() && (a.quick || a.skip_mpi || !a.mpirun.empty() || !a.raw.empty()))
    throw ConfigError("", "--from-raw",
                      "fits the measurements in the file; --quick, --skip-mpi, --mpirun and --raw "
                      "(which keep or shape a new measurement) do not apply");
  if (a.from_raw.empty() && a.from_trace.empty()) check_measuring_flags(a, o.backend);
  o.base = a.base;
  o.name = a.name;
  o.skip_mpi = a.skip_mpi;
  if (a.ranks != INT_MIN && a.ranks < 1)
    throw ConfigError("", "--ranks",
                      fmt::format("expected at least 1 rank per host, got {}", a.ranks));
  o.ranks_per_node = std::max(0, a.ranks);  // 0: the number of cores
  if (!a.mpirun.empty()) o.mpi.mpirun = a.mpirun;
  o.mpi.worker = {self_exe(), "calibrate"};
  if (a.quick) o.mpi.worker.push_back("--quick");
  o.mpi.worker.push_back("--mpi-worker");
  for (const auto& s : a.argv) o.command += (o.command.empty() ? "" : " ") + s;
  o.progress = terminal_progress();
  if (o.backend == "cuda" && o.from_raw.empty() && o.from_trace.empty()) {
    std::string why;
    const CudaPlugin* cuda = load_cuda_plugin(&why);
    if (cuda == nullptr) throw ConfigError("", "--backend", "cuda: " + why + "; use --backend cpu");
    o.measure_cuda = [cuda](bool quick, const calibration::Progress& progress,
                            const std::string& command) {
      return cuda->run_benchmarks(quick, progress, command);
    };
  }
  calibration::CalibrateOutcome result;
  try {
    result = calibration::calibrate(o);
  } catch (...) {
    if (o.progress) std::fprintf(stderr, "\n");
    throw;
  }
  if (o.progress) std::fprintf(stderr, "\r\033[K");
  std::printf("%s", result.report.c_str());
  if (a.skip_mpi)
    std::printf("wrote raw data %s (no profile: --skip-mpi left out the MPI link it needs)\n",
                a.raw.c_str());
  else
    std::printf("wrote %s%s\n", a.out.c_str(),
                a.raw.empty() ? "" : fmt::format(" and raw data {}", a.raw).c_str());
  *status = 0;
}

}  // namespace

void register_calibrate(CLI::App& app, int* status) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* sub = app.add_subcommand(
      "calibrate", "Measure this machine (CPU backend or GPUs) and write a hardware profile");
  sub->add_option("--backend", args->backend,
                  "cpu (the executor's CPU backend), cuda (this node's GPUs), or auto (cuda when "
                  "a GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  sub->add_flag("--quick", args->quick, "smaller sweep (CPU: seconds; GPU: under 2 minutes)");
  sub->add_option("--out", args->out, "hardware profile YAML to write");
  sub->add_option("--raw", args->raw, "also keep the raw measurements as JSON");
  sub->add_option("--from-raw", args->from_raw,
                  "fit an existing raw JSON instead of measuring (backend taken from the file)");
  sub->add_option("--base", args->base,
                  "cuda: profile (shipped name or YAML) whose node and fabric the calibrated GPU "
                  "joins; default: the shipped profile of the same GPU");
  sub->add_option("--name", args->name, "profile name (default calibrated-cpu / calibrated-<gpu>)");
  sub->add_option("--mpirun", args->mpirun, "mpirun to launch the 2-rank MPI benchmark with");
  sub->add_flag("--skip-mpi", args->skip_mpi, "cpu: do not measure MPI (the profile needs it)");
  sub->add_option("--ranks", args->ranks,
                  "cpu: executor ranks (one core each) per host, the profile's GPUs per node "
                  "(default: the number of cores)");
  sub->add_option("--from-nccl-tests", args->nccl_logs,
                  "fit the --base profile's collective model to nccl-tests logs (text output or "
                  "-J JSON of all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                  "alltoall_perf, sendrecv_perf) and write it to --out");
  sub->add_option(
      "--from-trace", args->from_trace,
      "fit a PyTorch profiler (Kineto) Chrome trace of a training step, recorded with "
      "record_shapes=True, into the --base profile (GEMMs, element-wise kernels, NCCL)");
  sub->add_option("--log-collective", args->nccl_hints.collective,
                  "--from-nccl-tests: the logs' collective when neither the log nor its file name "
                  "says (all_reduce, all_gather, reduce_scatter, alltoall, sendrecv)");
  sub->add_option("--log-ranks", args->nccl_hints.ranks,
                  "--from-nccl-tests: ranks of the logs' runs when they lack '# Using devices' "
                  "lines");
  sub->add_option("--log-nodes", args->nccl_hints.nodes,
                  "--from-nccl-tests: nodes of the logs' runs when they lack '# Using devices' "
                  "lines");
  sub->add_option("--size-corrections", args->size_corrections,
                  "--from-nccl-tests: keep each log's measured / modelled time by size as the "
                  "profile's size correction (on, the default) or fit the model alone (off)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_flag("--host-adam", args->host_adam,
                "time the host CPU's Adam (an offloaded optimizer's update) on every core and "
                "write it into --base as node.host_memory_bandwidth_gb_per_s (with --out; "
                "--quick: a smaller buffer)");
  sub->add_option("--mpi-worker", args->mpi_worker)->group("");  // internal
  sub->callback([args, status, sub] {
    args->argv = {"pipewright", "calibrate"};
    for (const auto* opt : sub->get_options()) {
      if (opt->count() == 0 || opt->get_name() == "--help") continue;
      args->argv.push_back(opt->get_name());
      if (opt->get_expected_min() > 0)
        for (const auto& r : opt->results()) args->argv.push_back(r);
    }
    if (!args->from_raw.empty() && args->backend == "auto") args->backend = "";
    run(*args, status);
  });
}

}  // namespace pw::tools
