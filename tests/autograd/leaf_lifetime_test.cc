// A leaf's gradient accumulator lets go of the leaf once the graphs that used it are gone: the
// leaf holds the accumulator weakly, and the accumulator's shell must not hold the leaf.
#include <gtest/gtest.h>

#include "ferry/ferry.h"

namespace ferry {
namespace {

TEST(AutogradLifetime, AGraphThatDiesReleasesItsLeaves) {
  Tensor x = ones({3}, kFloat64).requires_grad_();
  EXPECT_EQ(x.use_count(), 1);
  {
    Tensor y = (x * 2).sum();
    EXPECT_GT(x.use_count(), 1);  // the accumulator holds the leaf while the graph lives
    y.backward();
  }
  EXPECT_EQ(x.use_count(), 1);
  { Tensor z = x * 3; }
  EXPECT_EQ(x.use_count(), 1);
}

}  // namespace
}  // namespace ferry
