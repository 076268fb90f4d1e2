// Per-SIMD-target vector conversions between float32 and the 16-bit floats, shared by the
// contiguous conversion and the transpose kernels. Each one gives exactly the bits of ferry's
// scalar conversions (ferry/core/half.h, bfloat16.h): round to nearest even, PyTorch's NaNs,
// independent of MXCSR rounding and flush-to-zero settings. Included once per target.

// Highway's per-target include guard: toggles each time foreach_target re-includes this file.
#if defined(FERRY_BACKENDS_CPU_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FERRY_BACKENDS_CPU_CONVERT_INL_H_
#undef FERRY_BACKENDS_CPU_CONVERT_INL_H_
#else
#define FERRY_BACKENDS_CPU_CONVERT_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ferry::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// F16C (part of Highway's AVX2 and AVX3 targets) converts half <-> float in hardware.
#undef FERRY_CPU_HAVE_F16C
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define FERRY_CPU_HAVE_F16C 1
#else
#define FERRY_CPU_HAVE_F16C 0
#endif

// float32 -> bfloat16 bits: round to nearest even on the whole word (a mantissa carry steps the
// exponent, up to inf); every NaN becomes 0x7FC0, as PyTorch does.
// F32ToBF16Words leaves the bits in the low half of each 32-bit lane (the upper half zero), for
// callers that narrow several vectors at once.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> F32ToBF16Words(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::BitCast(du, v);
  const auto magnitude = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7FFFFFFFu)));
  const auto is_nan = hn::RebindMask(du, magnitude > hn::Set(di, 0x7F800000));
  const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), odd));
  (void)df;
  return hn::BitCast(di, hn::IfThenElse(is_nan, hn::Set(du, 0x7FC0u), rounded));
}

template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> F32ToBF16(DF df, hn::Vec<DF> v) {
  return hn::DemoteTo(hn::Rebind<uint16_t, DF>(), F32ToBF16Words(df, v));
}

// bfloat16 bits -> float32: exact (a shift, so signaling NaNs stay signaling, as in ferry).
template <class DF>
HWY_INLINE hn::Vec<DF> BF16ToF32(DF df, hn::Vec<hn::Rebind<uint16_t, DF>> h) {
  const hn::RebindToUnsigned<DF> du;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, h)));
}

// float32 -> half bits: round to nearest even, overflow to inf, every NaN to 0x7E00 with the
// sign kept (PyTorch's rule; the hardware would keep the payload instead).
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> F32ToF16(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const auto bits = hn::BitCast(du, v);
  const auto magnitude = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const auto is_nan = hn::BitCast(di, magnitude) > hn::Set(di, 0x7F800000);
  const auto nan_bits =
      hn::Or(hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u)), hn::Set(du, 0x7E00u));
#if FERRY_CPU_HAVE_F16C
  // The conversion instruction rounds to nearest even whatever MXCSR says (Highway passes an
  // explicit rounding immediate) and handles subnormals; only NaNs need fixing, and they are rare.
  const hn::Rebind<hwy::float16_t, DF> df16;
  auto h = hn::BitCast(du16, hn::DemoteTo(df16, v));
  if (HWY_UNLIKELY(!hn::AllFalse(di, is_nan))) {
    const auto wide = hn::IfThenElse(hn::RebindMask(du, is_nan), nan_bits, hn::PromoteTo(du, h));
    h = hn::DemoteTo(du16, hn::BitCast(di, wide));
  }
  (void)df;
  return h;
#else
  // Integer-only rounding, as ferry::detail::round_magnitude<10, 15>.
  const auto one = hn::Set(du, 1u);
  const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
  // Normal results: rebias the exponent and round away 13 mantissa bits; clamp overflow to inf.
  const auto rebiased = hn::Sub(magnitude, hn::Set(du, 0x38000000u));
  const auto normal_odd = hn::And(hn::ShiftRight<13>(rebiased), one);
  auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(rebiased, hn::Set(du, 0xFFFu)), normal_odd));
  normal = hn::Min(normal, hn::Set(du, 0x7C00u));
  // Subnormal results count units of 2^-24: shift the full significand right by 126 - exponent
  // (clamped to 25, where every significand below 2^24 rounds to zero).
  const auto exponent = hn::ShiftRight<23>(magnitude);
  const auto implicit = hn::IfThenElseZero(
      hn::RebindMask(du, hn::BitCast(di, exponent) > hn::Zero(di)), hn::Set(du, 0x800000u));
  const auto significand = hn::Or(hn::And(magnitude, hn::Set(du, 0x7FFFFFu)), implicit);
  auto shift = hn::Sub(hn::Set(di, 126), hn::BitCast(di, hn::Max(exponent, one)));
  shift = hn::Min(hn::Max(shift, hn::Set(di, 1)), hn::Set(di, 25));
  const auto ushift = hn::BitCast(du, shift);
  const auto half_minus_one = hn::Sub(one << hn::Sub(ushift, one), one);
  const auto sub_odd = hn::And(significand >> ushift, one);
  const auto subnormal = hn::Add(hn::Add(significand, half_minus_one), sub_odd) >> ushift;
  const auto is_normal = hn::BitCast(di, magnitude) > hn::Set(di, 0x387FFFFF);
  auto result = hn::IfThenElse(hn::RebindMask(du, is_normal), normal, subnormal);
  result = hn::Or(result, sign);
  result = hn::IfThenElse(hn::RebindMask(du, is_nan), nan_bits, result);
  (void)df;
  return hn::DemoteTo(du16, hn::BitCast(di, result));
#endif
}

// half bits -> float32: exact; NaNs keep their payload and come out quiet (as ferry's widening).
template <class DF>
HWY_INLINE hn::Vec<DF> F16ToF32(DF df, hn::Vec<hn::Rebind<uint16_t, DF>> h) {
#if FERRY_CPU_HAVE_F16C
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(df, hn::BitCast(df16, h));
#else
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto wide = hn::PromoteTo(du, h);
  const auto sign = hn::ShiftLeft<16>(hn::And(wide, hn::Set(du, 0x8000u)));
  const auto magnitude = hn::And(wide, hn::Set(du, 0x7FFFu));
  const auto mantissa = hn::And(wide, hn::Set(du, 0x3FFu));
  const auto normal = hn::Add(hn::ShiftLeft<13>(magnitude), hn::Set(du, 112u << 23));
  const auto quiet = hn::IfThenElseZero(
      hn::RebindMask(du, hn::BitCast(di, mantissa) > hn::Zero(di)), hn::Set(du, 0x400000u));
  const auto inf_nan = hn::Or(hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(mantissa)), quiet);
  // mantissa * 2^-24: both factors and every nonzero product are normal floats, so it is exact
  // even with flush-to-zero.
  const auto subnormal = hn::BitCast(
      du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mantissa)), hn::Set(df, 1.0f / 16777216.0f)));
  const auto m = hn::BitCast(di, magnitude);
  auto result = hn::IfThenElse(hn::RebindMask(du, m > hn::Set(di, 0x3FF)), normal, subnormal);
  result = hn::IfThenElse(hn::RebindMask(du, m > hn::Set(di, 0x7BFF)), inf_nan, result);
  return hn::BitCast(df, hn::Or(result, sign));
#endif
}

}  // namespace ferry::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FERRY_BACKENDS_CPU_CONVERT_INL_H_
