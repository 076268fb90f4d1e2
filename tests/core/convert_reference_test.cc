// convert_value's integer and bool rules against a reference written from the rules themselves,
// sharing no code with it (the copy oracles in tests/ops and tests/cpu use convert_value, so
// they cannot catch a wrong rule):
//  - to bool: any non-zero value is true (NaN too; a complex one if either part is non-zero);
//  - float to int32/int64: truncation toward zero, computed here from the float's bits; NaN,
//    infinities and values outside the target's range give its minimum (x86's result, which is
//    what PyTorch produces on x86); float to int8/int16/uint8 goes through int32 that way and
//    keeps the low bits;
//  - integer to integer: the low bits, two's complement (wrap-around);
//  - complex to real keeps the real part; half, bfloat16 and float8 count as their float value.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/core/convert.h"
#include "tests/support/random.h"

namespace ferry {
namespace {

__extension__ using int128 = __int128;

// ---- the reference ---------------------------------------------------------------------------

// trunc(v) exactly, from the bits of a double: |v| = significand * 2^(exponent - 1075), so the
// integer part is the significand shifted by that power. nullopt for NaN and infinities, and for
// magnitudes of 2^120 or more (outside every target's range anyway).
std::optional<int128> truncate_bits(double v) {
  const auto bits = std::bit_cast<uint64_t>(v);
  const bool negative = (bits >> 63) != 0;
  const auto exponent = static_cast<int>((bits >> 52) & 0x7FF);
  if (exponent == 0x7FF) return std::nullopt;
  if (exponent == 0) return 0;  // zero or subnormal: |v| < 1
  const uint64_t significand = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  const int shift = exponent - 1075;
  int128 magnitude;
  if (shift >= 67) return std::nullopt;
  if (shift >= 0) {
    magnitude = static_cast<int128>(significand) << shift;
  } else if (shift > -64) {
    magnitude = static_cast<int128>(significand >> -shift);
  } else {
    magnitude = 0;
  }
  return negative ? -magnitude : magnitude;
}

// The value of the low `bits` bits of x as a `bits`-bit integer, signed or not.
int128 low_bits(int128 x, int bits, bool is_signed) {
  const int128 modulus = int128{1} << bits;
  int128 r = x % modulus;
  if (r < 0) r += modulus;
  if (is_signed && r >= modulus / 2) r -= modulus;
  return r;
}

template <typename I>
constexpr int bits_of() {
  return static_cast<int>(8 * sizeof(I));
}

// Integer (or bool) value to an integer or bool target.
template <typename To>
To ref_from_integer(int128 v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != 0;
  } else {
    return static_cast<To>(low_bits(v, bits_of<To>(), std::is_signed_v<To>));
  }
}

// The int32/int64 result of truncating v: the target's minimum when v is NaN, infinite or its
// integer part is outside the target's range.
template <typename I>
I ref_truncate(double v) {
  const std::optional<int128> t = truncate_bits(v);
  const int128 lo = -(int128{1} << (bits_of<I>() - 1));
  const int128 hi = (int128{1} << (bits_of<I>() - 1)) - 1;
  if (!t || *t < lo || *t > hi) return std::numeric_limits<I>::min();
  return static_cast<I>(*t);
}

// A floating value (float and double exactly as double) to an integer or bool target.
template <typename To>
To ref_from_floating(double v) {
  if constexpr (std::is_same_v<To, bool>) {
    // Non-zero: any bit set besides the sign (NaN has mantissa bits; -0.0 has none).
    return (std::bit_cast<uint64_t>(v) & ~(uint64_t{1} << 63)) != 0;
  } else if constexpr (sizeof(To) >= 4) {
    return static_cast<To>(ref_truncate<std::conditional_t<sizeof(To) == 8, int64_t, int32_t>>(v));
  } else {
    return ref_from_integer<To>(ref_truncate<int32_t>(v));
  }
}

template <typename T>
inline constexpr bool kIsComplex =
    std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;

template <typename To, typename From>
To reference(From v) {
  if constexpr (std::is_same_v<From, bool>) {
    return ref_from_integer<To>(v ? 1 : 0);
  } else if constexpr (std::is_integral_v<From>) {
    return ref_from_integer<To>(static_cast<int128>(v));
  } else if constexpr (kIsComplex<From>) {
    if constexpr (std::is_same_v<To, bool>) {
      return ref_from_floating<bool>(v.real()) || ref_from_floating<bool>(v.imag());
    } else {
      return ref_from_floating<To>(static_cast<double>(v.real()));
    }
  } else if constexpr (std::is_floating_point_v<From>) {
    return ref_from_floating<To>(static_cast<double>(v));
  } else {  // half, bfloat16, float8: their float value (exact in double)
    return ref_from_floating<To>(static_cast<double>(static_cast<float>(v)));
  }
}

// ---- the values ------------------------------------------------------------------------------

std::vector<int64_t> integer_values(std::mt19937_64& rng) {
  std::vector<int64_t> v = {0,
                            1,
                            -1,
                            2,
                            127,
                            128,
                            -128,
                            -129,
                            255,
                            256,
                            257,
                            -255,
                            -256,
                            32767,
                            32768,
                            -32768,
                            -32769,
                            65535,
                            65536,
                            int64_t{1} << 31,
                            (int64_t{1} << 31) - 1,
                            -(int64_t{1} << 31),
                            -(int64_t{1} << 31) - 1,
                            (int64_t{1} << 32) + 5,
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::min() + 1};
  for (int i = 0; i < 2000; ++i) {
    const uint64_t r = rng();
    v.push_back(static_cast<int64_t>(r >> (r % 64)));  // every magnitude
    v.push_back(-static_cast<int64_t>(r % 100000));
  }
  return v;
}

std::vector<double> floating_values(std::mt19937_64& rng) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v = {0.0,
                           -0.0,
                           0.5,
                           -0.5,
                           0.999,
                           -0.999,
                           1.0,
                           1.5,
                           -1.5,
                           2.5,
                           -2.5,
                           127.9,
                           128.0,
                           -128.9,
                           -129.0,
                           255.5,
                           256.0,
                           -1.0,
                           70000.7,
                           -70000.7,
                           2147483647.0,
                           2147483647.9,
                           2147483648.0,
                           -2147483648.0,
                           -2147483648.9,
                           -2147483649.0,
                           4294967296.0 + 300.0,
                           9223372036854774784.0,  // the largest double below 2^63
                           9223372036854775808.0,  // 2^63
                           -9223372036854775808.0,
                           -9223372036854777856.0,  // the next double below -2^63
                           1e30,
                           -1e30,
                           1e300,
                           std::numeric_limits<double>::denorm_min(),
                           -std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::lowest(),
                           inf,
                           -inf,
                           nan,
                           -nan,
                           static_cast<double>(2147483520.0f),  // the largest float below 2^31
                           static_cast<double>(std::numeric_limits<float>::max())};
  std::uniform_real_distribution<double> moderate(-70000.0, 70000.0);
  for (int i = 0; i < 2000; ++i) {
    v.push_back(std::bit_cast<double>(rng()));  // any bits: every exponent, NaN payloads
    v.push_back(moderate(rng));
    // Near the int32 and int64 limits, where rounding to float moves values across them.
    v.push_back(2147483648.0 + static_cast<double>(static_cast<int64_t>(rng() % 512) - 256));
    v.push_back(std::ldexp(1.0 + static_cast<double>(rng() % 1024) / 1024.0, 62));
  }
  return v;
}

