// ferry::BFloat16: the upper half of a float (1 sign, 8 exponent, 7 mantissa bits, bias 127)
// whose conversions give PyTorch's c10::BFloat16 bits: float -> bfloat16 rounds to nearest even
// and overflows to +-inf; bfloat16 -> float is exact. Trivially copyable, two bytes, two-aligned.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

#include "ferry/core/float_bits.h"

namespace ferry {

// A shift, so even a signaling NaN stays signaling (PyTorch does the same).
FERRY_HOST_DEVICE constexpr float bfloat16_bits_to_float(uint16_t bits) {
  return detail::float_from_bits(static_cast<uint32_t>(bits) << 16);
}

FERRY_HOST_DEVICE constexpr uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t bits = detail::bits_of(f);
  if ((bits & detail::kFloatMagnitudeMask) > detail::kFloatInfBits) {
    return 0x7FC0u;  // PyTorch quirk: every NaN becomes +NaN 0x7FC0, dropping the sign too
  }
  // Same exponent range as float, so rounding the whole word is enough: a carry out of the
  // mantissa steps the exponent, and from the largest finite value it lands exactly on inf. The
  // sign bit is never reached because magnitude + 2^15 < 2^31.
  return static_cast<uint16_t>(detail::shift_right_rne(bits, 16));
}

// A double argument converts to float first, so it is rounded twice, as in PyTorch.
struct alignas(2) BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): converts implicitly, as float does
  FERRY_HOST_DEVICE constexpr BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}
  FERRY_HOST_DEVICE constexpr operator float() const { return bfloat16_bits_to_float(bits); }

  FERRY_HOST_DEVICE static constexpr BFloat16 from_bits(uint16_t b) {
    BFloat16 h{};
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(BFloat16) == 2 && alignof(BFloat16) == 2);
static_assert(std::is_trivially_copyable_v<BFloat16> &&
              std::is_trivially_default_constructible_v<BFloat16>);

inline std::ostream& operator<<(std::ostream& out, BFloat16 value) {
  return out << static_cast<float>(value);
}

}  // namespace ferry

namespace std {

template <>
class numeric_limits<ferry::BFloat16> {
  using T = ferry::BFloat16;

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
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = numeric_limits<float>::traps;
  static constexpr bool tinyness_before = numeric_limits<float>::tinyness_before;

  FERRY_HOST_DEVICE static constexpr T min() noexcept { return T::from_bits(0x0080); }
  FERRY_HOST_DEVICE static constexpr T lowest() noexcept { return T::from_bits(0xFF7F); }
  FERRY_HOST_DEVICE static constexpr T max() noexcept { return T::from_bits(0x7F7F); }
  FERRY_HOST_DEVICE static constexpr T epsilon() noexcept { return T::from_bits(0x3C00); }
  FERRY_HOST_DEVICE static constexpr T round_error() noexcept { return T::from_bits(0x3F00); }
  FERRY_HOST_DEVICE static constexpr T infinity() noexcept { return T::from_bits(0x7F80); }
  FERRY_HOST_DEVICE static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7FC0); }
  // 0x7FA0 as in current PyTorch; PyTorch 1.13 returned 0x7F80, which is infinity.
  FERRY_HOST_DEVICE static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7FA0); }
  FERRY_HOST_DEVICE static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
};

}  // namespace std
