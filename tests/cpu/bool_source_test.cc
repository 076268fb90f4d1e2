// Bool sources whose bytes are not 0 or 1 (foreign memory through from_blob): every non-zero
// byte must read as true, so a copy to any other dtype stores convert_value<D>(true), whatever
// kernel serves it (dense conversion, SIMD or two-step, tile transpose, gather, broadcast,
// strided) and on every SIMD target this CPU supports. Bool -> Bool copies keep each element's
// truth.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ferry/backends/cpu/simd.h"
#include "ferry/core/convert.h"
#include "ferry/ferry.h"

namespace ferry {
namespace {

constexpr ScalarType kAllTypes[] = {kBool,      kUInt8,      kInt8,          kInt16,      kInt32,
                                    kInt64,     kFloat16,    kBFloat16,      kFloat32,    kFloat64,
                                    kComplex64, kComplex128, kFloat8_e4m3fn, kFloat8_e5m2};

// Bytes with every kind of truth: zeros, ones, and values a C++ bool may not hold.
std::vector<uint8_t> odd_bool_bytes(size_t n) {
  static constexpr uint8_t kPattern[] = {2, 0, 255, 1, 128, 0, 7, 64, 0, 3, 254, 0, 16};
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = kPattern[(i * 7 + i / 13) % std::size(kPattern)];
  return bytes;
}

// Whether src's element at row-major index `linear` of dst's sizes (src broadcast to them) is
// non-zero, reading src's bytes directly.
bool src_truth(const Tensor& src, IntArrayRef dst_sizes, int64_t linear) {
  const auto* base = static_cast<const uint8_t*>(src.storage().data());
  int64_t offset = src.storage_offset();
  const auto lead = static_cast<int64_t>(dst_sizes.size()) - src.dim();
  for (int64_t d = static_cast<int64_t>(dst_sizes.size()) - 1; d >= 0; --d) {
    const int64_t i = linear % dst_sizes[d];
    linear /= dst_sizes[d];
    if (d >= lead && src.sizes()[d - lead] != 1) offset += i * src.strides()[d - lead];
  }
  return base[offset] != 0;
}

// Checks every element of dst after dst.copy_(src) byte for byte.
void expect_normalized(const Tensor& dst, const Tensor& src, const std::string& what) {
  int failures = 0;
  visit_dtype(dst.dtype(), [&]<typename D>() {
    const auto* base = static_cast<const uint8_t*>(dst.storage().data());
    for (int64_t linear = 0; linear < dst.numel(); ++linear) {
      int64_t offset = dst.storage_offset();
      int64_t rest = linear;
      for (int64_t d = dst.dim() - 1; d >= 0; --d) {
        offset += rest % dst.sizes()[d] * dst.strides()[d];
        rest /= dst.sizes()[d];
      }
      const uint8_t* got = base + offset * static_cast<int64_t>(sizeof(D));
      const bool truth = src_truth(src, dst.sizes(), linear);
      bool ok;
      if constexpr (std::is_same_v<D, bool>) {
        ok = (*got != 0) == truth;
      } else {
        const D want = convert_value<D>(truth);
        ok = std::memcmp(got, &want, sizeof(D)) == 0;
      }
      if (!ok && ++failures <= 3) {
        ADD_FAILURE() << what << ": element " << linear << " of " << dst.dtype()
                      << " dst from a bool byte that is " << (truth ? "non-zero" : "zero")
                      << " came out wrong (first byte " << int(*got) << ")";
      }
    }
  });
}

class BoolSource : public ::testing::Test {
 protected:
  void TearDown() override { cpu::set_simd_target(""); }
};

TEST_F(BoolSource, NonZeroBytesAreTrueForEveryDestinationKernelAndTarget) {
  // 48 x 40 bytes: long enough for whole SIMD vectors and for the tile transpose (both sides
  // >= 8), with ragged ends for the scalar tails.
  std::vector<uint8_t> bytes = odd_bool_bytes(48 * 40);
  const Tensor raw = from_blob(bytes.data(), {48, 40}, kBool);
  struct Layout {
    const char* name;
    Tensor src;
    DimVector dst_sizes;
    bool transpose_dst = false;
  };
  const Layout layouts[] = {
      {"contiguous", raw, {48, 40}},
      {"transposed source", raw.t(), {40, 48}},
      {"transposed destination", raw, {48, 40}, true},
      {"every third column", raw.slice(1, 0, std::nullopt, 3), {48, 14}},
      {"every second column", raw.slice(1, 1, std::nullopt, 2), {48, 20}},
      {"broadcast column", raw.slice(1, 0, 1), {48, 40}},
      {"broadcast row", raw.select(0, 5), {7, 40}},
      {"broadcast element", raw.select(0, 2).select(0, 0), {3}},
  };
  for (const std::string& target : cpu::simd_targets()) {
    cpu::set_simd_target(target);
    for (ScalarType dst_type : kAllTypes) {
      for (const Layout& layout : layouts) {
        const IntArrayRef sizes = layout.dst_sizes;
        Tensor dst = layout.transpose_dst ? empty({sizes[1], sizes[0]}, dst_type).t()
                                          : empty(sizes, dst_type);
        dst.copy_(layout.src);
        expect_normalized(dst, layout.src, target + ", " + layout.name);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  // The bytes are left as they were.
  EXPECT_EQ(bytes, odd_bool_bytes(48 * 40));
}

TEST_F(BoolSource, ItemAndToReadNonZeroAsTrue) {
  std::vector<uint8_t> bytes = {0, 2, 255, 1};
  const Tensor raw = from_blob(bytes.data(), {4}, kBool);
  EXPECT_FALSE(raw.select(0, 0).item<bool>());
  EXPECT_TRUE(raw.select(0, 1).item<bool>());
  EXPECT_TRUE(raw.select(0, 2).item<bool>());
  EXPECT_EQ(raw.select(0, 2).item<int64_t>(), 1);
  const Tensor as_float = raw.to(kFloat32);
  EXPECT_EQ(std::vector<float>(as_float.data_ptr<float>(), as_float.data_ptr<float>() + 4),
            (std::vector<float>{0, 1, 1, 1}));
  EXPECT_EQ(raw.str(), "tensor([False,  True,  True,  True])");
}

}  // namespace
}  // namespace ferry
