// The CUDA launcher's host-side decisions (ferry/iter/offset_launch.h), run without a GPU: how a
// copy is split into launches of at most kMaxOffsetDims dimensions, and when a launch may take
// 32-bit indices. The launches' offsets, walked with the same OffsetCalculator the kernel uses,
// must reproduce a naive walk of the whole copy, element by element and in order.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/iter/offset_calculator.h"
#include "ferry/iter/offset_launch.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;
using Offsets = std::vector<std::pair<int64_t, int64_t>>;

struct Problem {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides[2];
  const int64_t* stride_ptrs[2] = {nullptr, nullptr};

  Problem(std::vector<int64_t> s, std::vector<int64_t> dst, std::vector<int64_t> src)
      : sizes(std::move(s)), strides{std::move(dst), std::move(src)} {
    stride_ptrs[0] = strides[0].data();
    stride_ptrs[1] = strides[1].data();
  }
  int ndim() const { return static_cast<int>(sizes.size()); }
};

std::vector<OffsetLaunch<2>> launches_of(const Problem& p) {
  std::vector<OffsetLaunch<2>> out;
  for_each_offset_launch<2>(p.ndim(), p.sizes.data(), p.stride_ptrs,
                            [&](const OffsetLaunch<2>& l) { out.push_back(l); });
  return out;
}

// Every element's (dst, src) byte offsets, linear index order (dimension 0 fastest).
Offsets naive_walk(const Problem& p) {
  Offsets out;
  std::vector<int64_t> index(p.sizes.size(), 0);
  int64_t numel = 1;
  for (int64_t s : p.sizes) numel *= s;
  for (int64_t i = 0; i < numel; ++i) {
    int64_t at[2] = {0, 0};
    for (size_t d = 0; d < index.size(); ++d) {
      for (int arg = 0; arg < 2; ++arg) at[arg] += index[d] * p.strides[arg][d];
    }
    out.emplace_back(at[0], at[1]);
    for (size_t d = 0; d < index.size(); ++d) {
      if (++index[d] < p.sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// What the kernel computes: each launch's elements through OffsetCalculator of the launch's
// index type, plus the launch's offsets.
template <typename Index>
void walk_launch(const Problem& p, const OffsetLaunch<2>& l, Offsets& out) {
  const OffsetCalculator<2, Index> calc(l.ndim, p.sizes.data(), p.stride_ptrs);
  for (int64_t i = 0; i < l.numel; ++i) {
    const auto at = calc.get(static_cast<Index>(i));
    out.emplace_back(l.offset[0] + static_cast<int64_t>(at.at[0]),
                     l.offset[1] + static_cast<int64_t>(at.at[1]));
  }
}

Offsets kernel_walk(const Problem& p) {
  Offsets out;
  for (const OffsetLaunch<2>& l : launches_of(p)) {
    EXPECT_LE(l.ndim, kMaxOffsetDims);
    if (l.index32) {
      walk_launch<uint32_t>(p, l, out);
    } else {
      walk_launch<uint64_t>(p, l, out);
    }
  }
  return out;
}

std::vector<int> shuffled_dims(int ndim, std::mt19937_64& rng) {
  std::vector<int> perm(static_cast<size_t>(ndim));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  return perm;
}

std::vector<int> in_order(int ndim) {
  std::vector<int> perm(static_cast<size_t>(ndim));
  std::iota(perm.begin(), perm.end(), 0);
  return perm;
}

// Dense strides for `sizes` in the order `perm` (fastest first), times `item` bytes.
std::vector<int64_t> permuted_dense(const std::vector<int64_t>& sizes, std::vector<int> perm,
                                    int64_t item) {
  std::vector<int64_t> strides(sizes.size(), 0);
  int64_t step = item;
  for (int d : perm) {
    strides[static_cast<size_t>(d)] = step;
    step *= sizes[static_cast<size_t>(d)];
  }
  return strides;
}

TEST(OffsetLaunch, UpToSixteenDimensionsIsOneLaunch) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int ndim = 0; ndim <= kMaxOffsetDims; ++ndim) {
    std::vector<int64_t> sizes;
    for (int d = 0; d < ndim; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 2));
    const Problem p(sizes, permuted_dense(sizes, in_order(ndim), 4),
                    permuted_dense(sizes, shuffled_dims(ndim, rng), 8));
    const std::vector<OffsetLaunch<2>> launches = launches_of(p);
    ASSERT_EQ(launches.size(), 1u) << ndim << " dims";
    EXPECT_EQ(launches[0].ndim, ndim);
    EXPECT_EQ(launches[0].offset[0], 0);
    EXPECT_EQ(launches[0].offset[1], 0);
    EXPECT_TRUE(launches[0].index32);
    EXPECT_EQ(kernel_walk(p), naive_walk(p)) << ndim << " dims";
  }
}

TEST(OffsetLaunch, MoreDimensionsAreSplitOverTheOutermost) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int ndim = kMaxOffsetDims + 1; ndim <= kMaxOffsetDims + 4; ++ndim) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<int64_t> sizes;
      // Sizes 1-2 inside the launch's dims and 1-3 in the split ones keep the walk at about
      // 10^4 elements (sizes 1-3 throughout made it 10^6: over a minute under ThreadSanitizer).
      for (int d = 0; d < ndim; ++d) {
        sizes.push_back(1 + static_cast<int64_t>(rng() % (d < kMaxOffsetDims ? 2 : 3)));
      }
      // A broadcast source dimension (stride 0) among them.
      std::vector<int64_t> src = permuted_dense(sizes, shuffled_dims(ndim, rng), 2);
      src[rng() % src.size()] = 0;
      const Problem p(sizes, permuted_dense(sizes, in_order(ndim), 4), src);
      int64_t outer = 1;
      for (int d = kMaxOffsetDims; d < ndim; ++d) outer *= sizes[static_cast<size_t>(d)];
      const std::vector<OffsetLaunch<2>> launches = launches_of(p);
      ASSERT_EQ(static_cast<int64_t>(launches.size()), outer) << ndim << " dims";
      for (const OffsetLaunch<2>& l : launches) EXPECT_EQ(l.ndim, kMaxOffsetDims);
      ASSERT_EQ(kernel_walk(p), naive_walk(p)) << ndim << " dims, trial " << trial;
    }
  }
}

