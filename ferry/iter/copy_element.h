// One element of a copy, as every ferry copy stores it: dst = neg?(conj?(convert_value<D>(src))).
// FERRY_HOST_DEVICE so that the CUDA copy kernels and the host share (and test) the exact same
// element rules as the CPU engine: conj only touches complex values; neg wraps integers, flips
// the sign bit of floating-point values (zero and NaN included) and leaves bool as it is.
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "ferry/core/convert.h"

namespace ferry {
namespace detail {

template <typename T>
inline constexpr bool is_std_complex_v = is_complex_type<T>::value;

}  // namespace detail

template <typename T>
FERRY_HOST_DEVICE inline T conj_element(T v) {
  if constexpr (detail::is_std_complex_v<T>) {
    return T(v.real(), -v.imag());
  } else {
    return v;
  }
}

template <typename T>
FERRY_HOST_DEVICE inline T negate_element(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U{0} - static_cast<U>(v)));
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T::from_bits(static_cast<uint16_t>(v.bits ^ 0x8000u));
  } else if constexpr (std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>) {
    return T::from_bits(static_cast<uint8_t>(v.bits ^ 0x80u));
  } else if constexpr (detail::is_std_complex_v<T>) {
    return T(-v.real(), -v.imag());
  } else {
    return -v;  // float, double
  }
}

template <typename D, typename S>
FERRY_HOST_DEVICE inline D copy_element(S v, bool conj, bool neg) {
  D out = convert_value<D>(v);
  if (conj) out = conj_element(out);
  if (neg) out = negate_element(out);
  return out;
}

// Reads one element; a bool byte other than 0 reads as true (never an invalid bool).
template <typename T>
FERRY_HOST_DEVICE inline T load_element(const void* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return *static_cast<const uint8_t*>(p) != 0;
  } else {
    return *static_cast<const T*>(p);
  }
}

}  // namespace ferry
