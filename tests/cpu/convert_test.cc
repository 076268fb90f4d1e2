// The conversion kernels on the values where conversions go wrong: every bfloat16 and half bit
// pattern, float32 rounding ties, subnormals, infinities, NaNs with payloads and both signs,
// integer limits and out-of-range floats. Each SIMD target, streaming or not, odd lengths and
// misaligned pointers; the result must equal convert_value bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/backends/cpu/simd.h"
#include "ferry/core/convert.h"
#include "tests/cpu/copy_problem_gen.h"

namespace ferry::cpu {
namespace {

template <typename T>
std::vector<unsigned char> as_bytes(const std::vector<T>& values) {
  std::vector<unsigned char> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Float32 values around every rounding decision the narrow formats make.
std::vector<float> tricky_floats() {
  std::vector<uint32_t> bits = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
      0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBFFFFFu,
      0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x477FF000u, 0x477FEFFFu, 0x47800000u,
      0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x387FE000u, 0x387FF000u, 0x38800000u, 0x43800000u,
      0x43FF8000u, 0x4F000000u, 0xCF000000u, 0xCF000001u, 0x4EFFFFFFu, 0x5F000000u, 0xDF000000u,
      0x43E00000u, 0x447A0000u, 0x43E00001u, 0x3F808000u, 0x3F818000u};
  // Every exponent, with mantissas at and next to the bfloat16 and half ties.
  for (uint32_t e = 0; e < 256; ++e) {
    for (uint32_t m : {0x0u, 0x1u, 0x7FFFu, 0x8000u, 0x8001u, 0x18000u, 0xFFFu, 0x1000u, 0x1001u,
                       0x3000u, 0x7FFFFFu, 0x400000u, 0x2AAAAAu}) {
      bits.push_back(e << 23 | m);
      bits.push_back(0x80000000u | e << 23 | m);
    }
  }
  std::vector<float> out;
  for (uint32_t b : bits) out.push_back(std::bit_cast<float>(b));
  return out;
}

std::vector<double> tricky_doubles() {
  std::vector<double> out = {0.0,
                             -0.0,
                             1e-310,
                             -1e-310,
                             1e300,
                             -1e300,
                             0.5,
                             -0.5,
                             2.5,
                             -2.5,
                             9223372036854775807.0,
                             -9223372036854775808.0,
                             9223372036854774784.0,
                             -9223372036854777856.0,
                             2147483647.5,
                             -2147483648.5,
                             3.4028235677973366e38,
                             3.4028234663852886e38,
                             1.0000000596046448,
                             1.0000001788139343};
  out.push_back(std::numeric_limits<double>::infinity());
  out.push_back(-std::numeric_limits<double>::infinity());
  out.push_back(std::bit_cast<double>(uint64_t{0x7FF8000000000001}));
  out.push_back(std::bit_cast<double>(uint64_t{0xFFF0000000000001}));
  out.push_back(std::bit_cast<double>(uint64_t{0x7FF0000020000000}));
  for (float f : tricky_floats()) out.push_back(f);
  return out;
}

std::vector<int64_t> tricky_ints() {
  std::vector<int64_t> out = {0,
                              1,
                              -1,
                              127,
                              -128,
                              255,
                              256,
                              32767,
                              -32768,
                              65535,
                              16777217,
                              -16777217,
                              2147483647,
                              -2147483647 - 1,
                              4294967295,
                              std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::min(),
                              9007199254740993,
                              -9007199254740993,
                              (int64_t{1} << 62) + 1};
  for (int s = 0; s < 63; ++s) {
    out.push_back((int64_t{1} << s) + 1);
    out.push_back(-(int64_t{1} << s) - 3);
  }
  return out;
}

// The source bytes for dtype t: every bit pattern of the 1- and 2-byte floats, tricky values
// converted (exactly or by convert_value) for the others.
std::vector<unsigned char> source_values(ScalarType t) {
  if (t == kFloat16 || t == kBFloat16) {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    return as_bytes(all);
  }
  if (t == kFloat8_e4m3fn || t == kFloat8_e5m2 || t == kUInt8 || t == kInt8) {
    std::vector<uint8_t> all(256);
    for (uint32_t i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
    return as_bytes(all);
  }
  if (t == kBool) return {0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1};
  if (t == kFloat32) return as_bytes(tricky_floats());
  std::vector<unsigned char> out;
  visit_dtype(t, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      std::vector<T> values;
      if constexpr (std::is_integral_v<T>) {
        for (int64_t v : tricky_ints()) values.push_back(static_cast<T>(v));
      } else {
        const std::vector<double> d = tricky_doubles();
        for (size_t i = 0; i < d.size(); ++i)
          values.push_back(convert_value<T>(d[i] * (i % 3 == 0 ? 1.0 : 0.75)));
      }
      out = as_bytes(values);
    }
  });
  return out;
}

#if defined(FERRY_SANITIZER_BUILD)
constexpr bool kSanitized = true;  // a lighter sweep: sanitizers slow it ten-fold
constexpr size_t kMisaligns[] = {0, 6};
#else
constexpr bool kSanitized = false;
constexpr size_t kMisaligns[] = {0, 1, 6};
#endif

class Convert : public ::testing::Test {
 protected:
  void TearDown() override { set_simd_target(""); }
};

TEST_F(Convert, EveryPairMatchesConvertValueOnTrickyValuesOnEveryTarget) {
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    SCOPED_TRACE(target);
    for (int s = 0; s < kNumScalarTypes; ++s) {
      const auto src_t = static_cast<ScalarType>(s);
      const std::vector<unsigned char> src_bytes = source_values(src_t);
      const auto n = static_cast<int64_t>(src_bytes.size() / element_size(src_t));
      for (int d = 0; d < kNumScalarTypes; ++d) {
        const auto dst_t = static_cast<ScalarType>(d);
        const size_t ds = element_size(dst_t);
        SCOPED_TRACE(std::string(scalar_type_name(src_t)) + " -> " +
                     std::string(scalar_type_name(dst_t)));
        // Expected: one convert_value per element.
        std::vector<unsigned char> expected(static_cast<size_t>(n) * ds);
        CopyProblem p;
        p.sizes = {n};
        p.dst_strides = {static_cast<int64_t>(ds)};
        p.src_strides = {static_cast<int64_t>(element_size(src_t))};
        p.dst_dtype = dst_t;
        p.src_dtype = src_t;
        p.src = reinterpret_cast<const char*>(src_bytes.data());
        p.dst = reinterpret_cast<char*>(expected.data());
        testing::naive_copy(p);
        for (size_t misalign : kMisaligns) {
          for (bool stream : {false, true}) {
            for (int64_t len : {n, n - 1, std::min<int64_t>(n, 5)}) {
              if (kSanitized && len == n - 1) continue;
              testing::Buffer src(src_bytes.size(), 64 - misalign % 64);
              std::memcpy(src.data(), src_bytes.data(), src_bytes.size());
              testing::Buffer dst(static_cast<size_t>(n) * ds, misalign);
              kernels::convert_contiguous(dst_t, src_t, dst.data(), src.data(), len, {}, stream);
              ASSERT_EQ(std::memcmp(dst.data(), expected.data(), static_cast<size_t>(len) * ds), 0)
                  << "misalign " << misalign << " stream " << stream << " len " << len << " "
                  << testing::first_difference(
                         std::vector<unsigned char>(
                             expected.begin(), expected.begin() + len * static_cast<int64_t>(ds)),
                         std::vector<unsigned char>(dst.data(),
                                                    dst.data() + len * static_cast<int64_t>(ds)));
            }
          }
        }
      }
    }
  }
}

