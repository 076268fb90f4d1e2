// In-place writes through views (Note [In-place on views] in ferry/autograd/variable.cc): the
// base takes CopySlices, the written view and the views made before the write follow the base's
// new history, and the gradients agree with finite differences (gradcheck, float64, random
// inputs) and with closed forms. A view of a leaf that requires grad still refuses the write.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/autograd/gradcheck.h"
#include "ferry/ferry.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry {
namespace {

using autograd::variable_list;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

Tensor random_leaf(Generator& gen, std::initializer_list<int64_t> sizes) {
  return rand(sizes, kFloat64, &gen).add(0.5).requires_grad_();
}

void expect_gradcheck(const std::function<variable_list(const variable_list&)>& fn,
                      const variable_list& inputs) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(InplaceOnViews, AssigningIntoARowOfATensorWithoutGradCarriesTheGradient) {
  // x[0] = y with only y requiring grad: x takes y's history (PyTorch's CopySlices).
  Tensor x = zeros({2, 3}, kFloat64);
  Tensor y = ones({3}, kFloat64).mul(2).requires_grad_();
  x[0] = y;
  ASSERT_TRUE(x.requires_grad());
  ASSERT_TRUE(x.grad_fn());
  EXPECT_EQ(x.grad_fn()->name(), "CopySlices");
  Tensor w = arange(6, kFloat64).view({2, 3});
  (x * w).sum().backward();
  EXPECT_THAT(testing::values_of(y.grad()), ElementsAre(0, 1, 2));
}

TEST(InplaceOnViews, GradientsThroughWritesIntoViewsMatchFiniteDifferences) {
  Generator gen(testing::test_seed());
  SCOPED_TRACE(testing::seed_trace());
  const Tensor a = random_leaf(gen, {3, 4});
  const Tensor c = random_leaf(gen, {3, 3});
  const Tensor y = random_leaf(gen, {4});
  // mul_ into a slice of a result: the slice's old values and c both get gradients.
  expect_gradcheck(
      [](const variable_list& in) {
        Tensor b = in[0] * 2;
        b.slice(1, 1).mul_(in[1]);
        return variable_list{b * b};
      },
      {a, c});
  // copy_ into a row of a tensor that needs no grad: only the source gets a gradient.
  expect_gradcheck(
      [](const variable_list& in) {
        Tensor x = zeros({3, 4}, kFloat64);
        x.select(0, 1).copy_(in[0]);
        return variable_list{x.exp()};
      },
      {y});
  // A view of a view (a column of a slice), written twice.
  expect_gradcheck(
      [](const variable_list& in) {
        Tensor b = in[0] * 3;  // saves nothing that the writes below would change
        Tensor s = b.slice(0, 1);
        s.select(1, 2).add_(in[1], 3);
        s.select(1, 0).mul_(in[1]);
        return variable_list{b};
      },
      {a, random_leaf(gen, {2})});
}

TEST(InplaceOnViews, ViewsMadeBeforeAWriteFollowTheBasesNewValues) {
  Generator gen(testing::test_seed());
  SCOPED_TRACE(testing::seed_trace());
  const Tensor a = random_leaf(gen, {3, 4});
  const Tensor y = random_leaf(gen, {3, 2});
  // u overlaps the written columns: its values, and so its gradient, now depend on y.
  expect_gradcheck(
      [](const variable_list& in) {
        Tensor b = in[0] * 1.5;
        Tensor u = b.slice(1, 0, 2);
        b.slice(1, 1, 3).copy_(in[1]);
        return variable_list{u * u};
      },
      {a, y});
  // A write to the base itself, after the view was taken.
  expect_gradcheck(
      [](const variable_list& in) {
        Tensor b = in[0] * in[0];
        Tensor v = b.select(0, 2);
        b.mul_(in[0]);
        return variable_list{v.exp()};
      },
      {a});
  // Without grad on the base: the earlier view requires grad once its history is read.
  Tensor x = zeros({2, 3}, kFloat64);
  Tensor u = x.slice(1, 1);
  x.select(1, 2).copy_(ones({2}, kFloat64).requires_grad_());
  ASSERT_TRUE(u.grad_fn());
  EXPECT_EQ(u.grad_fn()->name(), "AsStridedBackward0");
  EXPECT_TRUE(u.requires_grad());
}

// A custom function that doubles its input in place and says so (mark_dirty).
struct DoubleInPlace : autograd::Function<DoubleInPlace> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    Tensor y = x;
    y.mul_(2);
    ctx->mark_dirty({y});
    return y;
  }
  static variable_list backward(autograd::AutogradContext*, variable_list g) { return {g[0] * 2}; }
};

// Applied to a plain tensor and to a view, it rewrites the history as a built-in in-place
// operator does; a view that is not forward's first input is refused, not mis-wired.
TEST(InplaceOnViews, ACustomFunctionThatMarksItsInputDirtyRewritesTheHistory) {
  Generator gen(testing::test_seed());
  SCOPED_TRACE(testing::seed_trace());
  expect_gradcheck(
      [](const variable_list& in) {
        Tensor b = in[0] * 1.5;
        Tensor whole = DoubleInPlace::apply(b);
        Tensor c = in[0] * 1.0;
        DoubleInPlace::apply(c.select(1, 2));
        return variable_list{whole.exp(), c * c};
      },
      {random_leaf(gen, {3, 4})});
  struct DirtySecond : autograd::Function<DirtySecond> {
    static Tensor forward(autograd::AutogradContext* ctx, const Tensor& a, const Tensor& x) {
      Tensor y = x;
      y.add_(a);
      ctx->mark_dirty({y});
      return y;
    }
    static variable_list backward(autograd::AutogradContext*, variable_list g) {
      return {g[0], g[0]};
    }
  };
  Tensor a = random_leaf(gen, {4});
  Tensor base = zeros({3, 4}, kFloat64);
  EXPECT_THAT(error_of<NotImplementedError>([&] { DirtySecond::apply(a, base.select(0, 1)); }),
              HasSubstr("must be forward's first input"));
}

TEST(InplaceOnViews, WritesWithoutGradRecordNothing) {
  Tensor x = zeros({2, 3}, kFloat64);
  x.select(0, 1).add_(ones({3}, kFloat64));
  EXPECT_FALSE(x.requires_grad());
  EXPECT_FALSE(x.grad_fn());
  Tensor a = ones({2, 3}, kFloat64).requires_grad_();
  Tensor b = a * 3;
  {
    NoGradGuard no_grad;
    b.select(0, 0).zero_();
  }
  // The write under no_grad changed b's values but not its history: b's gradient to a stays 3.
  b.sum().backward();
  EXPECT_THAT(testing::values_of(a.grad()), ElementsAre(3, 3, 3, 3, 3, 3));
}

TEST(InplaceOnViews, AViewOfALeafThatRequiresGradStillRefusesTheWrite) {
  Tensor a = ones({2, 3}, kFloat64).requires_grad_();
  EXPECT_THAT(error_of<Error>([&] { a.select(0, 0).mul_(2); }),
              HasSubstr("a view of a leaf Variable that requires grad is being used in an "
                        "in-place operation"));
}

TEST(InplaceOnViews, ASavedBaseWrittenThroughAViewIsCaughtAtBackward) {
  Tensor a = ones({2, 3}, kFloat64).requires_grad_();
  Tensor b = a * 2;
  Tensor e = b.exp();  // saves its output, e
  e.select(0, 0).mul_(2);
  EXPECT_THAT(error_of<Error>([&] { e.sum().backward(); }),
              HasSubstr("modified by an inplace operation"));
}

}  // namespace
}  // namespace ferry
