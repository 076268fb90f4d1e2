// Half, BFloat16, Float8_e4m3fn and Float8_e5m2 against references written from the formats'
// definitions: decoding by std::ldexp on the fields, encoding by searching every finite value in
// double arithmetic, ties to the even pattern, then the format's (PyTorch's) overflow/NaN rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "ferry/core/bfloat16.h"
#include "ferry/core/float8.h"
#include "ferry/core/half.h"

namespace ferry {
namespace {

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%X", v);
  return buf;
}

uint32_t float_bits(float f) { return std::bit_cast<uint32_t>(f); }

// A binary format as its definition gives it, plus what PyTorch's conversion makes of NaN.
struct Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool ieee_specials;  // the all-ones exponent holds inf and NaN; else only S.1..1.1..1 is NaN
  uint32_t nan_out;    // what float -> format produces for a NaN
  bool nan_out_keeps_sign;
};

class Reference {
 public:
  explicit Reference(const Format& f) : f_(f) {
    const uint32_t mantissa_ones = (1u << f.mantissa_bits) - 1;
    const uint32_t max_exponent_field = (1u << f.exponent_bits) - 1;
    const uint32_t max_finite = f.ieee_specials
                                    ? (max_exponent_field << f.mantissa_bits) - 1
                                    : (max_exponent_field << f.mantissa_bits) + mantissa_ones - 1;
    for (uint32_t p = 0; p <= max_finite; ++p) magnitudes_.push_back(decode(p));
    // The value one step past the largest finite one, as if the exponent went on: rounding to it
    // is what overflow means.
    magnitudes_.push_back(unbounded_value(max_finite + 1));
  }

  uint32_t sign_bit() const { return 1u << (f_.exponent_bits + f_.mantissa_bits); }
  uint32_t pattern_count() const { return sign_bit() << 1; }
  uint32_t max_finite() const { return static_cast<uint32_t>(magnitudes_.size()) - 2; }
  // Non-negative finite values by pattern, then the virtual value past the largest.
  const std::vector<double>& magnitudes() const { return magnitudes_; }

  double decode(uint32_t pattern) const {
    const bool negative = (pattern & sign_bit()) != 0;
    const uint32_t e = (pattern >> f_.mantissa_bits) & ((1u << f_.exponent_bits) - 1);
    const uint32_t m = pattern & ((1u << f_.mantissa_bits) - 1);
    const uint32_t e_max = (1u << f_.exponent_bits) - 1;
    double v = 0;
    if (f_.ieee_specials && e == e_max) {
      v = m == 0 ? std::numeric_limits<double>::infinity() : std::nan("");
    } else if (!f_.ieee_specials && e == e_max && m == (1u << f_.mantissa_bits) - 1) {
      v = std::nan("");
    } else if (e == 0) {
      v = std::ldexp(static_cast<double>(m), 1 - f_.bias - f_.mantissa_bits);
    } else {
      v = unbounded_value(pattern & (sign_bit() - 1));
    }
    return negative ? -v : v;
  }

  uint32_t overflow_pattern() const {
    return f_.ieee_specials ? ((1u << f_.exponent_bits) - 1) << f_.mantissa_bits : nan_pattern();
  }
  uint32_t nan_pattern() const { return sign_bit() - 1; }

  uint32_t encode(float x) const {
    const uint32_t sign = std::signbit(x) ? sign_bit() : 0;
    if (std::isnan(x)) return f_.nan_out | (f_.nan_out_keeps_sign ? sign : 0);
    const double a = std::fabs(static_cast<double>(x));
    const uint32_t past_max = max_finite() + 1;
    uint32_t chosen = past_max;
    if (a < magnitudes_.back()) {
      // magnitudes_[lo] <= a < magnitudes_[lo + 1]; the differences below are exact in double.
      const auto it = std::upper_bound(magnitudes_.begin(), magnitudes_.end(), a);
      const auto lo = static_cast<uint32_t>(it - magnitudes_.begin()) - 1;
      const double below = a - magnitudes_[lo];
      const double above = magnitudes_[lo + 1] - a;
      if (below < above) {
        chosen = lo;
      } else if (above < below) {
        chosen = lo + 1;
      } else {
        chosen = (lo % 2 == 0) ? lo : lo + 1;
      }
    }
    if (chosen == past_max) chosen = overflow_pattern();
    return sign | chosen;
  }

