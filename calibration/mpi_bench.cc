#include "calibration/mpi_bench.h"

#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "calibration/cpu_bench.h"
#include "core/error.h"
#include "core/file_io.h"

namespace pw::calibration {
namespace {

std::vector<double> message_sizes(double max_bytes) {
  std::vector<double> out;
  for (double b = 8; b <= max_bytes; b *= 4) out.push_back(b);
  return out;
}

int repetitions_for(double bytes, bool quick) {
  if (bytes <= 64 * 1024) return quick ? 50 : 200;
  if (bytes <= 4 * 1024 * 1024) return quick ? 10 : 40;
  return quick ? 3 : 10;
}

/// Times `reps` repetitions `samples` times; each sample is the slowest rank's time per rep.
template <typename Fn>
Timing timed(MPI_Comm comm, int samples, int reps, double divisor, Fn fn) {
  fn();  // warm-up
  fn();
  std::vector<double> out;
  for (int s = 0; s < samples; ++s) {
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; ++r) fn();
    double local = (MPI_Wtime() - t0) / (reps * divisor), slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    out.push_back(slowest);
  }
  return summarize(std::move(out));
}

std::vector<TransferSample> ping_pong(MPI_Comm comm, int rank, bool quick) {
  std::vector<TransferSample> out;
  for (double bytes : message_sizes(quick ? 16.0 * 1024 * 1024 : 64.0 * 1024 * 1024)) {
    std::vector<char> buf(static_cast<std::size_t>(bytes), 1);
    int n = static_cast<int>(bytes);
    auto round_trip = [&] {
      if (rank == 0) {
        MPI_Send(buf.data(), n, MPI_CHAR, 1, 0, comm);
        MPI_Recv(buf.data(), n, MPI_CHAR, 1, 0, comm, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(buf.data(), n, MPI_CHAR, 0, 0, comm, MPI_STATUS_IGNORE);
        MPI_Send(buf.data(), n, MPI_CHAR, 0, 0, comm);
      }
    };
    Timing t = timed(comm, quick ? 7 : 15, repetitions_for(bytes, quick), 2.0, round_trip);
    out.push_back({"mpi_p2p", bytes, t});
  }
  return out;
}

/// Runs one collective on `count` doubles per rank-buffer as nccl-tests sizes them (S = total).
struct Coll {
  std::string op;
  MPI_Comm comm;
  int ranks;
  std::vector<double> send, recv;
  int count = 0;  ///< elements in the op's "count" (per-rank chunk for gather/scatter)

  void run() {
    if (op == "all_reduce")
      MPI_Allreduce(send.data(), recv.data(), count, MPI_DOUBLE, MPI_SUM, comm);
    else if (op == "all_gather")
      MPI_Allgather(send.data(), count, MPI_DOUBLE, recv.data(), count, MPI_DOUBLE, comm);
    else if (op == "reduce_scatter")
      MPI_Reduce_scatter_block(send.data(), recv.data(), count, MPI_DOUBLE, MPI_SUM, comm);
    else
      MPI_Bcast(send.data(), count, MPI_DOUBLE, 0, comm);
  }
};

/// Fills inputs with rank-dependent values, runs once, counts wrong output elements.
std::int64_t check_collective(Coll& c, int rank) {
  for (std::size_t i = 0; i < c.send.size(); ++i) c.send[i] = rank + 1 + static_cast<double>(i % 7);
  c.run();
  double n = c.ranks;
  std::int64_t wrong = 0;
  if (c.op == "all_reduce" || c.op == "reduce_scatter") {
    std::size_t offset = c.op == "reduce_scatter" ? static_cast<std::size_t>(rank) * c.count : 0;
    for (int i = 0; i < c.count; ++i) {
      double expect = n * (n + 1) / 2 + n * static_cast<double>((offset + i) % 7);
      wrong += c.recv[i] != expect;
    }
  } else if (c.op == "all_gather") {
    for (std::size_t i = 0; i < static_cast<std::size_t>(c.count) * c.ranks; ++i) {
      double expect = static_cast<double>(i / c.count) + 1 + static_cast<double>((i % c.count) % 7);
      wrong += c.recv[i] != expect;
    }
  } else {
    for (int i = 0; i < c.count; ++i) wrong += c.send[i] != 1 + static_cast<double>(i % 7);
  }
  std::int64_t total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_INT64_T, MPI_SUM, c.comm);
  return total;
}

std::vector<CollectiveSample> collectives(MPI_Comm comm, int rank, int ranks, bool quick) {
  std::vector<CollectiveSample> out;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}) {
    for (double bytes : message_sizes(quick ? 4.0 * 1024 * 1024 : 64.0 * 1024 * 1024)) {
      auto elems = static_cast<std::int64_t>(bytes / sizeof(double));
      bool split = std::string(op) == "all_gather" || std::string(op) == "reduce_scatter";
      if (elems < (split ? ranks : 1)) continue;
      Coll c{op, comm, ranks, {}, {}, 0};
      c.count = static_cast<int>(split ? elems / ranks : elems);
      std::size_t total = static_cast<std::size_t>(split ? c.count * ranks : c.count);
      c.send.assign(std::string(op) == "all_gather" ? c.count : total, 0.0);
      c.recv.assign(total, 0.0);
      std::int64_t wrong = check_collective(c, rank);
      Timing t = timed(comm, quick ? 7 : 15, repetitions_for(bytes, quick), 1.0, [&] { c.run(); });
      out.push_back({"mpi", op, ranks, static_cast<double>(total * sizeof(double)), t, wrong});
    }
  }
  return out;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

