// The host side of the CUDA kernels' arithmetic: IntDivider (multiply-shift division),
// OffsetCalculator (linear index -> per-operand byte offsets) and copy_element (the per-element
// conversion with conj/neg), checked against plain division, a naive unravel and the CPU
// engine's reference copy.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ferry/backends/cpu/copy_reference.h"
#include "ferry/core/scalar_type.h"
#include "ferry/iter/copy_element.h"
#include "ferry/iter/offset_calculator.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

TEST(IntDivider, MatchesDivisionAtTheEdges) {
  const uint32_t max = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> divisors = {1,        2,
                                    3,        5,
                                    7,        10,
                                    255,      256,
                                    257,      641,
                                    65535,    65536,
                                    65537,    (1u << 31) - 1,
                                    1u << 31, (1u << 31) + 1,
                                    max - 1,  max};
  for (int k = 0; k < 32; ++k) divisors.push_back(1u << k);
  std::vector<uint32_t> values = {0,       1,  2, 3, 1000, (1u << 31) - 1, 1u << 31, (1u << 31) + 1,
                                  max - 1, max};
  for (uint32_t d : divisors) {
    const IntDivider<uint32_t> div(d);
    for (uint32_t n : values) {
      ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
      ASSERT_EQ(div.mod(n), n % d) << n << " % " << d;
    }
    // Around every multiple boundary near the top of the range, where rounding errors show.
    for (uint32_t q : {max / d, max / d - 1, 1u}) {
      for (int64_t delta = -2; delta <= 2; ++delta) {
        const int64_t n = static_cast<int64_t>(q) * d + delta;
        if (n < 0 || n > max) continue;
        const auto u = static_cast<uint32_t>(n);
        ASSERT_EQ(div.divmod(u).div, u / d) << u << " / " << d;
        ASSERT_EQ(div.divmod(u).mod, u % d) << u << " % " << d;
      }
    }
  }
}

TEST(IntDivider, MatchesDivisionOnRandomValues) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int i = 0; i < 200000; ++i) {
    const int bits = 1 + static_cast<int>(rng() % 32);
    uint32_t d = static_cast<uint32_t>(rng() >> (64 - bits));
    if (d == 0) d = 1;
    const auto n = static_cast<uint32_t>(rng());
    const IntDivider<uint32_t> div(d);
    ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
  }
  const IntDivider<uint64_t> wide(1000000007ULL);
  EXPECT_EQ(wide.divmod(uint64_t{1} << 62).div, (uint64_t{1} << 62) / 1000000007ULL);
  EXPECT_EQ(wide.divmod(uint64_t{1} << 62).mod, (uint64_t{1} << 62) % 1000000007ULL);
}

// sum_d index_d(i) * strides[arg][d], dimension 0 fastest, computed the slow way.
std::array<int64_t, 2> naive_offsets(int64_t linear, const std::vector<int64_t>& sizes,
                                     const std::array<std::vector<int64_t>, 2>& strides) {
  std::array<int64_t, 2> out{0, 0};
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t index = linear % sizes[d];
    linear /= sizes[d];
    for (int arg = 0; arg < 2; ++arg) out[arg] += index * strides[arg][d];
  }
  return out;
}

template <typename Index>
void check_calculator(std::mt19937_64& rng, int ndim) {
  std::vector<int64_t> sizes(static_cast<size_t>(ndim));
  std::array<std::vector<int64_t>, 2> strides;
  int64_t numel = 1;
  for (auto& s : sizes) {
    s = 1 + static_cast<int64_t>(rng() % (ndim > 8 ? 3 : 9));
    numel *= s;
  }
  for (auto& st : strides) {
    for (int d = 0; d < ndim; ++d) st.push_back(static_cast<int64_t>(rng() % 5) * 8);
  }
  const int64_t* ptrs[2] = {strides[0].data(), strides[1].data()};
  const OffsetCalculator<2, Index> calc(ndim, sizes.data(), ptrs);
  for (int k = 0; k < 64; ++k) {
    const int64_t i = static_cast<int64_t>(rng() % static_cast<uint64_t>(numel));
    const auto got = calc.get(static_cast<Index>(i));
    const auto want = naive_offsets(i, sizes, strides);
    ASSERT_EQ(static_cast<int64_t>(got.at[0]), want[0]) << "index " << i << ", ndim " << ndim;
    ASSERT_EQ(static_cast<int64_t>(got.at[1]), want[1]) << "index " << i << ", ndim " << ndim;
  }
}

