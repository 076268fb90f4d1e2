// Integer arithmetic for the CPU compute kernels that wraps modulo 2^bits, as PyTorch's kernels
// do in practice on two's-complement machines, without C++'s undefined behaviour on signed
// overflow (UBSan reports it, and an optimizer may assume it never happens). Sums of garbage
// integers, e.g. a fuzzed checkpoint's tensors, must give a value, not a crash.
// Guarantees: for signed integers the result is the exact result reduced modulo 2^bits; every
// other type (floating point, unsigned, bool) uses the plain operator. Negation that wraps is the
// copy engine's negate_element (ferry/iter/copy_element.h).
#pragma once

#include <cstdint>
#include <type_traits>

namespace ferry::cpu {

template <typename T>
constexpr bool wraps_v = std::is_integral_v<T>&& std::is_signed_v<T>;

template <typename T>
constexpr T wrapping_add(T a, T b) {
  if constexpr (wraps_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

template <typename T>
constexpr T wrapping_sub(T a, T b) {
  if constexpr (wraps_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  } else {
    return a - b;
  }
}

template <typename T>
constexpr T wrapping_mul(T a, T b) {
  if constexpr (wraps_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

}  // namespace ferry::cpu