 private:
  double unbounded_value(uint32_t magnitude_pattern) const {
    const uint32_t e = magnitude_pattern >> f_.mantissa_bits;
    const uint32_t m = magnitude_pattern & ((1u << f_.mantissa_bits) - 1);
    return std::ldexp(static_cast<double>((1u << f_.mantissa_bits) + m),
                      static_cast<int>(e) - f_.bias - f_.mantissa_bits);
  }

  Format f_;
  std::vector<double> magnitudes_;
};

template <typename T>
struct Traits;
template <>
struct Traits<Half> {
  static constexpr Format kFormat{5, 10, 15, true, 0x7E00, true};
  static float to_float(uint32_t b) { return half_bits_to_float(static_cast<uint16_t>(b)); }
  static uint32_t from_float(float f) { return float_to_half_bits(f); }
};
template <>
struct Traits<BFloat16> {
  static constexpr Format kFormat{8, 7, 127, true, 0x7FC0, false};
  static float to_float(uint32_t b) { return bfloat16_bits_to_float(static_cast<uint16_t>(b)); }
  static uint32_t from_float(float f) { return float_to_bfloat16_bits(f); }
};
template <>
struct Traits<Float8_e4m3fn> {
  static constexpr Format kFormat{4, 3, 7, false, 0x7F, true};
  static float to_float(uint32_t b) { return float8_e4m3fn_bits_to_float(static_cast<uint8_t>(b)); }
  static uint32_t from_float(float f) { return float_to_float8_e4m3fn_bits(f); }
};
template <>
struct Traits<Float8_e5m2> {
  static constexpr Format kFormat{5, 2, 15, true, 0x7F, true};
  static float to_float(uint32_t b) { return float8_e5m2_bits_to_float(static_cast<uint8_t>(b)); }
  static uint32_t from_float(float f) { return float_to_float8_e5m2_bits(f); }
};

template <typename T>
class NumericTypeTest : public ::testing::Test {
 protected:
  static const Reference& ref() {
    static const Reference r(Traits<T>::kFormat);
    return r;
  }
  static T make(uint32_t pattern) { return T::from_bits(static_cast<decltype(T::bits)>(pattern)); }
};

using Types = ::testing::Types<Half, BFloat16, Float8_e4m3fn, Float8_e5m2>;
TYPED_TEST_SUITE(NumericTypeTest, Types);

TYPED_TEST(NumericTypeTest, LayoutAndTraits) {
  using T = TypeParam;
  static_assert(std::is_trivially_copyable_v<T>);
  static_assert(sizeof(T) == sizeof(decltype(T::bits)) && alignof(T) == sizeof(T));
  static_assert(std::is_convertible_v<float, T> && std::is_convertible_v<T, float>);
  EXPECT_EQ(this->make(0x3F).bits, 0x3F);
}

// Every pattern widens to exactly the value its fields define; NaN stays NaN.
TYPED_TEST(NumericTypeTest, DecodeEveryPattern) {
  using T = TypeParam;
  const Reference& ref = this->ref();
  for (uint32_t p = 0; p < ref.pattern_count(); ++p) {
    const double want = ref.decode(p);
    const float got = static_cast<float>(this->make(p));
    ASSERT_EQ(float_bits(got), float_bits(Traits<T>::to_float(p))) << hex(p);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << hex(p) << " gave " << got;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << hex(p);
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << hex(p);
    }
  }
}

