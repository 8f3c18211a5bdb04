#pragma once
/// Watched MPI waits. Every blocking point of the executor (receives, collectives, the final
/// barrier) polls its request here instead of calling MPI_Wait. A rank that waits longer than the
/// limit asks every other rank (over a private communicator) what it is waiting for, collects the
/// answers for a short grace period, prints one report naming each rank's action and peer, and
/// calls MPI_Abort: a hang becomes a non-zero exit with a report, never a silent stall.
#include <mpi.h>

#include <cstdint>
#include <string>

#include "core/schedule.h"

namespace pw::exec {

class Watchdog {
 public:
  /// `world` is duplicated; `seconds` <= 0 disables the time limit (waits still answer others).
  /// `label` describes this rank, e.g. "rank 3 (dp 0, pp 3, tp 0)".
  Watchdog(MPI_Comm world, double seconds, std::string label);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// The action now running (reported when this rank is asked what it waits for).
  void set_action(const Action& a) { action_ = a; }
  /// Waits until `req` completes. `what` is a static description ("SEND_F", "TP all-reduce",
  /// "end-of-iteration barrier"); `peer` is the world rank waited on, or -1 for a group.
  /// With `limited` false the wait never fires (used while rank 0 computes the reference), but
  /// it still answers other ranks' reports.
  void wait(MPI_Request* req, const char* what, int peer, bool limited = true);
  /// Waits for all `n` requests (e.g. outstanding sends), same reporting.
  void wait_all(int n, MPI_Request* reqs, const char* what);
  /// For waits that are not MPI requests (CUDA events): call repeatedly while waiting `waited_s`
  /// seconds; answers other ranks' report requests and fires when the limit is exceeded.
  void poll(const char* what, int peer, double waited_s);
  double seconds() const { return seconds_; }

 private:
  std::string status_line(double waited_s) const;
  void answer_requests(double waited_s);
  [[noreturn]] void fire(double waited_s);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double seconds_;
  std::string label_;
  Action action_{};
  const char* what_ = "";
  int peer_ = -1;
  int lowest_asker_ = 1 << 30;  ///< lowest rank that asked us for a report
};

}  // namespace pw::exec
