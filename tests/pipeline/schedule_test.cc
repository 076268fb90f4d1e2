// clock_cycles against torchgpipe's documented schedule, scatter/gather round trips (uneven last
// chunk, several tensors, fewer rows than chunks) and their errors, and balance_cost's exact
// partitioning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/ferry.h"
#include "ferry/pipeline/balance.h"
#include "ferry/pipeline/microbatch.h"
#include "ferry/pipeline/schedule.h"
#include "tests/support/errors.h"
#include "tests/support/tensor_compare.h"

namespace ferry::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ClockCycles, MatchesTheIssuesThreeByThreeSchedule) {
  const auto cycles = clock_cycles(3, 3);
  ASSERT_EQ(cycles.size(), 5u);
  EXPECT_THAT(cycles[0], ElementsAre(Cell{0, 0}));
  EXPECT_THAT(cycles[1], ElementsAre(Cell{1, 0}, Cell{0, 1}));
  EXPECT_THAT(cycles[2], ElementsAre(Cell{2, 0}, Cell{1, 1}, Cell{0, 2}));
  EXPECT_THAT(cycles[3], ElementsAre(Cell{2, 1}, Cell{1, 2}));
  EXPECT_THAT(cycles[4], ElementsAre(Cell{2, 2}));
}

TEST(ClockCycles, EveryCellOnceAtClockIPlusJ) {
  for (int64_t m : {1, 2, 5}) {
    for (int64_t n : {1, 3, 4}) {
      const auto cycles = clock_cycles(m, n);
      ASSERT_EQ(static_cast<int64_t>(cycles.size()), m + n - 1);
      std::set<Cell> seen;
      for (size_t k = 0; k < cycles.size(); ++k) {
        for (const Cell& c : cycles[k]) {
          EXPECT_EQ(c.first + c.second, static_cast<int64_t>(k));
          EXPECT_TRUE(seen.insert(c).second);
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), m * n);
    }
  }
  EXPECT_THAT(testing::error_of([] { clock_cycles(0, 2); }),
              HasSubstr("expected m >= 1 micro-batches and n >= 1 partitions, but got m = 0"));
}

TEST(Microbatch, ScatterAndGatherRoundTripWithAnUnevenLastChunk) {
  const Tensor x = arange(10 * 3, kFloat32).reshape({10, 3});
  const Tensor labels = arange(10, kInt64);
  const auto batches = scatter({x, labels}, 4);
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[0][0].size(0), 3);
  EXPECT_EQ(batches[3][0].size(0), 1);
  EXPECT_EQ(batches[3][1].size(0), 1);
  const Batch joined = gather(batches);
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_ALL_CLOSE(joined[0], x);
  EXPECT_ALL_CLOSE(joined[1], labels);
  // Fewer rows than chunks: one row each.
  EXPECT_EQ(scatter({arange(2, kFloat32)}, 5).size(), 2u);
}

TEST(Microbatch, ErrorsNameExpectedAndGiven) {
  EXPECT_THAT(testing::error_of<ShapeError>([] {
                scatter({zeros({4, 2}), zeros({5})}, 2);
              }),
              HasSubstr("expected every tensor to have 4 rows (tensor 0's), but tensor 1 has 5"));
  EXPECT_THAT(testing::error_of<ShapeError>([] { scatter({zeros({})}, 2); }),
              HasSubstr("tensor 0 is 0-d"));
  EXPECT_THAT(testing::error_of([] { scatter({zeros({4})}, 0); }),
              HasSubstr("expected chunks >= 1, but got 0"));
  EXPECT_THAT(testing::error_of([] {
                gather({{zeros({1})}, {zeros({1}), zeros({1})}});
              }),
              HasSubstr("expected 1 tensors per micro-batch (micro-batch 0's), but micro-batch 1 "
                        "has 2"));
}

TEST(Balance, BalanceCostMinimizesTheLargestPartition) {
  EXPECT_THAT(balance_cost({1, 1, 1, 1}, 2), ElementsAre(2, 2));
  EXPECT_THAT(balance_cost({5, 1, 1, 1, 1, 1}, 2), ElementsAre(1, 5));
  EXPECT_THAT(balance_cost({1, 2, 3, 4, 5, 6, 7, 8, 9}, 3), ElementsAre(5, 2, 2));
  EXPECT_THAT(balance_cost({3, 3, 3}, 3), ElementsAre(1, 1, 1));
  EXPECT_THAT(testing::error_of([] {
                balance_cost({1, 2}, 3);
              }),
              HasSubstr("expected 1 to 2 partitions (one layer at least each), but got 3"));
}

}  // namespace
}  // namespace ferry::pipeline
