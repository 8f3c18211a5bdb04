#pragma once
/// The executor's hot loop, shared by every backend (header-only, no MPI or CUDA): for each action
/// of a rank's program, stamp the start, dispatch on the kind with a switch to the backend's
/// non-virtual member, stamp the end. Timestamps go into caller-preallocated arrays; nothing is
/// allocated per action.
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "executor/program.h"

namespace pw::exec {

/// Monotonic nanoseconds (steady_clock).
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Runs `n` actions on `backend`, recording start/end in nanoseconds of now_ns().
/// Backend needs: forward, backward_input, backward_weight, backward_full, recompute, send_f,
/// recv_f, send_b, recv_b, overlap, reduce_grad, unshard, reshard, pair_reduce, opt_step, each
/// taking `const ExecAction&`, and begin_action(const ExecAction&) for the watchdog's context.
template <class Backend>
void run_actions(Backend& backend, const ExecAction* actions, std::size_t n, std::int64_t* start_ns,
                 std::int64_t* end_ns) {
  for (std::size_t i = 0; i < n; ++i) {
    const ExecAction& a = actions[i];
    backend.begin_action(a);
    start_ns[i] = now_ns();
    switch (a.action.kind) {
      case ActionKind::kF:
        backend.forward(a);
        break;
      case ActionKind::kB:
        backend.backward_input(a);
        break;
      case ActionKind::kW:
        backend.backward_weight(a);
        break;
      case ActionKind::kBW:
        backend.backward_full(a);
        break;
      case ActionKind::kR:
        backend.recompute(a);
        break;
      case ActionKind::kSendF:
        backend.send_f(a);
        break;
      case ActionKind::kRecvF:
        backend.recv_f(a);
        break;
      case ActionKind::kSendB:
        backend.send_b(a);
        break;
      case ActionKind::kRecvB:
        backend.recv_b(a);
        break;
      case ActionKind::kOverlapFB:
        backend.overlap(a);
        break;
      case ActionKind::kReduceGrad:
        backend.reduce_grad(a);
        break;
      case ActionKind::kUnshard:
        backend.unshard(a);
        break;
      case ActionKind::kReshard:
        backend.reshard(a);
        break;
      case ActionKind::kPairReduce:
        backend.pair_reduce(a);
        break;
      case ActionKind::kOptStep:
        backend.opt_step(a);
        break;
    }
    end_ns[i] = now_ns();
  }
}

}  // namespace pw::exec
