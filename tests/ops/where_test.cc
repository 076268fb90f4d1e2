// where(condition, self, other): the result takes the values' promoted dtype, never the bool
// condition's (a bool result would be written with the values' element size: a heap overrun).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/ferry.h"
#include "tests/support/tensor_compare.h"

namespace ferry {
namespace {

TEST(Where, ResultHasTheValuesDtypeAndBroadcasts) {
  const Tensor cond = arange(4, kInt64).eq(2);
  const Tensor a = zeros({}, kFloat64);
  const Tensor b = arange(4, kFloat64) + 1;
  const Tensor out = where(cond, a, b);
  EXPECT_EQ(out.dtype(), kFloat64);
  EXPECT_THAT(testing::values_of(out), ::testing::ElementsAre(1, 2, 0, 4));
  const Tensor mixed = where(cond, arange(4, kInt64), b.to(kFloat32));
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_THAT(testing::values_of(mixed), ::testing::ElementsAre(1, 2, 2, 4));
  EXPECT_EQ(where(cond.view({4, 1}), a, b).sizes(), IntArrayRef({4, 4}));
}

}  // namespace
}  // namespace ferry
