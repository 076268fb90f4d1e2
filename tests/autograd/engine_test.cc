// The autograd core: leaves and accumulation, the graph's bookkeeping (grad_fn names, is_leaf,
// retain_grad, detach), autograd::grad and second derivatives, and the safety checks PyTorch
// makes (in-place writes to saved tensors and leaves, backward twice, operators without a
// formula). Values are checked against closed forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/autograd/engine.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/ferry.h"
#include "ferry/ops/op_registration.h"
#include "tests/support/errors.h"
#include "tests/support/tensor_compare.h"

namespace ferry {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

Tensor leaf(std::initializer_list<double> values, ScalarType dtype = kFloat64) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, TensorOptions(kFloat64));
  double* p = t.data_ptr<double>();
  for (double v : values) *p++ = v;
  return t.to(dtype).requires_grad_();
}

TEST(Autograd, LeafGradientsAccumulateAcrossBackwards) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = (x * x).sum();
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name(), "SumBackward0");
  y.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_ALL_CLOSE(x.grad(), leaf({2, 4, 6}));
  y.backward();
  EXPECT_ALL_CLOSE(x.grad(), leaf({4, 8, 12}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(x.grad().requires_grad());
}

TEST(Autograd, ChainOfOperatorsMatchesClosedForm) {
  // y = sum(exp(x) * 3 - x / 2 + sqrt(x)); dy/dx = 3 exp(x) - 1/2 + 1 / (2 sqrt(x))
  Tensor x = leaf({0.5, 1.0, 2.0});
  Tensor y = (x.exp() * 3 - x / 2 + x.sqrt()).sum();
  y.backward();
  const std::vector<double> g = testing::values_of(x.grad());
  const double xs[] = {0.5, 1.0, 2.0};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(g[i], 3 * std::exp(xs[i]) - 0.5 + 0.5 / std::sqrt(xs[i]), 1e-12);
  }
}

TEST(Autograd, BroadcastGradientsAreSummedToTheInputShape) {
  Tensor a = ones({3, 1}, TensorOptions(kFloat64).requires_grad(true));
  Tensor b = ones({4}, TensorOptions(kFloat64).requires_grad(true));
  (a * b * 2).sum().backward();
  EXPECT_EQ(a.grad().sizes(), IntArrayRef({3, 1}));
  EXPECT_ALL_CLOSE(a.grad(), full({3, 1}, 8.0, kFloat64));
  EXPECT_ALL_CLOSE(b.grad(), full({4}, 6.0, kFloat64));
}

TEST(Autograd, GradientsTakeTheInputsDtype) {
  Tensor a = leaf({1, 2}, kFloat32);
  Tensor b = leaf({3, 4}, kFloat64);
  (a * b).sum().backward();
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat64);
  EXPECT_ALL_CLOSE(a.grad(), leaf({3, 4}));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(y.grad_fn());
    x.mul_(2);  // allowed on a leaf without grad mode, as an optimizer step
  }
  EXPECT_ALL_CLOSE(x.detach(), leaf({2, 4}));
  EXPECT_TRUE(GradMode::is_enabled());
}

TEST(Autograd, RetainGradKeepsAnIntermediateGradient) {
  Tensor x = leaf({1, 2});
  Tensor h = x * 3;
  h.retain_grad();
  EXPECT_TRUE(h.retains_grad());
  (h * h).sum().backward();
  EXPECT_ALL_CLOSE(h.grad(), leaf({6, 12}));
  EXPECT_ALL_CLOSE(x.grad(), leaf({18, 36}));
}

