// Max, average and adaptive-average pooling against the float64 loops on random configurations
// (ceil_mode, padding, dilation, count_include_pad, divisor_override; contiguous, channels-last
// and sliced inputs; every dtype); the loops against hand-computed PyTorch results; backward
// kernels by the adjoint identity; the output-size rule; and the error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "tests/cpu/nn/nn_test_util.h"

namespace ferry::cpu {
namespace {

using ::testing::HasSubstr;
using testing::nn::Layout;

struct PoolCase {
  int64_t n, c, h, w;
  Pool2dParams p;
  int64_t oh(bool max) const {
    return pool_output_size(h, p.kernel[0], p.stride[0], p.padding[0], max ? p.dilation[0] : 1,
                            p.ceil_mode);
  }
  int64_t ow(bool max) const {
    return pool_output_size(w, p.kernel[1], p.stride[1], p.padding[1], max ? p.dilation[1] : 1,
                            p.ceil_mode);
  }
  std::string str() const {
    return "N" + std::to_string(n) + " C" + std::to_string(c) + " " + std::to_string(h) + "x" +
           std::to_string(w) + " k" + std::to_string(p.kernel[0]) + "x" +
           std::to_string(p.kernel[1]) + " s" + std::to_string(p.stride[0]) + " p" +
           std::to_string(p.padding[0]) + "," + std::to_string(p.padding[1]) + " d" +
           std::to_string(p.dilation[0]) + (p.ceil_mode ? " ceil" : "") +
           (p.count_include_pad ? " incl" : " excl") +
           (p.divisor_override ? " div" + std::to_string(*p.divisor_override) : "");
  }
};

PoolCase random_case(std::mt19937_64& rng, bool max) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % (hi - lo + 1));
  };
  PoolCase c{};
  c.n = pick(1, 2);
  c.c = pick(1, 5);
  c.p.kernel = {pick(1, 3), pick(1, 3)};
  c.p.stride = {pick(1, 3), pick(1, 2)};
  if (max) c.p.dilation = {pick(1, 2), pick(1, 2)};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = max ? (c.p.kernel[i] - 1) * c.p.dilation[i] + 1 : c.p.kernel[i];
    c.p.padding[i] = pick(0, span / 2);
  }
  c.p.ceil_mode = rng() % 2;
  c.p.count_include_pad = rng() % 2;
  if (!max && rng() % 4 == 0) c.p.divisor_override = pick(1, 5);
  c.h = pick(c.p.kernel[0] * c.p.dilation[0], 11);
  c.w = pick(c.p.kernel[1] * c.p.dilation[1], 11);
  return c;
}

const Layout kInputLayouts[] = {Layout::kContiguous, Layout::kChannelsLast, Layout::kSliced};

TEST(NnPool, MaxPoolMatchesFloat64LoopsWithAndWithoutIndices) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 18; ++iter) {
    const PoolCase c = random_case(rng, true);
    const ScalarType dtype = testing::nn::kReducedAndF32[iter % 3];
    const Layout lx = kInputLayouts[rng() % 3];
    SCOPED_TRACE(c.str() + " " + testing::nn::layout_name(lx));
    const Tensor x = testing::nn::random_in({c.n, c.c, c.h, c.w}, dtype, lx, gen);
    const std::vector<int64_t> out_sizes{c.n, c.c, c.oh(true), c.ow(true)};
    Tensor y =
        testing::nn::nan_in(out_sizes, dtype, lx == Layout::kSliced ? Layout::kContiguous : lx);
    Tensor y_idx = testing::nn::nan_in(out_sizes, dtype, Layout::kContiguous);
    Tensor idx = empty(out_sizes, kInt64), idx64 = empty(out_sizes, kInt64);
    Tensor y64 = empty(out_sizes, kFloat64);
    max_pool2d_forward(y, Tensor(), x, c.p);  // oneDNN
    max_pool2d_forward(y_idx, idx, x, c.p);   // loops
    max_pool2d_forward(y64, idx64, testing::nn::f64(x), c.p);
    // Max pooling only selects: exact in every dtype.
    EXPECT_EQ(testing::nn::scaled_error(y, y64), 0.0);
    EXPECT_EQ(testing::nn::scaled_error(y_idx, y64), 0.0);
    EXPECT_EQ(testing::nn::values(idx), testing::nn::values(idx64));
    // backward: a scatter-add of grad_out at the indices, in every dtype.
    const Tensor g = testing::nn::random_in(out_sizes, dtype, lx, gen);
    Tensor dx = testing::nn::nan_in({c.n, c.c, c.h, c.w}, dtype, Layout::kChannelsLast);
    Tensor dx64 = empty({c.n, c.c, c.h, c.w}, kFloat64);
    max_pool2d_backward(dx, g, idx);
    max_pool2d_backward(dx64, testing::nn::f64(g), idx64);
    FERRY_EXPECT_CLOSE(dx, dx64, dtype, "max_pool2d_backward");
  }
}

