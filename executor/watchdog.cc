#include "executor/watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/dependency.h"
#include "executor/action_loop.h"

namespace pw::exec {
namespace {

constexpr int kTagAsk = 1;
constexpr int kTagAnswer = 2;
constexpr int kAbortCode = 3;

void back_off(int spins) {
  // Spin briefly (low latency when the peer is close), then yield, then sleep so oversubscribed
  // ranks leave the cores to the ranks doing work.
  if (spins < 64) return;
  if (spins < 1024) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

Watchdog::Watchdog(MPI_Comm world, double seconds, std::string label)
    : seconds_(seconds), label_(std::move(label)) {
  MPI_Comm_dup(world, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Watchdog::~Watchdog() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::string Watchdog::status_line(double waited_s) const {
  std::string peer = peer_ >= 0 ? fmt::format(" from rank {}", peer_) : "";
  return fmt::format("{}: waiting {:.1f} s in {} ({}){}", label_, waited_s,
                     describe_action(action_), what_, peer);
}

void Watchdog::answer_requests(double waited_s) {
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(MPI_ANY_SOURCE, kTagAsk, comm_, &flag, &st);
  while (flag) {
    int dummy = 0;
    MPI_Recv(&dummy, 1, MPI_INT, st.MPI_SOURCE, kTagAsk, comm_, MPI_STATUS_IGNORE);
    lowest_asker_ = std::min(lowest_asker_, st.MPI_SOURCE);
    const std::string line = status_line(waited_s);
    MPI_Send(line.data(), static_cast<int>(line.size()), MPI_CHAR, st.MPI_SOURCE, kTagAnswer,
             comm_);
    MPI_Iprobe(MPI_ANY_SOURCE, kTagAsk, comm_, &flag, &st);
  }
}

void Watchdog::wait(MPI_Request* req, const char* what, int peer, bool limited) {
  what_ = what;
  peer_ = peer;
  const std::int64_t start = now_ns();
  for (int spins = 0;; ++spins) {
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if ((spins & 15) == 15) {
      const double waited = static_cast<double>(now_ns() - start) * 1e-9;
      answer_requests(waited);
      if (limited && seconds_ > 0 && waited > seconds_) fire(waited);
    }
    back_off(spins);
  }
}

void Watchdog::poll(const char* what, int peer, double waited_s) {
  what_ = what;
  peer_ = peer;
  answer_requests(waited_s);
  if (seconds_ > 0 && waited_s > seconds_) fire(waited_s);
}

void Watchdog::wait_all(int n, MPI_Request* reqs, const char* what) {
  for (int i = 0; i < n; ++i) wait(&reqs[i], what, -1);
}

void Watchdog::fire(double waited_s) {
  std::vector<std::string> lines(static_cast<std::size_t>(size_));
  lines[rank_] = status_line(waited_s);
  std::vector<MPI_Request> asks;
  int ask = 1;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    asks.emplace_back();
    MPI_Isend(&ask, 1, MPI_INT, r, kTagAsk, comm_, &asks.back());
  }
  // Collect answers for a grace period; ranks that are computing (or dead) stay unanswered.
  const std::int64_t grace_end = now_ns() + 2'000'000'000LL;
  int answered = 1;
  while (answered < size_ && now_ns() < grace_end) {
    answer_requests(waited_s);  // another rank may have fired at the same time
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagAnswer, comm_, &flag, &st);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    std::string line(static_cast<std::size_t>(count), '\0');
    MPI_Recv(line.data(), count, MPI_CHAR, st.MPI_SOURCE, kTagAnswer, comm_, MPI_STATUS_IGNORE);
    if (lines[st.MPI_SOURCE].empty()) ++answered;
    lines[st.MPI_SOURCE] = std::move(line);
  }
  // Ranks that fired together: the lowest one prints, the others keep answering until it aborts
  // the job (and print themselves only if that never happens).
  const std::int64_t defer_end = now_ns() + 5'000'000'000LL;
  while (lowest_asker_ < rank_ && now_ns() < defer_end) {
    answer_requests(waited_s);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::string report = fmt::format(
      "pipewright execute: watchdog: rank {} made no progress for {:.1f} s (limit {:.1f} s); "
      "what every rank waits for:\n",
      rank_, waited_s, seconds_);
  for (int r = 0; r < size_; ++r)
    report +=
        "  " +
        (lines[r].empty() ? fmt::format("rank {}: no answer (busy computing?)", r) : lines[r]) +
        "\n";
  report += "pipewright execute: aborting all ranks\n";
  std::fputs(report.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kAbortCode);
  std::abort();
}

}  // namespace pw::exec