int run_mpi_worker(const std::string& out_path, bool quick) {
  MPI_Init(nullptr, nullptr);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) {
    if (rank == 0) std::fprintf(stderr, "calibration MPI worker: needs 2 or more ranks\n");
    MPI_Finalize();
    return 2;
  }
  RawResults raw;
  raw.provenance = cpu_provenance("", quick);
  raw.provenance.device_count = ranks;
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(len));
  raw.provenance.mpi = v.substr(0, v.find_first_of(",\n"));
  raw.transfers = ping_pong(MPI_COMM_WORLD, rank, quick);
  raw.collectives = collectives(MPI_COMM_WORLD, rank, ranks, quick);
  int status = 0;
  if (rank == 0) {
    try {
      write_file_atomic(out_path, raw_to_json(raw));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "calibration MPI worker: %s\n", e.what());
      status = 1;
    }
  }
  MPI_Finalize();
  return status;
}

void measure_mpi(const MpiLaunch& launch, RawResults& raw) {
  PW_ASSERT(!launch.worker.empty(), "MPI worker command is empty");
  if (geteuid() == 0) {  // Open MPI refuses root unless told twice
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  std::string dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  std::string out = fmt::format("{}/pw-calib-mpi-{}.json", dir, getpid());
  std::string err = out + ".stderr";
  std::string cmd =
      fmt::format("timeout 300 {} -np {} --oversubscribe", quote(launch.mpirun), launch.ranks);
  for (const auto& a : launch.worker) cmd += fmt::format(" {}", quote(a));
  cmd += fmt::format(" {} >/dev/null 2>{}", quote(out), quote(err));
  int rc = std::system(cmd.c_str());
  std::string errors;
  try {
    errors = read_file(err);
  } catch (const ConfigError&) {
  }
  std::remove(err.c_str());
  if (rc != 0) {
    std::remove(out.c_str());
    if (errors.size() > 2000) errors = errors.substr(0, 2000) + "...";
    throw ConfigError("mpirun", "",
                      fmt::format("the MPI benchmark job failed (status {}){}{}", rc,
                                  errors.empty() ? "" : ": ", errors));
  }
  RawResults mpi = raw_from_json(read_file(out), out);
  std::remove(out.c_str());
  raw.provenance.mpi = mpi.provenance.mpi;
  raw.transfers.insert(raw.transfers.end(), mpi.transfers.begin(), mpi.transfers.end());
  raw.collectives.insert(raw.collectives.end(), mpi.collectives.begin(), mpi.collectives.end());
}

}  // namespace pw::calibration
