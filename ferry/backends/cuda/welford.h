// Welford's running mean and sum of squared deviations, and Chan et al.'s rule for combining two
// partial results, FERRY_HOST_DEVICE so that the CUDA batch norm kernel's statistics (partial
// per thread, per block, per split) are the arithmetic the host tests check against a two-pass
// computation. The count is exact (int64) whatever the accumulator type.
#pragma once

#include <cstdint>

#include "ferry/core/float_bits.h"  // FERRY_HOST_DEVICE

namespace ferry::cuda {

template <typename Acc>
struct Welford {
  int64_t count = 0;
  Acc mean = 0;
  Acc m2 = 0;  // sum of squared deviations from the mean

  FERRY_HOST_DEVICE void add(Acc v) {
    ++count;
    const Acc delta = v - mean;
    mean += delta / static_cast<Acc>(count);
    m2 += delta * (v - mean);
  }
  // The biased variance m2 / count (0 for no values).
  FERRY_HOST_DEVICE Acc variance() const {
    return count > 0 ? m2 / static_cast<Acc>(count) : Acc(0);
  }
};

template <typename Acc>
FERRY_HOST_DEVICE inline Welford<Acc> welford_combine(const Welford<Acc>& a,
                                                      const Welford<Acc>& b) {
  if (a.count == 0) return b;
  if (b.count == 0) return a;
  Welford<Acc> r;
  r.count = a.count + b.count;
  const Acc delta = b.mean - a.mean;
  const Acc b_share = static_cast<Acc>(b.count) / static_cast<Acc>(r.count);
  r.mean = a.mean + delta * b_share;
  r.m2 = a.m2 + b.m2 + delta * delta * static_cast<Acc>(a.count) * b_share;
  return r;
}

}  // namespace ferry::cuda
