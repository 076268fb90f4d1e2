// convert_value<To>(from): the element conversion every ferry copy follows, for all 14x14
// dtype pairs, defined for every input (no undefined behaviour, same on host and device):
//  - to bool: non-zero is true (NaN is true; a complex is true if either part is non-zero);
//  - complex to real keeps the real part; real to complex has a zero imaginary part;
//  - half, bfloat16 and float8 go through float, and so do integers and doubles converted to
//    them (double -> float -> half rounds twice, exactly as PyTorch does);
//  - float to int32/int64 truncates toward zero; NaN and values outside the target's range
//    give the target's minimum, which is what x86's truncating conversion (and so PyTorch on
//    x86) produces; float to int8/int16/uint8 converts to int32 that way and keeps the low
//    bits, as PyTorch on x86 does;
//  - integer to narrower integer keeps the low bits (two's complement wrap).
#pragma once

#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ferry/core/bfloat16.h"
#include "ferry/core/float8.h"
#include "ferry/core/float_bits.h"
#include "ferry/core/half.h"

namespace ferry {
namespace detail {

template <typename T>
struct is_complex_type : std::false_type {};
template <typename T>
struct is_complex_type<std::complex<T>> : std::true_type {};

template <typename T>
inline constexpr bool is_reduced_float_v =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8_e4m3fn> ||
    std::is_same_v<T, Float8_e5m2>;

// Truncation of a float or double to int64/int32 with x86's result for NaN and overflow.
template <typename I, typename F>
FERRY_HOST_DEVICE inline I truncate_to_int(F v) {
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());  // exact: a power of two
  constexpr F hi = -lo;
  if (!(v >= lo && v < hi)) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

// A real, non-reduced value (bool, integers, float, double) to a real, non-reduced type.
template <typename To, typename From>
FERRY_HOST_DEVICE inline To convert_real(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if constexpr (sizeof(To) == 8) {
      return truncate_to_int<int64_t>(v);
    } else {
      return static_cast<To>(truncate_to_int<int32_t>(v));
    }
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace detail

template <typename To, typename From>
FERRY_HOST_DEVICE inline To convert_value(From v) {
  using detail::is_complex_type;
  using detail::is_reduced_float_v;
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_complex_type<From>::value) {
    if constexpr (is_complex_type<To>::value) {
      using R = typename To::value_type;
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else if constexpr (std::is_same_v<To, bool>) {
      return v.real() != 0 || v.imag() != 0;
    } else {
      return convert_value<To>(v.real());
    }
  } else if constexpr (is_complex_type<To>::value) {
    using R = typename To::value_type;
    return To(convert_value<R>(v), R(0));
  } else if constexpr (is_reduced_float_v<From>) {
    return convert_value<To>(static_cast<float>(v));
  } else if constexpr (is_reduced_float_v<To>) {
    return To(detail::convert_real<float>(v));
  } else {
    return detail::convert_real<To>(v);
  }
}

}  // namespace ferry
