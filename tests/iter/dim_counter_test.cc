// DimCounter: the decomposition of a range start, the 2-D steps (PyTorch's worked example from
// the seeds), and exact coverage of random ranges.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ferry/iter/dim_counter.h"
#include "tests/support/random.h"

namespace ferry {
namespace {

using V = std::vector<int64_t>;

TEST(DimCounter, StepsThroughTheSeedsExample) {
  const DimVector shape{64, 2000, 10};
  DimCounter c(shape, {1066670, 1280000});
  EXPECT_EQ(c.values().vec(), (V{46, 666, 8}));
  auto step = c.max_2d_step();
  EXPECT_EQ(step, (std::array<int64_t, 2>{18, 1}));
  c.increment(step);
  EXPECT_EQ(c.values().vec(), (V{0, 667, 8}));
  EXPECT_EQ(c.offset(), 1066688);
  step = c.max_2d_step();
  EXPECT_EQ(step, (std::array<int64_t, 2>{64, 1333}));
  c.increment(step);
  EXPECT_EQ(c.values().vec(), (V{0, 0, 9}));
  step = c.max_2d_step();
  EXPECT_EQ(step, (std::array<int64_t, 2>{64, 2000}));
  c.increment(step);
  EXPECT_TRUE(c.is_done());
  EXPECT_EQ(c.offset(), 1280000);
}

TEST(DimCounter, StopsInsideARow) {
  const DimVector shape{5, 4};
  DimCounter c(shape, {2, 13});
  std::vector<std::array<int64_t, 2>> steps;
  while (!c.is_done()) {
    steps.push_back(c.max_2d_step());
    c.increment(steps.back());
  }
  // 3 to finish row 0, rows 1 (5), then 3 of row 2: 3 + 5 + 3 = 11 = 13 - 2.
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0], (std::array<int64_t, 2>{3, 1}));
  EXPECT_EQ(steps[1], (std::array<int64_t, 2>{5, 1}));
  EXPECT_EQ(steps[2], (std::array<int64_t, 2>{3, 1}));
}

TEST(DimCounter, SerialDriverCoversRandomRangesExactlyOnce) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    DimVector shape(static_cast<size_t>(rank));
    int64_t numel = 1;
    for (auto& s : shape) {
      s = 1 + static_cast<int64_t>(rng() % 6);
      numel *= s;
    }
    // One operand whose byte "address" is its linear index: strides 1, n0, n0*n1, ...
    std::vector<int64_t> strides(static_cast<size_t>(std::max(rank, 2)), 0);
    int64_t acc = 1;
    for (int d = 0; d < rank; ++d) {
      strides[static_cast<size_t>(d)] = acc;
      acc *= shape[d];
    }
    std::vector<int> hits(static_cast<size_t>(numel), 0);
    char* base = nullptr;
    const int64_t begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(numel + 1));
    const int64_t end =
        begin + static_cast<int64_t>(rng() % static_cast<uint64_t>(numel - begin + 1));
    serial_for_each_2d(shape, strides.data(), &base, 1,
                       [&](char** data, const int64_t* s, int64_t n0, int64_t n1) {
                         for (int64_t j = 0; j < n1; ++j) {
                           for (int64_t i = 0; i < n0; ++i) {
                             const auto at =
                                 reinterpret_cast<intptr_t>(data[0]) + i * s[0] + j * s[1];
                             ++hits[static_cast<size_t>(at)];
                           }
                         }
                       },
                       {begin, end});
    for (int64_t i = 0; i < numel; ++i) {
      ASSERT_EQ(hits[static_cast<size_t>(i)], (i >= begin && i < end) ? 1 : 0)
          << "index " << i << " of shape " << IntArrayRef(shape) << ", range [" << begin << ", "
          << end << ")";
    }
  }
}

}  // namespace
}  // namespace ferry
