// The math operators' front-ends: PyTorch's type promotion table, result dtypes and values of
// elementwise operators and reductions (against closed forms), broadcasting, in-place casting
// rules, and the errors for mismatched shapes and devices. PyTorch itself is the reference in
// tests/reference; these pin the rules down one by one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ferry/ferry.h"
#include "tests/support/errors.h"
#include "tests/support/tensor_compare.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using testing::values_of;

TEST(TypePromotion, FollowsPyTorchsTable) {
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt16);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kComplex64, kFloat64), kComplex128);
  EXPECT_THROW(promote_types(kFloat8_e4m3fn, kFloat32), DTypeError);
  const Tensor i64 = zeros({2}, kInt64), f16 = zeros({2}, kFloat16), f32 = zeros({2});
  const Tensor b = zeros({2}, kBool);
  EXPECT_EQ(result_type(i64, Scalar(2.5)), kFloat32);  // the default dtype
  EXPECT_EQ(result_type(f16, Scalar(2.5)), kFloat16);  // numbers don't widen floats
  EXPECT_EQ(result_type(b, Scalar(1)), kInt64);
  EXPECT_EQ(result_type(f32, zeros({}, kFloat64)), kFloat32);  // 0-d defers to dims
  EXPECT_EQ(result_type(i64, zeros({}, kFloat64)), kFloat64);  // unless of a higher category
  EXPECT_EQ((i64 + f16).dtype(), kFloat16);
  EXPECT_EQ((i64 / 2).dtype(), kFloat32);
  EXPECT_EQ(i64.exp().dtype(), kFloat32);
  EXPECT_EQ((b + b).dtype(), kBool);
}

Tensor vec(std::initializer_list<double> v, ScalarType t = kFloat32) {
  Tensor out = empty({static_cast<int64_t>(v.size())}, kFloat64);
  double* p = out.data_ptr<double>();
  for (double x : v) *p++ = x;
  return out.to(t);
}