// bits -> float -> bits is the identity except on NaNs, which become the one NaN PyTorch makes.
TYPED_TEST(NumericTypeTest, RoundTripEveryPattern) {
  using T = TypeParam;
  const Reference& ref = this->ref();
  const Format& f = Traits<T>::kFormat;
  for (uint32_t p = 0; p < ref.pattern_count(); ++p) {
    const float wide = static_cast<float>(this->make(p));
    const uint32_t back = T(wide).bits;
    if (std::isnan(wide)) {
      const uint32_t sign = f.nan_out_keeps_sign ? (p & ref.sign_bit()) : 0;
      ASSERT_EQ(back, f.nan_out | sign) << hex(p) << " came back as " << hex(back);
    } else {
      ASSERT_EQ(back, p) << hex(p) << " came back as " << hex(back);
    }
  }
}

// For each pair of neighbours lo < hi (the last hi is the step past the largest finite value):
// the values themselves, the midpoint (a tie, to the even pattern) and one float ulp either side.
TYPED_TEST(NumericTypeTest, NeighboursAndMidpoints) {
  using T = TypeParam;
  const Reference& ref = this->ref();
  const std::vector<double>& v = ref.magnitudes();
  const auto expect = [&](double x, uint32_t want, const char* what, uint32_t lo) {
    const float xf = static_cast<float>(x);
    ASSERT_EQ(static_cast<double>(xf), x) << what << " is not a float, pair at " << hex(lo);
    for (const float s : {xf, -xf}) {
      const uint32_t sign = std::signbit(s) ? ref.sign_bit() : 0;
      const uint32_t got = Traits<T>::from_float(s);
      ASSERT_EQ(got, sign | want) << what << " " << s << " (float " << hex(float_bits(s))
                                  << ") gave " << hex(got) << ", pair at " << hex(lo);
      ASSERT_EQ(T(s).bits, got);
      ASSERT_EQ(ref.encode(s), got) << "reference disagrees at " << s;
    }
  };
  for (uint32_t lo = 0; lo <= ref.max_finite(); ++lo) {
    const uint32_t hi = lo + 1 > ref.max_finite() ? ref.overflow_pattern() : lo + 1;
    const double mid = (v[lo] + v[lo + 1]) / 2;
    const auto mid_f = static_cast<float>(mid);
    const double below = std::nextafter(mid_f, 0.0f);
    const double above = std::nextafter(mid_f, std::numeric_limits<float>::infinity());
    expect(v[lo], lo, "lo", lo);
    // bfloat16's step past its largest value is 2^128, beyond float.
    if (v[lo + 1] <= std::numeric_limits<float>::max()) expect(v[lo + 1], hi, "hi", lo);
    expect(mid, lo % 2 == 0 ? lo : hi, "midpoint", lo);
    expect(below, lo, "below midpoint", lo);
    expect(above, hi, "above midpoint", lo);
  }
}

// Random float bit patterns against the reference encoder: half of them uniform over all 2^32
// patterns, half with exponents near the format's range, where the rounding work happens.
TYPED_TEST(NumericTypeTest, RandomFloatsMatchReference) {
  using T = TypeParam;
  const Reference& ref = this->ref();
  const Format& f = Traits<T>::kFormat;
  constexpr uint32_t kSeed = 20240611;
  constexpr int kCount = 1 << 21;
  SCOPED_TRACE("std::mt19937 seed " + std::to_string(kSeed));
  std::mt19937 gen(kSeed);
  // Float exponent fields from below the smallest subnormal to past the largest finite value.
  const int low = std::max(0, 127 + (1 - f.bias) - f.mantissa_bits - 3);
  const int high = std::min(255, 127 + ((1 << f.exponent_bits) - 1 - f.bias) + 2);
  int failures = 0;
  for (int i = 0; i < 2 * kCount; ++i) {
    uint32_t bits = static_cast<uint32_t>(gen());
    if (i >= kCount) {
      const auto e = static_cast<uint32_t>(low + static_cast<int>(gen() % (high - low + 1)));
      bits = (bits & 0x807FFFFFu) | (e << 23);
    }
    const float x = std::bit_cast<float>(bits);
    const uint32_t got = Traits<T>::from_float(x);
    const uint32_t want = ref.encode(x);
    if (got != want && ++failures <= 10) {
      ADD_FAILURE() << "draw " << i << ": float " << hex(bits) << " (" << x << ") gave " << hex(got)
                    << ", reference " << hex(want);
    }
  }
  EXPECT_EQ(failures, 0);
}

