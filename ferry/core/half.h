// ferry::Half: IEEE 754 binary16 storage (1 sign, 5 exponent, 10 mantissa bits, bias 15) whose
// conversions give PyTorch's c10::Half bits: float -> half rounds to nearest even and overflows to
// +-inf; half -> float is exact (NaNs come out quiet). Trivially copyable, two bytes, two-aligned.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

#include "ferry/core/float_bits.h"

namespace ferry {

FERRY_HOST_DEVICE constexpr float half_bits_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t magnitude = bits & 0x7FFFu;
  return detail::float_from_bits(sign |
                                 detail::widen_magnitude<10, 15>(magnitude, magnitude >= 0x7C00u));
}

FERRY_HOST_DEVICE constexpr uint16_t float_to_half_bits(float f) {
  const uint32_t bits = detail::bits_of(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & detail::kFloatMagnitudeMask;
  uint32_t result = 0;
  if (magnitude > detail::kFloatInfBits) {
    result = 0x7E00u;  // PyTorch quirk: every NaN becomes this one quiet NaN, keeping only the sign
  } else {
    result = detail::round_magnitude<10, 15>(magnitude);
    if (result > 0x7C00u) result = 0x7C00u;  // from 65520 up (the tie goes to inf), and inf
  }
  return static_cast<uint16_t>(sign | result);
}

// A double argument converts to float first (a standard conversion before this one), so it is
// rounded twice, as in PyTorch; Half(1 + 2^-11 + 2^-40) is 1, not the nearest half 1 + 2^-10.
struct alignas(2) Half {
  uint16_t bits;

  Half() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): converts implicitly, as float does
  FERRY_HOST_DEVICE constexpr Half(float f) : bits(float_to_half_bits(f)) {}
  FERRY_HOST_DEVICE constexpr operator float() const { return half_bits_to_float(bits); }

  FERRY_HOST_DEVICE static constexpr Half from_bits(uint16_t b) {
    Half h{};
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(Half) == 2 && alignof(Half) == 2);
static_assert(std::is_trivially_copyable_v<Half> &&
              std::is_trivially_default_constructible_v<Half>);

inline std::ostream& operator<<(std::ostream& out, Half value) {
  return out << static_cast<float>(value);
}

}  // namespace ferry

namespace std {

template <>
class numeric_limits<ferry::Half> {
  using T = ferry::Half;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = numeric_limits<float>::has_denorm_loss;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr bool traps = numeric_limits<float>::traps;
  static constexpr bool tinyness_before = numeric_limits<float>::tinyness_before;

  FERRY_HOST_DEVICE static constexpr T min() noexcept { return T::from_bits(0x0400); }
  FERRY_HOST_DEVICE static constexpr T lowest() noexcept { return T::from_bits(0xFBFF); }
  FERRY_HOST_DEVICE static constexpr T max() noexcept { return T::from_bits(0x7BFF); }
  FERRY_HOST_DEVICE static constexpr T epsilon() noexcept { return T::from_bits(0x1400); }
  FERRY_HOST_DEVICE static constexpr T round_error() noexcept { return T::from_bits(0x3800); }
  FERRY_HOST_DEVICE static constexpr T infinity() noexcept { return T::from_bits(0x7C00); }
  FERRY_HOST_DEVICE static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7E00); }
  FERRY_HOST_DEVICE static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7D00); }
  FERRY_HOST_DEVICE static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
};

}  // namespace std