TEST(OffsetCalculator, MatchesANaiveUnravel) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int round = 0; round < 500; ++round) {
    const int ndim = static_cast<int>(rng() % (kMaxOffsetDims + 1));
    check_calculator<uint32_t>(rng, ndim);
    check_calculator<uint64_t>(rng, ndim);
    if (HasFatalFailure()) return;
  }
}

TEST(OffsetCalculator, SixtyFourBitOffsetsBeyondFourGiB) {
  const int64_t sizes[] = {3, 5, 7};
  const int64_t dst[] = {8, int64_t{1} << 33, int64_t{3} << 33};
  const int64_t src[] = {0, 16, int64_t{1} << 34};
  const int64_t* strides[2] = {dst, src};
  const OffsetCalculator<2, uint64_t> calc(3, sizes, strides);
  const auto at = calc.get(2 + 3 * 4 + 15 * 6);  // index (2, 4, 6)
  EXPECT_EQ(at.at[0], 2 * 8 + 4 * (uint64_t{1} << 33) + 6 * (uint64_t{3} << 33));
  EXPECT_EQ(at.at[1], 4 * 16 + 6 * (uint64_t{1} << 34));
}

// copy_element on `n` elements of one dtype pair, from raw bytes to raw bytes. Instantiated per
// pair; the test's loop is written once and calls it through a pointer.
using CopyElements = void (*)(const unsigned char* src, unsigned char* dst, int n, bool conj,
                              bool neg);
template <typename D, typename S>
void copy_elements(const unsigned char* src, unsigned char* dst, int n, bool conj, bool neg) {
  for (int i = 0; i < n; ++i) {
    alignas(16) unsigned char in[sizeof(S)];
    std::memcpy(in, src + i * sizeof(S), sizeof(S));
    const D out = copy_element<D>(load_element<S>(in), conj, neg);
    std::memcpy(dst + i * sizeof(D), &out, sizeof(D));
  }
}

// copy_element agrees with the CPU reference copy for all 14 x 14 dtype pairs and every
// combination of the conj and neg flags, on raw random bit patterns (NaN, inf, huge values).
TEST(CopyElement, MatchesTheCpuReferenceForEveryDtypePair) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  constexpr int kValues = 64;
  for (int dt = 0; dt < kNumScalarTypes; ++dt) {
    for (int st = 0; st < kNumScalarTypes; ++st) {
      const auto dst_type = static_cast<ScalarType>(dt);
      const auto src_type = static_cast<ScalarType>(st);
      const CopyElements copy = visit_dtype(dst_type, [&]<typename D>() {
        return visit_dtype(src_type,
                           [&]<typename S>() -> CopyElements { return &copy_elements<D, S>; });
      });
      const size_t dst_item = element_size(dst_type), src_item = element_size(src_type);
      // Raw bytes: any pattern, a bool byte included (the copy reads non-zero as true).
      std::vector<unsigned char> src(src_item * kValues);
      for (auto& b : src) b = static_cast<unsigned char>(rng());
      for (int flags = 0; flags < 4; ++flags) {
        const bool conj = (flags & 1) != 0 && is_complex(dst_type);
        const bool neg = (flags & 2) != 0;
        std::vector<unsigned char> want(dst_item * kValues), got(dst_item * kValues);
        CopyProblem p;
        p.sizes.assign(size_t{1}, int64_t{kValues});
        p.dst_strides.assign(size_t{1}, static_cast<int64_t>(dst_item));
        p.src_strides.assign(size_t{1}, static_cast<int64_t>(src_item));
        p.dst = reinterpret_cast<char*>(want.data());
        p.src = reinterpret_cast<const char*>(src.data());
        p.dst_dtype = dst_type;
        p.src_dtype = src_type;
        p.conj = conj;
        p.neg = neg;
        cpu::run_copy_reference(p);
        copy(src.data(), got.data(), kValues, conj, neg);
        ASSERT_EQ(got, want) << src_type << " -> " << dst_type << (conj ? " conj" : "")
                             << (neg ? " neg" : "");
      }
    }
  }
}

}  // namespace
}  // namespace ferry::testing