TEST(NnPool, AvgPoolMatchesFloat64Loops) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 24; ++iter) {
    const PoolCase c = random_case(rng, false);
    const ScalarType dtype = testing::nn::kReducedAndF32[iter % 3];
    const Layout lx = kInputLayouts[rng() % 3];
    SCOPED_TRACE(c.str() + " " + testing::nn::layout_name(lx));
    const Tensor x = testing::nn::random_in({c.n, c.c, c.h, c.w}, dtype, lx, gen);
    const std::vector<int64_t> out_sizes{c.n, c.c, c.oh(false), c.ow(false)};
    Tensor y =
        testing::nn::nan_in(out_sizes, dtype, lx == Layout::kSliced ? Layout::kContiguous : lx);
    Tensor y64 = empty(out_sizes, kFloat64);
    avg_pool2d_forward(y, x, c.p);
    avg_pool2d_forward(y64, testing::nn::f64(x), c.p);
    FERRY_EXPECT_CLOSE(y, y64, dtype, "avg_pool2d_forward");
    const Tensor g = testing::nn::random_in(out_sizes, dtype, lx, gen);
    Tensor dx = testing::nn::nan_in({c.n, c.c, c.h, c.w}, dtype,
                                    lx == Layout::kSliced ? Layout::kContiguous : lx);
    Tensor dx64 = empty({c.n, c.c, c.h, c.w}, kFloat64);
    avg_pool2d_backward(dx, g, c.p);
    avg_pool2d_backward(dx64, testing::nn::f64(g), c.p);
    FERRY_EXPECT_CLOSE(dx, dx64, dtype, "avg_pool2d_backward");
  }
}

TEST(NnPool, AdaptiveAvgPoolMatchesFloat64LoopsEvenAndUneven) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 12; ++iter) {
    const int64_t oh = 1 + static_cast<int64_t>(rng() % 4),
                  ow = 1 + static_cast<int64_t>(rng() % 4);
    const bool even = iter % 2 == 0;
    const int64_t h =
        even ? oh * (1 + static_cast<int64_t>(rng() % 3)) : oh + static_cast<int64_t>(rng() % 7);
    const int64_t w =
        even ? ow * (1 + static_cast<int64_t>(rng() % 3)) : ow + static_cast<int64_t>(rng() % 7);
    const ScalarType dtype = testing::nn::kReducedAndF32[iter % 3];
    const Layout lx = kInputLayouts[rng() % 3];
    SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w) + " -> " + std::to_string(oh) + "x" +
                 std::to_string(ow) + " " + testing::nn::layout_name(lx));
    const Tensor x = testing::nn::random_in({2, 3, h, w}, dtype, lx, gen);
    Tensor y = testing::nn::nan_in({2, 3, oh, ow}, dtype, Layout::kContiguous);
    Tensor y64 = empty({2, 3, oh, ow}, kFloat64);
    adaptive_avg_pool2d_forward(y, x);
    adaptive_avg_pool2d_forward(y64, testing::nn::f64(x));
    FERRY_EXPECT_CLOSE(y, y64, dtype, "adaptive_avg_pool2d_forward");
    const Tensor g = testing::nn::random_in({2, 3, oh, ow}, dtype, Layout::kContiguous, gen);
    Tensor dx =
        testing::nn::nan_in({2, 3, h, w}, dtype, lx == Layout::kSliced ? Layout::kContiguous : lx);
    Tensor dx64 = empty({2, 3, h, w}, kFloat64);
    adaptive_avg_pool2d_backward(dx, g);
    adaptive_avg_pool2d_backward(dx64, testing::nn::f64(g));
    FERRY_EXPECT_CLOSE(dx, dx64, dtype, "adaptive_avg_pool2d_backward");
  }
}

