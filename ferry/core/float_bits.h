// Bit-level helpers shared by the reduced-precision float types (half.h, bfloat16.h, float8.h).
// Everything here is integer work or exact float products, so results are the same on host and
// device and do not depend on the rounding mode or on flush-to-zero settings.
#pragma once

#include <bit>
#include <cstdint>

#ifndef FERRY_HOST_DEVICE
#if defined(__CUDACC__)
#define FERRY_HOST_DEVICE __host__ __device__
#else
#define FERRY_HOST_DEVICE
#endif
#endif

#ifndef FERRY_HOST_DEVICE_INLINE
#define FERRY_HOST_DEVICE_INLINE FERRY_HOST_DEVICE inline
#endif

namespace ferry::detail {

inline constexpr int kFloatMantissaBits = 23;
inline constexpr int kFloatBias = 127;
inline constexpr uint32_t kFloatMagnitudeMask = 0x7FFFFFFFu;
inline constexpr uint32_t kFloatInfBits = 0x7F800000u;  // magnitudes above this are NaNs
inline constexpr uint32_t kFloatQuietBit = 0x00400000u;

FERRY_HOST_DEVICE constexpr uint32_t bits_of(float f) {
#if defined(__CUDACC__)
  // nvcc rejects std::bit_cast (a host-only constexpr function) in device code; the builtin
  // behind it is accepted on both sides.
  return __builtin_bit_cast(uint32_t, f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}

FERRY_HOST_DEVICE constexpr float float_from_bits(uint32_t bits) {
#if defined(__CUDACC__)
  return __builtin_bit_cast(float, bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

// value / 2^shift rounded to nearest, ties to even, for 1 <= shift <= 24. Adding
// 2^(shift-1) - 1 plus the kept part's low bit carries exactly when the dropped part is above
// one half, or equal to it with an odd kept part. Callers keep value + 2^(shift-1) < 2^32.
FERRY_HOST_DEVICE constexpr uint32_t shift_right_rne(uint32_t value, int shift) {
  const uint32_t half_minus_one = (uint32_t{1} << (shift - 1)) - 1u;
  const uint32_t kept_is_odd = (value >> shift) & 1u;
  return (value + half_minus_one + kept_is_odd) >> shift;
}

// Rounds a finite float magnitude (sign bit clear, given as bits) to the nearest value of a
// binary format with kMantissaBits stored mantissa bits and exponent bias kBias, ties to even.
// Returns that format's magnitude pattern (exponent field above mantissa field) computed as if
// the exponent had no upper limit: a result past the largest finite pattern means overflow, and
// each caller applies its format's overflow rule. A mantissa carry bumps the exponent field,
// which is exactly the next binade, so no case is needed for it.
template <int kMantissaBits, int kBias>
FERRY_HOST_DEVICE constexpr uint32_t round_magnitude(uint32_t magnitude) {
  constexpr int kShift = kFloatMantissaBits - kMantissaBits;
  constexpr int kMinNormalExponent = 1 - kBias;
  const int exponent_field = static_cast<int>(magnitude >> kFloatMantissaBits);
  if (exponent_field - kFloatBias >= kMinNormalExponent) {
    constexpr uint32_t kRebias = static_cast<uint32_t>(kFloatBias - kBias) << kFloatMantissaBits;
    return shift_right_rne(magnitude - kRebias, kShift);
  }
  // Below the format's normal range the result counts units of its smallest subnormal,
  // 2^(kMinNormalExponent - kMantissaBits); a count of 2^kMantissaBits is the smallest normal.
  const uint32_t significand = (magnitude & 0x007FFFFFu) | (exponent_field != 0 ? 0x00800000u : 0u);
  const int exponent = (exponent_field != 0 ? exponent_field : 1) - kFloatBias;
  const int shift = kShift + kMinNormalExponent - exponent;
  if (shift > 24) return 0;  // significand < 2^24: less than half the smallest subnormal
  return shift_right_rne(significand, shift);
}

// Float bits of a non-negative pattern of a format with kMantissaBits mantissa bits and bias
// kBias. `inf_or_nan` marks the format's special patterns: infinities stay infinite, and NaNs keep
// their payload with the quiet bit set, as PyTorch's widening through a float multiply does.
template <int kMantissaBits, int kBias>
FERRY_HOST_DEVICE constexpr uint32_t widen_magnitude(uint32_t magnitude, bool inf_or_nan) {
  static_assert(kFloatBias + 1 - kBias - kMantissaBits >= 1,
                "the format's smallest subnormal must be a normal float");
  constexpr int kShift = kFloatMantissaBits - kMantissaBits;
  const uint32_t exponent_field = magnitude >> kMantissaBits;
  const uint32_t mantissa = magnitude & ((uint32_t{1} << kMantissaBits) - 1u);
  if (inf_or_nan) {
    return kFloatInfBits | (mantissa << kShift) | (mantissa != 0 ? kFloatQuietBit : 0u);
  }
  if (exponent_field != 0) {
    return ((exponent_field + static_cast<uint32_t>(kFloatBias - kBias)) << kFloatMantissaBits) |
           (mantissa << kShift);
  }
  // Subnormal or zero: mantissa * 2^(1 - kBias - kMantissaBits). Both factors are normal floats
  // and so is any nonzero product, so the product is exact even with flush-to-zero.
  constexpr float kUnit = float_from_bits(
      static_cast<uint32_t>(kFloatBias + 1 - kBias - kMantissaBits) << kFloatMantissaBits);
  return bits_of(static_cast<float>(mantissa) * kUnit);
}

}  // namespace ferry::detail