TYPED_TEST(NumericTypeTest, SpecialInputs) {
  using T = TypeParam;
  const Reference& ref = this->ref();
  const Format& f = Traits<T>::kFormat;
  const uint32_t s = ref.sign_bit();
  const float inf = std::numeric_limits<float>::infinity();
  const uint32_t neg_nan = f.nan_out | (f.nan_out_keeps_sign ? s : 0);
  EXPECT_EQ(T(0.0f).bits, 0u);
  EXPECT_EQ(T(-0.0f).bits, s);
  EXPECT_EQ(T(inf).bits, ref.overflow_pattern());
  EXPECT_EQ(T(-inf).bits, s | ref.overflow_pattern());
  for (const uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0x7FA00000u}) {
    EXPECT_EQ(T(std::bit_cast<float>(nan)).bits, f.nan_out) << hex(nan);
    EXPECT_EQ(T(std::bit_cast<float>(nan | 0x80000000u)).bits, neg_nan) << hex(nan);
  }
  // Float subnormals and the float extremes.
  for (const float x : {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                        std::nextafter(std::numeric_limits<float>::min(), 0.0f),
                        std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()}) {
    EXPECT_EQ(T(x).bits, ref.encode(x)) << x;
    EXPECT_EQ(T(-x).bits, ref.encode(-x)) << -x;
  }
  // Largest and smallest subnormals, smallest normal, largest finite value, both signs.
  const uint32_t smallest_normal = 1u << f.mantissa_bits;
  for (const uint32_t p : {1u, smallest_normal - 1, smallest_normal, ref.max_finite()}) {
    const float x = static_cast<float>(ref.decode(p));
    EXPECT_EQ(T(x).bits, p) << hex(p);
    EXPECT_EQ(T(-x).bits, s | p) << hex(p);
  }
}

TYPED_TEST(NumericTypeTest, NumericLimitsAgreeWithTheFormat) {
  using T = TypeParam;
  using L = std::numeric_limits<T>;
  const Reference& ref = this->ref();
  const Format& f = Traits<T>::kFormat;
  static_assert(L::is_specialized && L::is_signed && !L::is_integer && !L::is_exact);
  static_assert(L::has_quiet_NaN && L::radix == 2 && L::has_denorm == std::denorm_present);
  EXPECT_EQ(L::digits, f.mantissa_bits + 1);
  EXPECT_EQ(L::has_infinity, f.ieee_specials);
  const double max = ref.decode(ref.max_finite());
  EXPECT_EQ(static_cast<float>(L::max()), max);
  EXPECT_EQ(static_cast<float>(L::lowest()), -max);
  EXPECT_EQ(static_cast<float>(L::min()), std::ldexp(1.0, L::min_exponent - 1));
  EXPECT_EQ(static_cast<float>(L::min()), std::ldexp(1.0, 1 - f.bias));
  EXPECT_EQ(static_cast<float>(L::denorm_min()), std::ldexp(1.0, L::min_exponent - L::digits));
  EXPECT_EQ(static_cast<float>(L::denorm_min()), ref.decode(1));
  EXPECT_EQ(static_cast<float>(L::epsilon()), std::ldexp(1.0, 1 - L::digits));
  const float eps = static_cast<float>(L::epsilon());
  EXPECT_EQ(static_cast<float>(T(1.0f + eps)), 1.0f + eps);  // the next value after 1
  EXPECT_EQ(static_cast<float>(T(1.0f + eps / 2)), 1.0f);    // the tie goes to 1 (even)
  EXPECT_EQ(static_cast<float>(L::round_error()), 0.5f);
  EXPECT_TRUE(std::isnan(static_cast<float>(L::quiet_NaN())));
  EXPECT_EQ(L::quiet_NaN().bits, f.nan_out);
  // 2^(max_exponent - 1) is finite and 2^max_exponent is not.
  EXPECT_LE(std::ldexp(1.0, L::max_exponent - 1), max);
  EXPECT_GT(std::ldexp(1.0, L::max_exponent), max);
  EXPECT_LE(std::pow(10.0, L::max_exponent10), max);
  EXPECT_GT(std::pow(10.0, L::max_exponent10 + 1), max);
  EXPECT_GE(std::pow(10.0, L::min_exponent10), static_cast<float>(L::min()));
  EXPECT_LT(std::pow(10.0, L::min_exponent10 - 1), static_cast<float>(L::min()));
  EXPECT_EQ(L::digits10, static_cast<int>(std::floor((L::digits - 1) * std::log10(2.0))));
  EXPECT_EQ(L::max_digits10, static_cast<int>(std::ceil(1 + L::digits * std::log10(2.0))));
  if constexpr (L::has_infinity) {
    EXPECT_EQ(L::infinity().bits, ref.overflow_pattern());
    EXPECT_TRUE(std::isinf(static_cast<float>(L::infinity())));
  }
  if constexpr (L::has_signaling_NaN) {
    EXPECT_TRUE(std::isnan(static_cast<float>(L::signaling_NaN())));
    // A signaling NaN has the top mantissa bit clear.
    EXPECT_EQ(L::signaling_NaN().bits & (1u << (f.mantissa_bits - 1)), 0u);
  }
}