TEST(Elementwise, ValuesMatchTheirDefinitions) {
  const Tensor x = vec({-2, -0.5, 0, 0.5, 3}, kFloat64);
  const std::vector<double> xs = values_of(x);
  auto check = [&](const Tensor& got, auto f) {
    const std::vector<double> v = values_of(got);
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(v[i], f(xs[i]), 1e-12) << i;
  };
  check(x.relu(), [](double v) { return std::max(v, 0.0); });
  check(x.sigmoid(), [](double v) { return 1 / (1 + std::exp(-v)); });
  check(x.tanh(), [](double v) { return std::tanh(v); });
  check(x.gelu(), [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  check(x.gelu("tanh"), [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  });
  check(x.abs(), [](double v) { return std::abs(v); });
  check(sign(x), [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; });
  check(x.pow(3), [](double v) { return v * v * v; });
  check(x * 2 - 1, [](double v) { return 2 * v - 1; });
  check(1 - x, [](double v) { return 1 - v; });
  check(x.add(x, 0.5), [](double v) { return 1.5 * v; });
  check(x.exp().log(), [](double v) { return v; });
  check(x.abs().add(1).rsqrt(), [](double v) { return 1 / std::sqrt(std::abs(v) + 1); });
  check(2 / x.abs().add(1), [](double v) { return 2 / (std::abs(v) + 1); });
  EXPECT_TRUE(std::isnan(values_of(vec({NAN}).relu())[0]));
  EXPECT_THAT(values_of(vec({1, 2, 3}, kInt64).pow(2)), ElementsAre(1, 4, 9));
  EXPECT_THROW(vec({2}, kInt64).pow(-1), Error);
}

TEST(Elementwise, ComparisonsAndWhere) {
  const Tensor a = vec({1, 5, 3}), b = vec({2, 5, 1});
  EXPECT_EQ(a.lt(b).dtype(), kBool);
  EXPECT_THAT(values_of(a.lt(b)), ElementsAre(1, 0, 0));
  EXPECT_THAT(values_of(a.ge(b)), ElementsAre(0, 1, 1));
  EXPECT_THAT(values_of(a.eq(5)), ElementsAre(0, 1, 0));
  const Tensor w = where(a.gt(b), a, vec({10, 20, 30}, kFloat64));
  EXPECT_EQ(w.dtype(), kFloat64);
  EXPECT_THAT(values_of(w), ElementsAre(10, 20, 3));
  // where broadcasts all three operands.
  const Tensor wb = where(vec({1, 0}, kBool).view({2, 1}), ones({3}), zeros({2, 3}));
  EXPECT_THAT(values_of(wb), ElementsAre(1, 1, 1, 0, 0, 0));
}

TEST(Elementwise, BroadcastingAndLayouts) {
  const Tensor col = arange(3, kFloat32).view({3, 1}), row = arange(4, kFloat32);
  const Tensor s = col * 10 + row;
  EXPECT_EQ(s.sizes(), IntArrayRef({3, 4}));
  EXPECT_EQ(values_of(s)[6], 12);
  // A channels-last input gives a channels-last result.
  const Tensor cl = ones({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE((cl * 2).is_contiguous(MemoryFormat::ChannelsLast));
  // Non-contiguous operands.
  const Tensor t = arange(6, kFloat32).view({2, 3}).t();
  EXPECT_THAT(values_of(t + t), ElementsAre(0, 6, 2, 8, 4, 10));
  EXPECT_THAT(error_of<ShapeError>([] { ones({2, 3}) + ones({4}); }), HasSubstr("3"));
}

TEST(Elementwise, InPlaceCastsOrRefuses) {
  Tensor i = vec({1, 2}, kInt64);
  i.add_(vec({1, 1}, kInt32));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_THAT(values_of(i), ElementsAre(2, 3));
  EXPECT_THAT(error_of<DTypeError>([&] { i.add_(0.5); }),
              HasSubstr("result type float32 can't be cast to the desired output type int64"));
  Tensor h = vec({1, 2}, kFloat16);
  h.mul_(vec({0.5, 4}, kFloat64));  // computed in float64, stored as float16
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_THAT(values_of(h), ElementsAre(0.5, 8));
  Tensor small = zeros({3});
  EXPECT_THAT(error_of<ShapeError>([&] {
                small.add_(ones({2, 3}));
              }),
              HasSubstr("doesn't match the broadcast shape"));
}

TEST(Elementwise, RefusesWhatPyTorchRefuses) {
  const Tensor b = vec({1, 0}, kBool), i = vec({1, 2}, kInt64);
  EXPECT_THAT(error_of<DTypeError>([&] { sub(b, b); }), HasSubstr("with two bool tensors"));
  EXPECT_THAT(error_of<DTypeError>([&] { sub(i, b); }), HasSubstr("with a bool tensor"));
  EXPECT_THAT(error_of<DTypeError>([&] { sub(b, 1); }), HasSubstr("with a bool tensor"));
  EXPECT_THAT(error_of<DTypeError>([&] { add(i, i, 0.5); }),
              HasSubstr("argument alpha must not be a floating point number"));
  EXPECT_THAT(error_of<DTypeError>([&] { add(i, i, true); }),
              HasSubstr("Boolean alpha only supported for Boolean results"));
  EXPECT_THAT(values_of(add(vec({1, 2}, kFloat32), i, 0.5)), ElementsAre(1.5, 3));
  EXPECT_THAT(error_of<DTypeError>([&] { gelu(i); }), HasSubstr("but got int64"));
  const Tensor s = sign(b);  // bool stays bool, as in PyTorch
  EXPECT_EQ(s.dtype(), kBool);
  EXPECT_THAT(values_of(s), ElementsAre(1, 0));
}

TEST(Elementwise, SignHasAZeroGradient) {
  Tensor x = vec({-2, 3}, kFloat64);
  x.requires_grad_(true);
  Tensor y = (sign(x) * x).sum();
  y.backward();
  EXPECT_THAT(values_of(x.grad()), ElementsAre(-1, 1));  // only the product's x contributes
}

TEST(Elementwise, DevicesMustMatchExceptCpuNumbers) {
  if (device_count(DeviceType::Sim) == 0) GTEST_SKIP() << "no sim device";
  const Tensor s = ones({3}, Device("sim:0"));
  EXPECT_THAT(error_of<DeviceError>([&] { s + ones({3}); }),
              HasSubstr("Expected all tensors to be on the same device, but found at least two "
                        "devices, sim:0 and cpu!"));
  const Tensor r = s * full({}, 4.0);  // a 0-d CPU tensor joins as a number
  EXPECT_EQ(r.device(), Device("sim:0"));
  EXPECT_THAT(values_of(r), ElementsAre(4, 4, 4));
}

TEST(Reductions, ValuesDtypesAndShapes) {
  const Tensor x = arange(24, kFloat32).view({2, 3, 4});
  EXPECT_EQ(x.sum().item<float>(), 276);
  EXPECT_EQ(x.sum({0, 2}).sizes(), IntArrayRef({3}));
  EXPECT_THAT(values_of(x.sum({0, 2})), ElementsAre(60, 92, 124));
  EXPECT_EQ(x.sum({-1}, true).sizes(), IntArrayRef({2, 3, 1}));
  EXPECT_THAT(values_of(x.mean({1})), ElementsAre(4, 5, 6, 7, 16, 17, 18, 19));
  EXPECT_THAT(values_of(x.amax({0, 1})), ElementsAre(20, 21, 22, 23));
  EXPECT_THAT(values_of(x.argmax(1)), ElementsAre(2, 2, 2, 2, 2, 2, 2, 2));
  EXPECT_EQ(x.argmax().item<int64_t>(), 23);
  EXPECT_EQ(vec({1, 0, 1}, kBool).sum().dtype(), kInt64);
  EXPECT_EQ(vec({1, 0, 1}, kBool).sum().item<int64_t>(), 2);
  EXPECT_EQ(vec({1, 2}, kInt32).sum(kFloat64).dtype(), kFloat64);
  EXPECT_THAT(error_of<DTypeError>([] {
                vec({1, 2}, kInt64).mean();
              }),
              HasSubstr("mean(): could not infer output dtype"));
  EXPECT_THAT(error_of<IndexError>([&] { x.sum({0, 0}); }), HasSubstr("appears multiple times"));
  EXPECT_TRUE(std::isnan(values_of(vec({1, NAN, 3}).amax())[0]));
  EXPECT_EQ(vec({1, NAN, 3}).argmax().item<int64_t>(), 1);
  EXPECT_EQ(zeros({0, 3}).sum().item<float>(), 0);
  EXPECT_THROW(zeros({0, 3}).amax({0}), IndexError);
}

// Signed integer overflow wraps modulo 2^bits, as PyTorch's CPU kernels give it (torch 1.13:
// tensor([2**63 - 1, 1]).sum() is -2**63); in C++ it would be undefined, which UBSan reports.
TEST(IntegerOverflow, WrapsAsPyTorchInSumsAndArithmetic) {
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  std::vector<int64_t> big = {kMax64, 1, kMax64, kMax64};
  const Tensor b = from_blob(big.data(), {4}, kInt64);
  EXPECT_EQ(b.sum().item<int64_t>(), kMax64 - 1);  // 3·(2^63 − 1) + 1 mod 2^64
  EXPECT_EQ(b.slice(0, 0, 2).sum().item<int64_t>(), kMin64);
  std::vector<int32_t> edge = {kMax32, kMin32};
  const Tensor e = from_blob(edge.data(), {2}, kInt32);
  const Tensor one = ones({2}, kInt32);
  EXPECT_EQ(e.add(one)[0].item<int32_t>(), kMin32);
  EXPECT_EQ(e.sub(one)[1].item<int32_t>(), kMax32);
  EXPECT_EQ(e.add(one, 3)[0].item<int32_t>(), kMin32 + 2);
  EXPECT_EQ(e.mul(e)[0].item<int32_t>(), 1);  // (2^31 − 1)^2 mod 2^32
  EXPECT_EQ(e.neg()[1].item<int32_t>(), kMin32);
  EXPECT_EQ(e.abs()[1].item<int32_t>(), kMin32);
  EXPECT_EQ(e.pow(2)[1].item<int32_t>(), 0);
}

TEST(LazyBits, ANegatedViewReadsNegatedInEveryOperator) {
  const Tensor x = arange(4, kFloat32)._neg_view();  // reads 0, -1, -2, -3
  EXPECT_THAT(values_of(x + 1), ElementsAre(1, 0, -1, -2));
  EXPECT_EQ(x.sum().item<float>(), -6);
  EXPECT_EQ(x.amax().item<float>(), 0);
  EXPECT_THAT(values_of(x.relu()), ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace ferry
