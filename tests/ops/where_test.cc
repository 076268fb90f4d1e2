// where(condition, self, other): the result takes the promoted dtype of the values (not the
// condition's bool) and picks elementwise, broadcasting all three.
#include <gtest/gtest.h>

#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

TEST(Where, TakesTheValuesDtypeAndPicksElementwise) {
  const Tensor cond = arange(6).reshape({2, 3}).gt(2);  // [[F, F, F], [T, T, T]]
  const Tensor a = full({2, 3}, 1.5, TensorOptions(kFloat32));
  const Tensor b = arange(3, TensorOptions(kFloat64));  // broadcast row, promotes to float64
  const Tensor w = where(cond, a, b);
  EXPECT_EQ(w.dtype(), kFloat64);
  EXPECT_EQ(values_of(w), (std::vector<double>{0, 1, 2, 1.5, 1.5, 1.5}));
  const Tensor i = where(cond, full({1}, int64_t{7}), full({1}, int64_t{-7}));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(values_of(i), (std::vector<double>{-7, -7, -7, 7, 7, 7}));
}

}  // namespace
}  // namespace ferry::testing