TEST(Autograd, GradReturnsGradientsWithoutTouchingLeaves) {
  Tensor x = leaf({1, 2});
  Tensor w = leaf({5, 7});
  Tensor y = (x * w).sum();
  const autograd::variable_list g = autograd::grad({y}, {x});
  EXPECT_ALL_CLOSE(g[0], leaf({5, 7}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  Tensor unused = leaf({1});
  Tensor y2 = (x * 2).sum();
  EXPECT_THAT(error_of([&] { autograd::grad({y2}, {unused}); }),
              HasSubstr("appears to not have been used in the graph"));
  Tensor y3 = (x * 2).sum();
  EXPECT_FALSE(autograd::grad({y3}, {unused}, {}, std::nullopt, false, true)[0].defined());
}

TEST(Autograd, SecondDerivativeThroughCreateGraph) {
  // d/dx x^3 = 3x^2; d2/dx2 = 6x
  Tensor x = leaf({1.5, -2.0});
  Tensor y = (x * x * x).sum();
  const Tensor dx = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_TRUE(dx.requires_grad());
  EXPECT_ALL_CLOSE(dx, leaf({6.75, 12.0}));
  dx.sum().backward();
  EXPECT_ALL_CLOSE(x.grad(), leaf({9.0, -12.0}));
}

TEST(Autograd, BackwardTwiceWithoutRetainGraphRaises) {
  Tensor x = leaf({1, 2});
  Tensor y = x.exp().sum();
  y.backward();
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("Trying to backward through the graph a second time"));
}

TEST(Autograd, InplaceChangeOfASavedTensorIsDetected) {
  Tensor x = leaf({1, 2});
  Tensor y = x.exp();  // ExpBackward0 saves its result
  Tensor z = y.sum();
  y.add_(1);
  const std::string msg = error_of([&] { z.backward(); });
  EXPECT_THAT(msg, HasSubstr("one of the variables needed for gradient computation has been "
                             "modified by an inplace operation"));
  EXPECT_THAT(msg, HasSubstr("ExpBackward0"));
  EXPECT_THAT(msg, HasSubstr("is at version 1; expected version 0 instead"));
}

TEST(Autograd, InplaceOnALeafThatRequiresGradRaises) {
  Tensor x = leaf({1, 2});
  EXPECT_THAT(error_of([&] { x.add_(1); }),
              HasSubstr("a leaf Variable that requires grad is being used in an in-place "
                        "operation."));
  EXPECT_THAT(error_of([&] { x.slice(0, 0, 1).mul_(2); }),
              HasSubstr("a view of a leaf Variable that requires grad"));
}

TEST(Autograd, InplaceOperatorsRecordTheirHistory) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 1;
  y.mul_(x);     // y = x^2
  y.add_(x, 3);  // y = x^2 + 3x
  EXPECT_EQ(y.grad_fn()->name(), "AddBackward0");
  y.sum().backward();
  EXPECT_ALL_CLOSE(x.grad(), leaf({5, 7}));
}

TEST(Autograd, VersionCounterIsSharedByViewsAndBumpedByInplaceWrites) {
  Tensor x = zeros({4});
  Tensor v = x.view({2, 2});
  const uint32_t before = x._version();
  v.add_(1);
  EXPECT_EQ(x._version(), before + 1);
  x.copy_(ones({4}));
  EXPECT_EQ(v._version(), before + 2);
  Tensor y = x + 1;  // out of place: no bump of x
  EXPECT_EQ(x._version(), before + 2);
  EXPECT_EQ(y._version(), 0u);
}

TEST(Autograd, RequiresGradOnlyForFloatingDtypes) {
  Tensor i = zeros({2}, kInt64);
  EXPECT_THAT(error_of<DTypeError>([&] { i.requires_grad_(); }),
              HasSubstr("only Tensors of floating point and complex dtype can require gradients"));
  Tensor x = leaf({1});
  Tensor y = x * 2;
  EXPECT_THAT(error_of([&] { y.requires_grad_(false); }),
              HasSubstr("you can only change requires_grad flags of leaf variables"));
  EXPECT_TRUE(zeros({2}, TensorOptions().requires_grad(true)).requires_grad());
  EXPECT_TRUE(rand({2}, TensorOptions().requires_grad(true)).is_leaf());
}

TEST(Autograd, DetachCutsTheGraphButSharesTheElements) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_alias_of(y));
  (d * x).sum().backward();
  EXPECT_ALL_CLOSE(x.grad(), leaf({2, 4}));
  Tensor z = x * 3;
  z.detach_();
  EXPECT_FALSE(z.requires_grad());
  EXPECT_TRUE(z.is_leaf());
}

