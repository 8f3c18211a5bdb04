#pragma once
/// Units and integer time. Time is integer picoseconds so event ordering needs no epsilons;
/// quantities that are not time are strong types converted through named functions.
#include <cmath>
#include <cstdint>

namespace pw {

/// Simulated time in picoseconds.
using TimePs = std::int64_t;

inline constexpr TimePs kPsPerSecond = 1'000'000'000'000;
inline constexpr TimePs kPsPerMilli = 1'000'000'000;
inline constexpr TimePs kPsPerMicro = 1'000'000;
inline constexpr TimePs kPsPerNano = 1'000;

/// Seconds (double) to picoseconds, rounded to nearest.
inline TimePs seconds_to_ps(double s) { return static_cast<TimePs>(std::llround(s * 1e12)); }
/// Milliseconds (double) to picoseconds, rounded to nearest.
inline TimePs millis_to_ps(double ms) { return static_cast<TimePs>(std::llround(ms * 1e9)); }
inline double ps_to_seconds(TimePs t) { return static_cast<double>(t) * 1e-12; }
inline double ps_to_millis(TimePs t) { return static_cast<double>(t) * 1e-9; }

/// A byte count (double so that fractional per-rank shares compose without rounding).
struct Bytes {
  double value = 0;
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return {a.value + b.value}; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return {a.value - b.value}; }
  friend constexpr Bytes operator*(Bytes a, double k) { return {a.value * k}; }
  friend constexpr Bytes operator*(double k, Bytes a) { return {a.value * k}; }
  friend constexpr Bytes operator/(Bytes a, double k) { return {a.value / k}; }
  Bytes& operator+=(Bytes b) {
    value += b.value;
    return *this;
  }
  friend constexpr auto operator<=>(Bytes, Bytes) = default;
};

/// A floating-point operation count.
struct Flops {
  double value = 0;
  friend constexpr Flops operator+(Flops a, Flops b) { return {a.value + b.value}; }
  friend constexpr Flops operator*(Flops a, double k) { return {a.value * k}; }
  friend constexpr Flops operator*(double k, Flops a) { return {a.value * k}; }
  Flops& operator+=(Flops b) {
    value += b.value;
    return *this;
  }
  friend constexpr auto operator<=>(Flops, Flops) = default;
};

/// Bandwidth in bytes per second (1 GB/s = 1e9 B/s, as nccl-tests counts).
struct BytesPerSec {
  double value = 0;
  friend constexpr auto operator<=>(BytesPerSec, BytesPerSec) = default;
};

/// Throughput in floating-point operations per second.
struct FlopsPerSec {
  double value = 0;
  friend constexpr auto operator<=>(FlopsPerSec, FlopsPerSec) = default;
};

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;

inline Bytes gigabytes(double gb) { return {gb * kGB}; }
inline Bytes gibibytes(double gib) { return {gib * kGiB}; }
inline BytesPerSec gigabytes_per_sec(double gbps) { return {gbps * 1e9}; }
inline BytesPerSec gigabits_per_sec(double gbit) { return {gbit * 1e9 / 8.0}; }
inline FlopsPerSec teraflops(double tf) { return {tf * 1e12}; }

/// Time to move `b` at bandwidth `bw` (bw must be positive).
inline TimePs transfer_time(Bytes b, BytesPerSec bw) { return seconds_to_ps(b.value / bw.value); }
/// Time to compute `f` at throughput `r` (r must be positive).
inline TimePs compute_time(Flops f, FlopsPerSec r) { return seconds_to_ps(f.value / r.value); }

}  // namespace pw