TEST(NnPool, BackwardKernelsAreAdjointsOfTheForwardInFloat64) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 8; ++iter) {
    const bool max = iter % 2 == 0;
    const PoolCase c = random_case(rng, max);
    SCOPED_TRACE(c.str());
    const Tensor x = randn({c.n, c.c, c.h, c.w}, kFloat64, &gen);
    const Tensor v = randn(x.sizes(), kFloat64, &gen);
    const std::vector<int64_t> out_sizes{c.n, c.c, c.oh(max), c.ow(max)};
    const Tensor g = randn(out_sizes, kFloat64, &gen);
    Tensor dx = empty(x.sizes(), kFloat64);
    std::function<Tensor(const Tensor&)> f;
    if (max) {
      Tensor idx = empty(out_sizes, kInt64), y = empty(out_sizes, kFloat64);
      max_pool2d_forward(y, idx, x, c.p);
      max_pool2d_backward(dx, g, idx);
      f = [&](const Tensor& t) {
        Tensor out = empty(out_sizes, kFloat64);
        max_pool2d_forward(out, Tensor(), t, c.p);
        return out;
      };
    } else {
      avg_pool2d_backward(dx, g, c.p);
      f = [&](const Tensor& t) {
        Tensor out = empty(out_sizes, kFloat64);
        avg_pool2d_forward(out, t, c.p);
        return out;
      };
    }
    // Finite differences (max pooling is linear near x: a small step keeps every argmax).
    const double fd = testing::nn::fd_directional(f, x, v, g, 1e-7);
    EXPECT_TRUE(testing::nn::near_rel(fd, testing::nn::dot(dx, v), 1e-6))
        << fd << " vs " << testing::nn::dot(dx, v);
    if (!max) {
      EXPECT_TRUE(testing::nn::near_rel(testing::nn::dot(g, f(v)), testing::nn::dot(dx, v), 1e-10));
    }
  }
  // Adaptive pooling is linear: the exact identity.
  const Tensor x = randn({2, 3, 7, 5}, kFloat64, &gen), g = randn({2, 3, 3, 2}, kFloat64, &gen);
  Tensor y = empty({2, 3, 3, 2}, kFloat64), dx = empty({2, 3, 7, 5}, kFloat64);
  adaptive_avg_pool2d_forward(y, x);
  adaptive_avg_pool2d_backward(dx, g);
  EXPECT_TRUE(testing::nn::near_rel(testing::nn::dot(g, y), testing::nn::dot(dx, x), 1e-12));
}