TEST(Autograd, SetDataKeepsTheTensorsIdentity) {
  Tensor p = leaf({1, 2, 3});
  TensorImpl* impl = p.impl();
  p.set_data(zeros({2, 2}, kFloat32));
  EXPECT_EQ(p.impl(), impl);
  EXPECT_EQ(p.dtype(), kFloat32);
  EXPECT_EQ(p.sizes(), IntArrayRef({2, 2}));
  EXPECT_TRUE(p.requires_grad());
  (p * 2).sum().backward();
  EXPECT_ALL_CLOSE(p.grad(), full({2, 2}, 2.0));
}

TEST(Autograd, AssignmentToATemporaryWritesTheElements) {
  Tensor x = zeros({2, 3});
  x[1] = ones({3});
  x.select(1, 0) = 7;
  EXPECT_THAT(testing::values_of(x), ::testing::ElementsAre(7, 0, 0, 7, 1, 1));
  Tensor handle = x;
  handle = ones({1});  // a named tensor rebinds
  EXPECT_EQ(x.numel(), 6);
}

Tensor no_formula_kernel(const Tensor& t) { return t; }

TEST(Autograd, AnOperatorWithoutAFormulaRefusesInputsThatRequireGrad) {
  Library lib("autograd_test");
  lib.def("no_formula(Tensor self) -> Tensor");
  impl_backends(lib, "no_formula", &no_formula_kernel);
  const auto op =
      Dispatcher::singleton().find("autograd_test::no_formula").typed<Tensor(const Tensor&)>();
  Tensor x = leaf({1});
  EXPECT_THAT(error_of<NotImplementedError>([&] { op.call(x); }),
              HasSubstr("autograd_test::no_formula does not support automatic differentiation: "
                        "its argument 'self' requires grad"));
  NoGradGuard no_grad;
  EXPECT_TRUE(op.call(x).is_same(x));
}

TEST(Autograd, ComparisonsAndArgmaxAreNotDifferentiable) {
  Tensor x = leaf({1, 3, 2});
  Tensor m = x.gt(1.5);
  EXPECT_FALSE(m.requires_grad());
  EXPECT_EQ(m.dtype(), kBool);
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);
  EXPECT_FALSE(x.argmax().requires_grad());
}

TEST(Autograd, ViewsCarryGradientsBack) {
  Tensor x = arange(6, kFloat64).view({2, 3}).requires_grad_();
  Tensor y = x.t().slice(0, 1, 3).select(1, 1).unsqueeze(0).expand({4, 2});
  y.sum().backward();
  // t() then rows 1..2 of the transpose, column 1: x[1][1] and x[1][2], each used 4 times.
  EXPECT_THAT(testing::values_of(x.grad()), ::testing::ElementsAre(0, 0, 0, 0, 4, 4));
  Tensor z = arange(6, kFloat64).requires_grad_();
  (z.view({3, 2}).permute({1, 0}).reshape({6}) * arange(6, kFloat64)).sum().backward();
  // permuted order: z0 z2 z4 z1 z3 z5 multiplied by 0..5
  EXPECT_THAT(testing::values_of(z.grad()), ::testing::ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(Autograd, CopyAndToCarryGradientsBackToTheSourceDtype) {
  Tensor x = leaf({1, 2}, kFloat32);
  Tensor y = x.to(kFloat64) * leaf({3, 4});
  y.sum().backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_ALL_CLOSE(x.grad(), leaf({3, 4}));
  Tensor a = leaf({1, 2});
  Tensor buffer = zeros({2}, kFloat64);
  buffer.copy_(a * 5);
  EXPECT_EQ(buffer.grad_fn()->name(), "CopyBackwards");
  buffer.sum().backward();
  EXPECT_ALL_CLOSE(a.grad(), leaf({5, 5}));
}

}  // namespace
}  // namespace ferry
