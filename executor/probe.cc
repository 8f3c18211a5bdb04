#include "executor/probe.h"

#include <time.h>

#include <algorithm>

#include "executor/model.h"

namespace pw::exec {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<double> probe_forward_samples(int calls) {
  ModelShape shape{"probe", 1, kProbeHidden, kProbeHidden / 16, 4 * kProbeHidden, kProbeTokens, 64};
  ParallelConfig pc;
  pc.micro_batch_size = 1;
  const ModelDims dims = make_model_dims(shape, pc, 1, "probe");
  StageModel m(dims, 0, 1, false, false, 0, 1, 1.0, nullptr);
  const Mat in = Mat::Random(kProbeTokens, kProbeHidden);
  auto call = [&] { m.forward(0, &in, 0, true); };
  call();  // caches, page faults, the allocator's first blocks
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(std::max(calls, 0)));
  for (int i = 0; i < calls; ++i) {
    const double t0 = thread_cpu_s();
    call();
    samples.push_back(thread_cpu_s() - t0);
  }
  return samples;
}

double probe_forward_ms(int calls) {
  std::vector<double> s = probe_forward_samples(std::max(calls, 1));
  std::nth_element(s.begin(), s.begin() + static_cast<long>(s.size() / 2), s.end());
  return s[s.size() / 2] * 1e3;
}

}  // namespace pw::exec
