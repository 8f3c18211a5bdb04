// Executor overhead per action: the shared dispatch loop (executor/action_loop.h) with a null
// backend, i.e. timestamping, the watchdog context store, the switch and a backend member call,
// without compute or communication. Target: under 5 microseconds per action on CPU.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "executor/action_loop.h"
#include "planner/schedules/generator.h"

namespace {

using pw::exec::ExecAction;

// Does the bookkeeping a real backend does around compute: the current action for the watchdog
// and a per-(stage, microbatch) state slot lookup.
class NullBackend {
 public:
  NullBackend(int stages, int microbatches)
      : m_(microbatches), state_(static_cast<std::size_t>(stages) * microbatches * 2, 0) {}
  void begin_action(const ExecAction& a) { current_ = a.action; }
  void forward(const ExecAction& a) { touch(a, 0); }
  void backward_input(const ExecAction& a) { touch(a, 1); }
  void backward_weight(const ExecAction& a) { touch(a, 1); }
  void backward_full(const ExecAction& a) { touch(a, 1); }
  void recompute(const ExecAction& a) { touch(a, 0); }
  void send_f(const ExecAction& a) { touch(a, 0); }
  void recv_f(const ExecAction& a) { touch(a, 0); }
  void send_b(const ExecAction& a) { touch(a, 1); }
  void recv_b(const ExecAction& a) { touch(a, 1); }
  void overlap(const ExecAction& a) { touch(a, 0); }
  void reduce_grad(const ExecAction&) { ++collectives_; }
  void unshard(const ExecAction&) { ++collectives_; }
  void reshard(const ExecAction&) { ++collectives_; }
  void pair_reduce(const ExecAction&) { ++collectives_; }
  void opt_step(const ExecAction&) { ++collectives_; }
  std::int64_t checksum() const { return collectives_ + state_[0] + current_.microbatch; }

 private:
  void touch(const ExecAction& a, int dir) {
    ++state_[(static_cast<std::size_t>(a.action.stage) * m_ + a.action.microbatch) * 2 + dir];
  }
  int m_;
  std::vector<std::int64_t> state_;
  std::int64_t collectives_ = 0;
  pw::Action current_{};
};

void BM_DispatchPerAction(benchmark::State& state, const char* schedule) {
  pw::GeneratorParams gp;
  gp.p = 4;
  gp.m = static_cast<int>(state.range(0));
  const pw::Schedule s = pw::generate_schedule(pw::default_registry(), schedule, gp);
  std::vector<ExecAction> list;
  for (const pw::Action& a : s.actions[1]) list.push_back(ExecAction{a, 0, -1});
  std::vector<std::int64_t> start(list.size()), end(list.size());
  NullBackend be(s.placement.num_stages(), s.num_microbatches);
  for (auto _ : state) {
    pw::exec::run_actions(be, list.data(), list.size(), start.data(), end.data());
    benchmark::DoNotOptimize(be.checksum());
    benchmark::DoNotOptimize(end.back());
  }
  state.counters["per_action"] = benchmark::Counter(
      static_cast<double>(list.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(BM_DispatchPerAction, 1f1b, "1f1b")->Arg(64)->Arg(1024);
BENCHMARK_CAPTURE(BM_DispatchPerAction, zb_h1, "zb-h1")->Arg(1024);

}  // namespace

BENCHMARK_MAIN();
