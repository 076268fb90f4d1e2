// Timing helpers shared by the benchmarks: a steady clock in milliseconds, the time one call
// takes, and the median of repeated samples (the mean of the middle two for an even count, 0
// for none). Header-only; nothing here is timed by tests.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace ferry::bench {

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class F>
double time_ms(F&& f) {
  const double t0 = now_ms();
  f();
  return now_ms() - t0;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace ferry::bench