TYPED_TEST(NumericTypeTest, PrintsTheFloatValue) {
  using T = TypeParam;
  std::ostringstream out;
  out << T(1.5f) << " " << T(-0.25f) << " " << this->make(0);
  EXPECT_EQ(out.str(), "1.5 -0.25 0");
}

// The exact NaN bits PyTorch's widening gives, and its NaN outputs, spelled out. Half and e5m2
// NaNs widen quiet with their payload; bfloat16 widens by a shift, so a signaling NaN stays one.
TEST(NumericTypesPyTorchRules, NanBits) {
  EXPECT_EQ(float_bits(half_bits_to_float(0x7E00)), 0x7FC00000u);
  EXPECT_EQ(float_bits(half_bits_to_float(0xFD01)), 0xFFE02000u);
  EXPECT_EQ(float_bits(half_bits_to_float(0x7C00)), 0x7F800000u);
  EXPECT_EQ(float_bits(bfloat16_bits_to_float(0xFF81)), 0xFF810000u);
  EXPECT_EQ(float_bits(float8_e4m3fn_bits_to_float(0x7F)), 0x7FF00000u);
  EXPECT_EQ(float_bits(float8_e4m3fn_bits_to_float(0xFF)), 0xFFF00000u);
  EXPECT_EQ(float_bits(float8_e5m2_bits_to_float(0x7D)), 0x7FE00000u);
  const float neg_nan = std::bit_cast<float>(0xFFC00001u);
  EXPECT_EQ(float_to_half_bits(neg_nan), 0xFE00u);
  EXPECT_EQ(float_to_bfloat16_bits(neg_nan), 0x7FC0u);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(neg_nan), 0xFFu);
  EXPECT_EQ(float_to_float8_e5m2_bits(neg_nan), 0xFFu);
}

TEST(NumericTypesPyTorchRules, OverflowThresholds) {
  const float inf = std::numeric_limits<float>::infinity();
  // Half: 65504 is the largest; the tie at 65520 goes to the even side, which is inf.
  EXPECT_EQ(float_to_half_bits(std::nextafter(65520.0f, 0.0f)), 0x7BFFu);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00u);
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xFC00u);
  // BFloat16: the largest float rounds to inf.
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x7F7F7FFFu)), 0x7F7Fu);
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x7F7F8000u)), 0x7F80u);
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7F80u);
  // e4m3fn does not saturate: 464 ties down to 448; anything above it and inf become NaN.
  EXPECT_EQ(float_to_float8_e4m3fn_bits(464.0f), 0x7Eu);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(-464.0f), 0xFEu);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(std::nextafter(464.0f, inf)), 0x7Fu);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(480.0f), 0x7Fu);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(1e30f), 0x7Fu);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(-inf), 0xFFu);
  // e5m2: 57344 is the largest; the tie at 61440 goes to inf.
  EXPECT_EQ(float_to_float8_e5m2_bits(std::nextafter(61440.0f, 0.0f)), 0x7Bu);
  EXPECT_EQ(float_to_float8_e5m2_bits(61440.0f), 0x7Cu);
  EXPECT_EQ(float_to_float8_e5m2_bits(-1e30f), 0xFCu);
}