template <typename From>
std::vector<From> source_values(std::mt19937_64& rng) {
  std::vector<From> out;
  if constexpr (std::is_same_v<From, bool>) {
    out = {false, true};
  } else if constexpr (std::is_integral_v<From>) {
    for (int64_t x : integer_values(rng)) out.push_back(static_cast<From>(x));  // modular
  } else if constexpr (kIsComplex<From>) {
    using R = typename From::value_type;
    const std::vector<double> f = floating_values(rng);
    for (size_t i = 0; i < f.size(); ++i) {
      // Each value as the real part and as the imaginary part, and with a zero partner.
      out.emplace_back(static_cast<R>(f[i]), static_cast<R>(f[(i * 7 + 3) % f.size()]));
      out.emplace_back(R(0), static_cast<R>(f[i]));
      out.emplace_back(static_cast<R>(f[i]), R(0));
    }
  } else if constexpr (std::is_floating_point_v<From>) {
    for (double x : floating_values(rng)) out.push_back(static_cast<From>(x));
  } else {  // 8- and 16-bit floats: every bit pattern
    for (uint32_t b = 0; b < (uint32_t{1} << (8 * sizeof(From))); ++b) {
      out.push_back(From::from_bits(static_cast<decltype(From().bits)>(b)));
    }
  }
  return out;
}