TEST(OffsetLaunch, IndexWidthAtTheElementCountBoundary) {
  const int64_t max32 = std::numeric_limits<int32_t>::max();
  const auto index32 = [](std::vector<int64_t> sizes, std::vector<int64_t> dst,
                          std::vector<int64_t> src) {
    const Problem p(std::move(sizes), std::move(dst), std::move(src));
    const std::vector<OffsetLaunch<2>> launches = launches_of(p);
    EXPECT_EQ(launches.size(), 1u);
    return launches.at(0).index32;
  };
  // The count itself, with broadcast operands so that no offset matters.
  EXPECT_TRUE(index32({max32}, {0}, {0}));
  EXPECT_FALSE(index32({max32 + 1}, {0}, {0}));
  EXPECT_FALSE(index32({65536, 32768}, {0, 0}, {0, 0}));  // 2^31 over two dimensions
  EXPECT_TRUE(index32({65536, 32767}, {0, 0}, {0, 0}));
}

TEST(OffsetLaunch, IndexWidthAtTheOffsetBoundary) {
  const int64_t max_offset = std::numeric_limits<uint32_t>::max();
  const auto index32 = [](std::vector<int64_t> sizes, std::vector<int64_t> dst,
                          std::vector<int64_t> src) {
    const Problem p(std::move(sizes), std::move(dst), std::move(src));
    return launches_of(p).at(0).index32;
  };
  // The last element's byte offset, in either operand.
  EXPECT_TRUE(index32({2}, {max_offset}, {1}));
  EXPECT_FALSE(index32({2}, {max_offset + 1}, {1}));
  EXPECT_TRUE(index32({2}, {1}, {max_offset}));
  EXPECT_FALSE(index32({2}, {1}, {max_offset + 1}));
  // Summed over dimensions: 3 * 2^30 + 2^30 - 1 fits, one more byte does not.
  EXPECT_TRUE(index32({4, 2}, {int64_t{1} << 30, (int64_t{1} << 30) - 1}, {0, 0}));
  EXPECT_FALSE(index32({4, 2}, {int64_t{1} << 30, int64_t{1} << 30}, {0, 0}));
  // A size-1 dimension never moves, whatever its stride; a huge stride cannot overflow the check.
  EXPECT_TRUE(index32({1, 8}, {int64_t{1} << 62, 4}, {0, 4}));
  EXPECT_FALSE(index32({3, 8}, {int64_t{1} << 62, 4}, {0, 4}));
}

// Whenever a launch takes 32-bit indices, they give exactly the 64-bit offsets, the last element
// included; problems are drawn with their last offset near 2^32.
TEST(OffsetLaunch, ThirtyTwoBitLaunchesAreExact) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  int taken = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int ndim = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> sizes, dst, src;
    // Strides drawn so that the last offset is 2^32 on average: about half the problems fit.
    for (int d = 0; d < ndim; ++d) {
      sizes.push_back(2 + static_cast<int64_t>(rng() % 300));
      const int64_t bound = (int64_t{2} << 32) / (ndim * (sizes.back() - 1)) + 1;
      dst.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(bound)));
      src.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(bound)));
    }
    const Problem p(sizes, dst, src);
    const OffsetLaunch<2> l = launches_of(p).at(0);
    if (!l.index32) continue;
    ++taken;
    const OffsetCalculator<2, uint32_t> narrow(ndim, p.sizes.data(), p.stride_ptrs);
    const OffsetCalculator<2, uint64_t> wide(ndim, p.sizes.data(), p.stride_ptrs);
    for (int k = 0; k < 50; ++k) {
      const int64_t i = k == 0 ? l.numel - 1 : static_cast<int64_t>(rng() % l.numel);
      const auto a = narrow.get(static_cast<uint32_t>(i));
      const auto b = wide.get(static_cast<uint64_t>(i));
      ASSERT_EQ(uint64_t{a.at[0]}, b.at[0]) << "element " << i;
      ASSERT_EQ(uint64_t{a.at[1]}, b.at[1]) << "element " << i;
    }
  }
  EXPECT_GT(taken, 100) << "too few problems fit 32 bits to test anything";
}

TEST(OffsetLaunch, EmptyCopiesLaunchNothingAndBadShapesRaise) {
  EXPECT_TRUE(launches_of(Problem({3, 0, 2}, {4, 12, 0}, {4, 12, 0})).empty());
  try {
    launches_of(Problem({3, 2}, {4, -12}, {4, 12}));
    ADD_FAILURE() << "expected an error for a negative stride";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected byte strides >= 0, but operand 0 has -12 in "
                                    "dimension 1"));
  }
  try {
    launches_of(Problem({3, -1}, {4, 12}, {4, 12}));
    ADD_FAILURE() << "expected an error for a negative size";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected sizes >= 0, but dimension 1 has -1"));
  }
}

}  // namespace
}  // namespace ferry::testing