TEST(NumericTypesPyTorchRules, SubnormalRounding) {
  // Half: 2^-25 is the tie between 0 and the smallest subnormal 2^-24.
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000u);
  EXPECT_EQ(float_to_half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002u);     // tie 1.5 units -> 2
  EXPECT_EQ(float_to_half_bits(std::ldexp(1023.5f, -24)), 0x0400u);  // into the smallest normal
  // BFloat16 keeps float's exponent range, so float subnormals round to bfloat16 subnormals.
  EXPECT_EQ(float_to_bfloat16_bits(std::ldexp(1.0f, -134)), 0x0000u);
  EXPECT_EQ(float_to_bfloat16_bits(std::ldexp(1.0f, -134) + std::ldexp(1.0f, -149)), 0x0001u);
  EXPECT_EQ(float_to_bfloat16_bits(std::ldexp(3.0f, -134)), 0x0002u);
  // e4m3fn: smallest subnormal 2^-9; e5m2: 2^-16.
  EXPECT_EQ(float_to_float8_e4m3fn_bits(std::ldexp(1.0f, -10)), 0x00u);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(std::ldexp(3.0f, -10)), 0x02u);
  EXPECT_EQ(float_to_float8_e4m3fn_bits(std::ldexp(7.5f, -9)), 0x08u);
  EXPECT_EQ(float_to_float8_e5m2_bits(std::ldexp(1.0f, -17)), 0x00u);
  EXPECT_EQ(float_to_float8_e5m2_bits(std::ldexp(3.0f, -17)), 0x02u);
  EXPECT_EQ(float_to_float8_e5m2_bits(-std::ldexp(3.5f, -16)), 0x84u);
}

// A double is rounded to float first, then to the narrow type (PyTorch does the same).
TEST(NumericTypesPyTorchRules, DoubleGoesThroughFloat) {
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);  // just above a half tie
  EXPECT_EQ(Half(x).bits, 0x3C00u);  // via float it is the tie itself, which goes to even
  EXPECT_EQ(Half(static_cast<float>(x)).bits, 0x3C00u);
  const double y = 448.0 + 16.0 + std::ldexp(1.0, -30);  // above e4m3fn's 464 tie
  EXPECT_EQ(Float8_e4m3fn(y).bits, 0x7Eu);
}

TEST(NumericTypes, ConstantEvaluation) {
  static_assert(Half(1.0f).bits == 0x3C00);
  static_assert(static_cast<float>(Half::from_bits(0x3555)) == 0.333251953125f);
  static_assert(BFloat16(1.0f).bits == 0x3F80);
  static_assert(static_cast<float>(BFloat16::from_bits(0xC040)) == -3.0f);
  static_assert(Float8_e4m3fn(448.0f).bits == 0x7E);
  static_assert(static_cast<float>(Float8_e4m3fn::from_bits(0x01)) == 0.001953125f);
  static_assert(Float8_e5m2(-57344.0f).bits == 0xFB);
  static_assert(static_cast<float>(Float8_e5m2::from_bits(0x01)) == 0.0000152587890625f);
  static_assert(static_cast<float>(std::numeric_limits<Half>::max()) == 65504.0f);
  SUCCEED();
}

TEST(NumericTypes, ComparisonsAndMixingGoThroughFloat) {
  const Half h = 1.5f;
  const BFloat16 b = 1.5f;
  const Float8_e4m3fn e4 = 1.5f;
  const Float8_e5m2 e5 = 1.5f;
  EXPECT_TRUE(h == b && b == e4 && e4 == e5);
  EXPECT_TRUE(h < 2.0f && 1.0 < b);
  EXPECT_EQ(h + b, 3.0f);
  const Half nan = std::numeric_limits<Half>::quiet_NaN();
  EXPECT_FALSE(nan == nan);
}

}  // namespace
}  // namespace ferry