template <typename T>
std::string show(T v) {
  std::ostringstream out;
  if constexpr (std::is_same_v<T, bool>) {
    out << (v ? "true" : "false");
  } else if constexpr (std::is_integral_v<T>) {
    out << static_cast<int64_t>(v);
  } else if constexpr (kIsComplex<T>) {
    out.precision(17);
    out << v;
  } else if constexpr (std::is_floating_point_v<T>) {
    out.precision(17);
    out << v << " (bits 0x" << std::hex
        << std::bit_cast<std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>>(v) << ")";
  } else {
    out << static_cast<float>(v) << " (bits 0x" << std::hex << int(v.bits) << ")";
  }
  return out.str();
}

template <typename To, typename From>
void check_pair(std::mt19937_64& rng, const char* to_name, const char* from_name) {
  int failures = 0;
  for (const From v : source_values<From>(rng)) {
    const To got = convert_value<To>(v);
    const To want = reference<To>(v);
    if (got != want && ++failures <= 5) {
      ADD_FAILURE() << from_name << " " << show(v) << " -> " << to_name << ": expected "
                    << show(want) << ", got " << show(got);
    }
  }
}

template <typename To>
void check_all_sources(std::mt19937_64& rng, const char* to_name) {
  check_pair<To, bool>(rng, to_name, "bool");
  check_pair<To, uint8_t>(rng, to_name, "uint8");
  check_pair<To, int8_t>(rng, to_name, "int8");
  check_pair<To, int16_t>(rng, to_name, "int16");
  check_pair<To, int32_t>(rng, to_name, "int32");
  check_pair<To, int64_t>(rng, to_name, "int64");
  check_pair<To, float>(rng, to_name, "float32");
  check_pair<To, double>(rng, to_name, "float64");
  check_pair<To, Half>(rng, to_name, "float16");
  check_pair<To, BFloat16>(rng, to_name, "bfloat16");
  check_pair<To, Float8_e4m3fn>(rng, to_name, "float8_e4m3fn");
  check_pair<To, Float8_e5m2>(rng, to_name, "float8_e5m2");
  check_pair<To, std::complex<float>>(rng, to_name, "complex64");
  check_pair<To, std::complex<double>>(rng, to_name, "complex128");
}

TEST(ConvertReference, ToBool) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  check_all_sources<bool>(rng, "bool");
}

TEST(ConvertReference, ToEveryIntegerType) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  check_all_sources<uint8_t>(rng, "uint8");
  check_all_sources<int8_t>(rng, "int8");
  check_all_sources<int16_t>(rng, "int16");
  check_all_sources<int32_t>(rng, "int32");
  check_all_sources<int64_t>(rng, "int64");
}

// Hand-computed cases, so that the reference itself is checked against the rules.
TEST(ConvertReference, TheReferenceFollowsTheRules) {
  EXPECT_EQ(reference<int32_t>(-2.9), -2);
  EXPECT_EQ(reference<int32_t>(2.9f), 2);
  EXPECT_EQ(reference<int32_t>(2147483648.0), INT32_MIN);
  EXPECT_EQ(reference<int32_t>(std::nan("")), INT32_MIN);
  EXPECT_EQ(reference<int64_t>(-9223372036854775808.0), INT64_MIN);
  EXPECT_EQ(reference<int64_t>(9223372036854775808.0), INT64_MIN);
  EXPECT_EQ(reference<int64_t>(-1e300), INT64_MIN);
  EXPECT_EQ(reference<uint8_t>(-1.0), 255);
  EXPECT_EQ(reference<uint8_t>(300.7), 44);
  EXPECT_EQ(reference<int8_t>(200.0), -56);
  EXPECT_EQ(reference<int16_t>(70000.7), 4464);
  EXPECT_EQ(reference<int16_t>(1e10), 0);  // int32's minimum, whose low 16 bits are 0
  EXPECT_EQ(reference<uint8_t>(int64_t{-1}), 255);
  EXPECT_EQ(reference<int8_t>(int64_t{128}), -128);
  EXPECT_EQ(reference<int16_t>(int64_t{-32769}), 32767);
  EXPECT_EQ(reference<int32_t>(int64_t{1} << 32 | 7), 7);
  EXPECT_EQ(reference<uint8_t>(true), 1);
  EXPECT_EQ(reference<int64_t>(std::complex<double>(-3.7, 100.0)), -3);
  EXPECT_TRUE(reference<bool>(std::complex<float>(0.0f, -0.5f)));
  EXPECT_FALSE(reference<bool>(std::complex<float>(-0.0f, 0.0f)));
  EXPECT_TRUE(reference<bool>(std::nan("")));
  EXPECT_FALSE(reference<bool>(-0.0));
  EXPECT_TRUE(reference<bool>(int8_t{-128}));
  EXPECT_EQ(reference<int32_t>(Half(-7.75f)), -7);
}

}  // namespace
}  // namespace ferry
