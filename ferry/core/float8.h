// ferry::Float8_e4m3fn (bias 7, no inf, NaN only at S.1111.111, max 448) and Float8_e5m2 (bias
// 15, IEEE-like, max 57344): one trivially copyable byte each, converted by PyTorch's c10 rules:
// float -> float8 rounds to nearest even; float8 -> float is exact (NaNs come out quiet).
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

#include "ferry/core/float_bits.h"

namespace ferry {

FERRY_HOST_DEVICE constexpr float float8_e4m3fn_bits_to_float(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t magnitude = bits & 0x7Fu;
  return detail::float_from_bits(sign |
                                 detail::widen_magnitude<3, 7>(magnitude, magnitude == 0x7Fu));
}

FERRY_HOST_DEVICE constexpr uint8_t float_to_float8_e4m3fn_bits(float f) {
  const uint32_t bits = detail::bits_of(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t magnitude = bits & detail::kFloatMagnitudeMask;
  uint32_t result = 0x7Fu;  // NaN, the answer for NaN and +-inf
  if (magnitude < detail::kFloatInfBits) {
    result = detail::round_magnitude<3, 7>(magnitude);
    // PyTorch does not saturate: a magnitude that rounds past 448 (above 464) becomes NaN.
    if (result > 0x7Eu) result = 0x7Fu;
  }
  return static_cast<uint8_t>(sign | result);  // PyTorch keeps the sign on NaN: -NaN is 0xFF
}

FERRY_HOST_DEVICE constexpr float float8_e5m2_bits_to_float(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t magnitude = bits & 0x7Fu;
  return detail::float_from_bits(sign |
                                 detail::widen_magnitude<2, 15>(magnitude, magnitude >= 0x7Cu));
}

FERRY_HOST_DEVICE constexpr uint8_t float_to_float8_e5m2_bits(float f) {
  const uint32_t bits = detail::bits_of(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t magnitude = bits & detail::kFloatMagnitudeMask;
  uint32_t result = 0;
  if (magnitude > detail::kFloatInfBits) {
    result = 0x7Fu;  // PyTorch quirk: every NaN becomes S.11111.11, keeping the sign
  } else {
    result = detail::round_magnitude<2, 15>(magnitude);
    if (result > 0x7Cu) result = 0x7Cu;  // from 61440 up (the tie goes to inf), and inf
  }
  return static_cast<uint8_t>(sign | result);
}

// A double argument converts to float first, so it is rounded twice, as in PyTorch.
struct alignas(1) Float8_e4m3fn {
  uint8_t bits;

  Float8_e4m3fn() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): converts implicitly, as float does
  FERRY_HOST_DEVICE constexpr Float8_e4m3fn(float f) : bits(float_to_float8_e4m3fn_bits(f)) {}
  FERRY_HOST_DEVICE constexpr operator float() const { return float8_e4m3fn_bits_to_float(bits); }

  FERRY_HOST_DEVICE static constexpr Float8_e4m3fn from_bits(uint8_t b) {
    Float8_e4m3fn v{};
    v.bits = b;
    return v;
  }
};

// A double argument converts to float first, so it is rounded twice, as in PyTorch.
struct alignas(1) Float8_e5m2 {
  uint8_t bits;

  Float8_e5m2() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): converts implicitly, as float does
  FERRY_HOST_DEVICE constexpr Float8_e5m2(float f) : bits(float_to_float8_e5m2_bits(f)) {}
  FERRY_HOST_DEVICE constexpr operator float() const { return float8_e5m2_bits_to_float(bits); }

  FERRY_HOST_DEVICE static constexpr Float8_e5m2 from_bits(uint8_t b) {
    Float8_e5m2 v{};
    v.bits = b;
    return v;
  }
};

static_assert(sizeof(Float8_e4m3fn) == 1 && alignof(Float8_e4m3fn) == 1);
static_assert(sizeof(Float8_e5m2) == 1 && alignof(Float8_e5m2) == 1);
static_assert(std::is_trivially_copyable_v<Float8_e4m3fn> &&
              std::is_trivially_default_constructible_v<Float8_e4m3fn>);
static_assert(std::is_trivially_copyable_v<Float8_e5m2> &&
              std::is_trivially_default_constructible_v<Float8_e5m2>);

inline std::ostream& operator<<(std::ostream& out, Float8_e4m3fn value) {
  return out << static_cast<float>(value);
}

inline std::ostream& operator<<(std::ostream& out, Float8_e5m2 value) {
  return out << static_cast<float>(value);
}

}  // namespace ferry

namespace std {

// Like PyTorch, no infinity() and no signaling_NaN(): the format has neither, and a call that
// would silently get some finite value is better refused at compile time.
template <>
class numeric_limits<ferry::Float8_e4m3fn> {
  using T = ferry::Float8_e4m3fn;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = true;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 4;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 3;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -5;
  static constexpr int min_exponent10 = -1;
  // 2^8 = 256 is the largest finite power of two, so 9 by the standard's definition; PyTorch
  // says 8.
  static constexpr int max_exponent = 9;
  static constexpr int max_exponent10 = 2;
  static constexpr bool traps = numeric_limits<float>::traps;
  static constexpr bool tinyness_before = false;

  FERRY_HOST_DEVICE static constexpr T min() noexcept { return T::from_bits(0x08); }
  FERRY_HOST_DEVICE static constexpr T lowest() noexcept { return T::from_bits(0xFE); }
  FERRY_HOST_DEVICE static constexpr T max() noexcept { return T::from_bits(0x7E); }
  FERRY_HOST_DEVICE static constexpr T epsilon() noexcept { return T::from_bits(0x20); }
  FERRY_HOST_DEVICE static constexpr T round_error() noexcept { return T::from_bits(0x30); }
  FERRY_HOST_DEVICE static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7F); }
  FERRY_HOST_DEVICE static constexpr T denorm_min() noexcept { return T::from_bits(0x01); }
};

// No signaling_NaN(), as in PyTorch: conversions never produce or preserve one.
template <>
class numeric_limits<ferry::Float8_e5m2> {
  using T = ferry::Float8_e5m2;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = true;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 3;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 2;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr bool traps = numeric_limits<float>::traps;
  static constexpr bool tinyness_before = false;

  FERRY_HOST_DEVICE static constexpr T min() noexcept { return T::from_bits(0x04); }
  FERRY_HOST_DEVICE static constexpr T lowest() noexcept { return T::from_bits(0xFB); }
  FERRY_HOST_DEVICE static constexpr T max() noexcept { return T::from_bits(0x7B); }
  FERRY_HOST_DEVICE static constexpr T epsilon() noexcept { return T::from_bits(0x34); }
  FERRY_HOST_DEVICE static constexpr T round_error() noexcept { return T::from_bits(0x38); }
  FERRY_HOST_DEVICE static constexpr T infinity() noexcept { return T::from_bits(0x7C); }
  FERRY_HOST_DEVICE static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7F); }
  FERRY_HOST_DEVICE static constexpr T denorm_min() noexcept { return T::from_bits(0x01); }
};

}  // namespace std