TEST_F(Convert, ConjAndNegFollowTheNote) {
  // complex64 (1, -2): conj -> (1, 2); neg -> (-1, 2); both -> (-1, -2).
  const std::complex<float> v(1.0f, -2.0f);
  auto run = [&](bool conj, bool neg) {
    std::complex<float> out;
    kernels::convert_contiguous(kComplex64, kComplex64, &out, &v, 1, {conj, neg});
    return out;
  };
  EXPECT_EQ(run(true, false), std::complex<float>(1.0f, 2.0f));
  EXPECT_EQ(run(false, true), std::complex<float>(-1.0f, 2.0f));
  EXPECT_EQ(run(true, true), std::complex<float>(-1.0f, -2.0f));
  // Integers wrap; bool does not change; a NaN's sign flips.
  const int8_t m = -128;
  int8_t m_out = 0;
  kernels::convert_contiguous(kInt8, kInt8, &m_out, &m, 1, {false, true});
  EXPECT_EQ(m_out, -128);
  const bool t = true;
  bool t_out = false;
  kernels::convert_contiguous(kBool, kBool, &t_out, &t, 1, {true, true});
  EXPECT_TRUE(t_out);
  const float nan = std::bit_cast<float>(0x7FC00001u);
  float nan_out = 0;
  kernels::convert_contiguous(kFloat32, kFloat32, &nan_out, &nan, 1, {false, true});
  EXPECT_EQ(std::bit_cast<uint32_t>(nan_out), 0xFFC00001u);
}

}  // namespace
}  // namespace ferry::cpu