TEST(NnPool, LoopsMatchHandComputedPyTorchResults) {
  // 1x1x5x5 input 0..24, kernel 2, stride 2, ceil_mode: a 3x3 output whose last row and column
  // windows hang past the input. count_include_pad clips them at H + pad = 5, so the corner's
  // divisor is 1 (PyTorch: tensor([[ 3.,  5.,  6.5], [13., 15., 16.5], [20.5, 22.5, 24.]])).
  Tensor x = arange(0, 25, 1, kFloat64).view({1, 1, 5, 5});
  Pool2dParams p;
  p.kernel = {2, 2};
  p.stride = {2, 2};
  p.ceil_mode = true;
  Tensor y = empty({1, 1, 3, 3}, kFloat64);
  avg_pool2d_forward(y, x, p);
  EXPECT_EQ(testing::nn::values(y), (std::vector<double>{3, 5, 6.5, 13, 15, 16.5, 20.5, 22.5, 24}));
  Tensor y32 = empty({1, 1, 3, 3});
  avg_pool2d_forward(y32, x.to(kFloat32), p);  // the same through the float32 front end
  EXPECT_EQ(testing::nn::values(y32), testing::nn::values(y));
  // padding 1, count_include_pad and a divisor override of 3 on a 1x1x2x2 input of ones.
  Pool2dParams q;
  q.kernel = {2, 2};
  q.stride = {1, 1};
  q.padding = {1, 1};
  Tensor ones4 = ones({1, 1, 2, 2}, kFloat64), yq = empty({1, 1, 3, 3}, kFloat64);
  avg_pool2d_forward(yq, ones4, q);
  EXPECT_EQ(testing::nn::values(yq),
            (std::vector<double>{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25}));
  q.count_include_pad = false;
  avg_pool2d_forward(yq, ones4, q);
  for (double v : testing::nn::values(yq)) EXPECT_EQ(v, 1.0);
  q.divisor_override = 3;
  avg_pool2d_forward(yq, ones4, q);
  EXPECT_EQ(testing::nn::values(yq), (std::vector<double>{1. / 3, 2. / 3, 1. / 3, 2. / 3, 4. / 3,
                                                          2. / 3, 1. / 3, 2. / 3, 1. / 3}));
  // Max pooling: the first maximum wins and a NaN wins; indices are flat in the plane.
  Tensor m = zeros({1, 1, 2, 3}, kFloat64);
  m.data_ptr<double>()[2] = std::nan("");
  Pool2dParams mp;
  mp.kernel = {2, 2};
  Tensor my = empty({1, 1, 1, 2}, kFloat64), mi = empty({1, 1, 1, 2}, kInt64);
  max_pool2d_forward(my, mi, m, mp);
  EXPECT_EQ(testing::nn::values(mi), (std::vector<double>{0, 2}));
  EXPECT_TRUE(std::isnan(testing::nn::values(my)[1]));
  // A [C, H, W] input works too.
  Tensor y3 = empty({1, 1, 2}, kFloat32);
  max_pool2d_forward(y3, Tensor(), m.to(kFloat32).view({1, 2, 3}).slice(2, 0, 3), mp);
  EXPECT_EQ(testing::nn::values(y3)[0], 0.0);
}

TEST(NnPool, OutputSizeFollowsPyTorch) {
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 1, false), 2);
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 1, true), 3);
  // ceil mode's last window must start inside the input or the left padding
  EXPECT_EQ(pool_output_size(6, 3, 3, 1, 1, true), 3);
  EXPECT_EQ(pool_output_size(5, 2, 2, 1, 1, true), 3);  // 4 windows would start at 6 = H + pad
  EXPECT_EQ(pool_output_size(10, 3, 1, 0, 2, false), 6);
  EXPECT_THAT(testing::error_of<ShapeError>([] { pool_output_size(5, 0, 1, 0, 1, false); }),
              HasSubstr("kernel >= 1"));
}

TEST(NnPool, BadArgumentsRaise) {
  Pool2dParams p;
  p.kernel = {2, 2};
  p.stride = {2, 2};
  Tensor x = ones({2, 3, 8, 8});
  std::string msg = testing::error_of<ShapeError>([&] {
    max_pool2d_forward(empty({2, 3, 3, 4}), Tensor(), x, p);
  });
  EXPECT_THAT(msg, HasSubstr("[2, 3, 4, 4]"));
  EXPECT_THAT(msg, HasSubstr("[2, 3, 3, 4]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                max_pool2d_forward(empty({3, 4, 4}), Tensor(), ones({2, 3, 4, 8, 8}), p);
              }),
              HasSubstr("rank 3"));
  p.padding = {2, 0};
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                avg_pool2d_forward(empty({2, 3, 6, 4}), x, p);
              }),
              HasSubstr("at most half"));
  p.padding = {0, 0};
  EXPECT_THAT(testing::error_of<DTypeError>([&] {
                max_pool2d_forward(empty({2, 3, 4, 4}), empty({2, 3, 4, 4}), x, p);
              }),
              HasSubstr("Int64"));
  Tensor bad = full({2, 3, 4, 4}, 64, kInt64);
  EXPECT_THAT(testing::error_of<IndexError>([&] {
                max_pool2d_backward(empty({2, 3, 8, 8}), ones({2, 3, 4, 4}), bad);
              }),
              HasSubstr("[0, 64)"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                adaptive_avg_pool2d_forward(empty({2, 4, 2, 2}), x);
              }),
              HasSubstr("[2, 3, 8, 8]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                avg_pool2d_backward(empty({2, 3, 8, 8}), ones({2, 3, 5, 4}), p);
              }),
              HasSubstr("[2, 3, 4, 4]"));
}

}  // namespace
}  // namespace ferry::cpu
