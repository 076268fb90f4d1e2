// The reference CPU copy: plain strided loops, one element at a time through convert_value,
// then conj and neg. It is the yardstick the tuned kernels (plan_copy/run_copy) are tested
// against, so it stays simple enough to be checked by reading.
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/core/bfloat16.h"
#include "ferry/core/float8.h"
#include "ferry/core/half.h"

namespace ferry::cpu {

// Runs `problem` serially: for every index, dst = neg?(conj?(convert_value<dst>(src))).
// Accepts any problem whose arrays have equal lengths (the coalescing invariants are not
// needed); a 0-d problem copies one element.
void run_copy_reference(const CopyProblem& problem);

// The negation a copy applies when the neg bits differ, in the destination's type: wrapping
// (two's complement) for integers, a sign flip for floating-point values (zero and NaN
// included), both parts for complex values; bool is left as it is (-true is still non-zero).
template <typename T>
T negate_value(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U{0} - static_cast<U>(v)));
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T::from_bits(static_cast<uint16_t>(v.bits ^ 0x8000u));
  } else if constexpr (std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>) {
    return T::from_bits(static_cast<uint8_t>(v.bits ^ 0x80u));
  } else {
    return -v;  // float, double, std::complex
  }
}

// The conjugation a copy applies when the conj bits differ: complex values only.
template <typename T>
T conj_value(T v) {
  if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return std::conj(v);
  } else {
    return v;
  }
}

}  // namespace ferry::cpu
