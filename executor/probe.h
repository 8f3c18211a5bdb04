#pragma once
/// The machine probe calibration and the CPU executor share: the executor's own layer forward
/// (one layer, h = 256, 128 tokens, micro batch 1, ffn 4h, heads of 16), timed in this thread's
/// CPU time. Calibration times it on every core and keeps the figure of the core it pinned to
/// (the profile's `calibration_probe`); the executor times it on each rank before the run
/// (MeasuredRun::probe_ms), so `compare` can tell a machine that changed speed since
/// calibration from a model that is wrong.
#include <vector>

namespace pw::exec {

/// This thread's CPU time, seconds: the clock of the probe and of every CPU calibration sample.
/// The executor's model gives each rank a core of its own; CPU time measures the work as it runs
/// on such a core even while other jobs share the machine (wall-clock medians on a busy 2-core
/// VM came out 2-5x slow, and a measured table then carried that into every prediction).
double thread_cpu_s();

inline constexpr int kProbeHidden = 256;
inline constexpr int kProbeTokens = 128;

/// Seconds per call of the probe on this thread: `calls` timed calls after one untimed.
std::vector<double> probe_forward_samples(int calls);

/// The median of probe_forward_samples(calls), in milliseconds.
double probe_forward_ms(int calls);

}  // namespace pw::exec
