// Batch norm (training, inference, backward of both, running statistics) and layer norm
// (forward, backward) against the float64 loops on random shapes of several ranks, channels-last
// and sliced layouts and every dtype; the float64 loops by finite differences; and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "tests/cpu/nn/nn_test_util.h"

namespace ferry::cpu {
namespace {

using ::testing::HasSubstr;
using testing::nn::Layout;

ScalarType stat_type(ScalarType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

std::vector<int64_t> random_bn_shape(std::mt19937_64& rng) {
  const int rank = 2 + static_cast<int>(rng() % 3);
  // At least three values per channel: over two, 1/std amplifies float32 rounding (ill-posed).
  std::vector<int64_t> sizes{3 + static_cast<int64_t>(rng() % 3),
                             1 + static_cast<int64_t>(rng() % 6)};
  for (int d = 2; d < rank; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 5));
  return sizes;
}

TEST(NnBatchNorm, MatchesFloat64LoopsInEveryModeLayoutAndDtype) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 18; ++iter) {
    const std::vector<int64_t> sizes = random_bn_shape(rng);
    const int64_t c = sizes[1];
    const ScalarType dtype = testing::nn::kReducedAndF32[iter % 3], st = stat_type(dtype);
    const Layout lx = sizes.size() == 4 ? (rng() % 2 ? Layout::kChannelsLast : Layout::kSliced)
                                        : (rng() % 2 ? Layout::kContiguous : Layout::kTransposed);
    const bool affine = iter % 4 != 3;
    SCOPED_TRACE(testing::nn::layout_name(lx) + std::string(" rank ") +
                 std::to_string(sizes.size()));
    const Tensor x = testing::nn::random_in(sizes, dtype, lx, gen, 2.0);
    const Tensor w =
        affine ? testing::nn::random_in({c}, dtype, Layout::kContiguous, gen) : Tensor();
    const Tensor b = affine ? testing::nn::random_in({c}, st, Layout::kContiguous, gen) : Tensor();
    // training forward, with running statistics
    Tensor y = testing::nn::nan_in(sizes, dtype, lx == Layout::kSliced ? Layout::kContiguous : lx);
    Tensor mean = empty({c}, st), invstd = empty({c}, st);
    Tensor rm = testing::nn::random_in({c}, st, Layout::kContiguous, gen);
    Tensor rv = rand({c}, st, &gen);
    Tensor rm64 = testing::nn::f64(rm), rv64 = testing::nn::f64(rv);
    Tensor y64 = empty(sizes, kFloat64), mean64 = empty({c}, kFloat64),
           invstd64 = empty({c}, kFloat64);
    batch_norm_forward_training(y, mean, invstd, x, w, b, rm, rv, 0.1, 1e-5);
    batch_norm_forward_training(y64, mean64, invstd64, testing::nn::f64(x), testing::nn::f64(w),
                                testing::nn::f64(b), rm64, rv64, 0.1, 1e-5);
    FERRY_EXPECT_CLOSE(y, y64, dtype, "training out");
    FERRY_EXPECT_CLOSE(mean, mean64, kFloat32, "save_mean");
    FERRY_EXPECT_CLOSE(invstd, invstd64, kFloat32, "save_invstd");
    FERRY_EXPECT_CLOSE(rm, rm64, kFloat32, "running_mean");
    FERRY_EXPECT_CLOSE(rv, rv64, kFloat32, "running_var");
    // inference forward
    Tensor yi = testing::nn::nan_in(sizes, dtype, lx == Layout::kSliced ? Layout::kContiguous : lx);
    Tensor yi64 = empty(sizes, kFloat64);
    batch_norm_forward_inference(yi, x, w, b, rm, rv, 1e-3);
    batch_norm_forward_inference(yi64, testing::nn::f64(x), testing::nn::f64(w),
                                 testing::nn::f64(b), testing::nn::f64(rm), testing::nn::f64(rv),
                                 1e-3);
    FERRY_EXPECT_CLOSE(yi, yi64, dtype, "inference out");
    // backward, both modes
    const Tensor g =
        testing::nn::random_in(sizes, dtype, rng() % 2 ? lx : Layout::kContiguous, gen);
    for (bool training : {true, false}) {
      SCOPED_TRACE(training ? "training backward" : "eval backward");
      Tensor dx = testing::nn::nan_in(sizes, dtype, Layout::kContiguous);
      Tensor dw = affine ? empty({c}, dtype) : Tensor(), db = affine ? empty({c}, dtype) : Tensor();
      Tensor dx64 = empty(sizes, kFloat64), dw64 = empty({c}, kFloat64),
             db64 = empty({c}, kFloat64);
      batch_norm_backward(dx, dw, db, g, x, w, mean, invstd, training);
      batch_norm_backward(dx64, affine ? dw64 : Tensor(), affine ? db64 : Tensor(),
                          testing::nn::f64(g), testing::nn::f64(x), testing::nn::f64(w),
                          testing::nn::f64(mean), testing::nn::f64(invstd), training);
      FERRY_EXPECT_CLOSE(dx, dx64, dtype, "grad_input");
      if (affine) {
        FERRY_EXPECT_CLOSE(dw, dw64, dtype, "grad_weight");
        FERRY_EXPECT_CLOSE(db, db64, dtype, "grad_bias");
      }
    }
  }
}

TEST(NnBatchNorm, RunningStatisticsUseTheUnbiasedVariance) {
  // One channel, values 1, 2, 3, 6: mean 3, biased var 3.5, unbiased 14/3.
  for (ScalarType dtype : {kFloat32, kFloat64}) {
    Tensor x = empty({4, 1}, dtype);
    x.copy_(arange(1, 5, 1, kFloat64).view({4, 1}));
    Tensor(x).select(0, 3).fill_(6.0);
    Tensor y = empty({4, 1}, dtype), mean = empty({1}, dtype), invstd = empty({1}, dtype);
    Tensor rm = zeros({1}, dtype), rv = ones({1}, dtype);
    batch_norm_forward_training(y, mean, invstd, x, Tensor(), Tensor(), rm, rv, 0.25, 0.0);
    EXPECT_NEAR(testing::nn::values(mean)[0], 3.0, 1e-6) << dtype;
    EXPECT_NEAR(testing::nn::values(invstd)[0], 1 / std::sqrt(3.5), 1e-6) << dtype;
    EXPECT_NEAR(testing::nn::values(rm)[0], 0.75, 1e-6) << dtype;
    EXPECT_NEAR(testing::nn::values(rv)[0], 0.75 + 0.25 * 14.0 / 3.0, 1e-6) << dtype;
  }
}

TEST(NnBatchNorm, Float64BackwardMatchesFiniteDifferences) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const std::vector<int64_t> sizes{3, 4, 5};
  const Tensor x = randn(sizes, kFloat64, &gen), w = randn({4}, kFloat64, &gen),
               b = randn({4}, kFloat64, &gen);
  const Tensor g = randn(sizes, kFloat64, &gen), v = randn(sizes, kFloat64, &gen);
  const Tensor vw = randn({4}, kFloat64, &gen), vb = randn({4}, kFloat64, &gen);
  auto train = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
    Tensor y = empty(sizes, kFloat64), m = empty({4}, kFloat64), s = empty({4}, kFloat64);
    batch_norm_forward_training(y, m, s, xi, wi, bi, Tensor(), Tensor(), 0.1, 1e-5);
    return y;
  };
  Tensor y = empty(sizes, kFloat64), m = empty({4}, kFloat64), s = empty({4}, kFloat64);
  batch_norm_forward_training(y, m, s, x, w, b, Tensor(), Tensor(), 0.1, 1e-5);
  Tensor dx = empty(sizes, kFloat64), dw = empty({4}, kFloat64), db = empty({4}, kFloat64);
  batch_norm_backward(dx, dw, db, g, x, w, m, s, true);
  using testing::nn::dot;
  using testing::nn::fd_directional;
  EXPECT_TRUE(testing::nn::near_rel(
      fd_directional([&](const Tensor& t) { return train(t, w, b); }, x, v, g), dot(dx, v), 1e-6));
  EXPECT_TRUE(testing::nn::near_rel(
      fd_directional([&](const Tensor& t) { return train(x, t, b); }, w, vw, g), dot(dw, vw),
      1e-6));
  EXPECT_TRUE(testing::nn::near_rel(
      fd_directional([&](const Tensor& t) { return train(x, w, t); }, b, vb, g), dot(db, vb),
      1e-6));
  // Eval mode is linear in x with the statistics fixed: the adjoint identity.
  const Tensor rv = rand({4}, kFloat64, &gen);
  Tensor inv = empty({4}, kFloat64);
  for (int64_t c = 0; c < 4; ++c)
    inv.data_ptr<double>()[c] = 1 / std::sqrt(rv.data_ptr<double>()[c] + 1e-5);
  Tensor yv = empty(sizes, kFloat64), dxe = empty(sizes, kFloat64);
  batch_norm_forward_inference(yv, v, w, Tensor(), zeros({4}, kFloat64), rv, 1e-5);
  batch_norm_backward(dxe, Tensor(), Tensor(), g, x, w, zeros({4}, kFloat64), inv, false);
  EXPECT_TRUE(testing::nn::near_rel(dot(g, yv), dot(dxe, v), 1e-10));
}

TEST(NnLayerNorm, MatchesFloat64LoopsOnRandomShapesLayoutsAndDtypes) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 18; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> sizes;
    for (int d = 0; d < rank; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 24));
    const int64_t k = 1 + static_cast<int64_t>(rng() % rank);
    const std::vector<int64_t> norm_shape(sizes.end() - k, sizes.end());
    std::vector<int64_t> stat_shape(sizes.begin(), sizes.end() - k);
    const ScalarType dtype = testing::nn::kReducedAndF32[iter % 3], st = stat_type(dtype);
    const Layout lx = rng() % 3 == 0 ? Layout::kContiguous
                      : rng() % 2    ? Layout::kTransposed
                                     : Layout::kSliced;
    const bool affine = iter % 3 != 2;
    SCOPED_TRACE(std::string(testing::nn::layout_name(lx)) + " " + ::testing::PrintToString(sizes) +
                 " k " + std::to_string(k) + " " + std::string(scalar_type_name(dtype)));
    const Tensor x = testing::nn::random_in(sizes, dtype, lx, gen, 3.0);
    const Tensor w =
        affine ? testing::nn::random_in(norm_shape, dtype, Layout::kContiguous, gen) : Tensor();
    const Tensor b =
        affine ? testing::nn::random_in(norm_shape, dtype, Layout::kContiguous, gen) : Tensor();
    Tensor y = testing::nn::nan_in(sizes, dtype, rng() % 2 ? lx : Layout::kContiguous);
    Tensor mean = empty(stat_shape, st), rstd = empty(stat_shape, st);
    Tensor y64 = empty(sizes, kFloat64), mean64 = empty(stat_shape, kFloat64),
           rstd64 = empty(stat_shape, kFloat64);
    layer_norm_forward(y, mean, rstd, x, w, b, k, 1e-5);
    layer_norm_forward(y64, mean64, rstd64, testing::nn::f64(x), testing::nn::f64(w),
                       testing::nn::f64(b), k, 1e-5);
    FERRY_EXPECT_CLOSE(y, y64, dtype, "out");
    FERRY_EXPECT_CLOSE(mean, mean64, kFloat32, "mean");
    FERRY_EXPECT_CLOSE(rstd, rstd64, kFloat32, "rstd");
    const Tensor g =
        testing::nn::random_in(sizes, dtype, rng() % 2 ? lx : Layout::kContiguous, gen);
    Tensor dx = testing::nn::nan_in(sizes, dtype, Layout::kContiguous);
    Tensor dw = affine ? empty(norm_shape, dtype) : Tensor(),
           db = affine ? empty(norm_shape, dtype) : Tensor();
    Tensor dx64 = empty(sizes, kFloat64), dw64 = empty(norm_shape, kFloat64),
           db64 = empty(norm_shape, kFloat64);
    layer_norm_backward(dx, dw, db, g, x, mean, rstd, w, k);
    layer_norm_backward(dx64, affine ? dw64 : Tensor(), affine ? db64 : Tensor(),
                        testing::nn::f64(g), testing::nn::f64(x), testing::nn::f64(mean),
                        testing::nn::f64(rstd), testing::nn::f64(w), k);
    FERRY_EXPECT_CLOSE(dx, dx64, dtype, "grad_input");
    if (affine) {
      FERRY_EXPECT_CLOSE(dw, dw64, dtype, "grad_weight");
      FERRY_EXPECT_CLOSE(db, db64, dtype, "grad_bias");
    }
  }
}

TEST(NnLayerNorm, Float64BackwardMatchesFiniteDifferences) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const std::vector<int64_t> sizes{3, 2, 5};
  const Tensor x = randn(sizes, kFloat64, &gen), w = randn({2, 5}, kFloat64, &gen),
               b = randn({2, 5}, kFloat64, &gen);
  const Tensor g = randn(sizes, kFloat64, &gen), v = randn(sizes, kFloat64, &gen);
  const Tensor vw = randn({2, 5}, kFloat64, &gen), vb = randn({2, 5}, kFloat64, &gen);
  auto f = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
    Tensor y = empty(sizes, kFloat64), m = empty({3}, kFloat64), r = empty({3}, kFloat64);
    layer_norm_forward(y, m, r, xi, wi.view({2, 5}), bi.view({2, 5}), 2, 1e-5);
    return y;
  };
  Tensor y = empty(sizes, kFloat64), m = empty({3}, kFloat64), r = empty({3}, kFloat64);
  layer_norm_forward(y, m, r, x, w, b, 2, 1e-5);
  Tensor dx = empty(sizes, kFloat64), dw = empty({2, 5}, kFloat64), db = empty({2, 5}, kFloat64);
  layer_norm_backward(dx, dw, db, g, x, m, r, w, 2);
  using testing::nn::dot;
  using testing::nn::fd_directional;
  EXPECT_TRUE(testing::nn::near_rel(
      fd_directional([&](const Tensor& t) { return f(t, w, b); }, x, v, g), dot(dx, v), 1e-6));
  EXPECT_TRUE(testing::nn::near_rel(
      fd_directional([&](const Tensor& t) { return f(x, t, b); }, w, vw, g), dot(dw, vw), 1e-6));
  EXPECT_TRUE(testing::nn::near_rel(
      fd_directional([&](const Tensor& t) { return f(x, w, t); }, b, vb, g), dot(db, vb), 1e-6));
}

TEST(NnNorm, BadArgumentsRaise) {
  Tensor x = ones({4, 3, 2, 2});
  Tensor y = empty({4, 3, 2, 2}), m = empty({3}), s = empty({3});
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                batch_norm_forward_training(empty({1, 3}), m, s, ones({1, 3}), Tensor(), Tensor(),
                                            Tensor(), Tensor(), 0.1, 1e-5);
              }),
              HasSubstr("more than 1 value per channel"));
  std::string msg = testing::error_of<ShapeError>([&] {
    batch_norm_forward_training(y, m, s, x, ones({4}), Tensor(), Tensor(), Tensor(), 0.1, 1e-5);
  });
  EXPECT_THAT(msg, HasSubstr("[3]"));
  EXPECT_THAT(msg, HasSubstr("[4]"));
  EXPECT_THAT(testing::error_of<DTypeError>([&] {
                batch_norm_forward_training(y, empty({3}, kFloat64), s, x, Tensor(), Tensor(),
                                            Tensor(), Tensor(), 0.1, 1e-5);
              }),
              HasSubstr("Float64"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                batch_norm_forward_inference(empty({4, 3, 2}), x, Tensor(), Tensor(), m, s, 1e-5);
              }),
              HasSubstr("[4, 3, 2, 2]"));
  EXPECT_THAT(
      testing::error_of<ShapeError>([&] {
        layer_norm_forward(y, empty({4, 3}), empty({4, 3}), x, ones({3, 2}), Tensor(), 2, 1e-5);
      }),
      HasSubstr("[2, 2]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                layer_norm_forward(y, empty({4}), empty({4}), x, Tensor(), Tensor(), 2, 1e-5);
              }),
              HasSubstr("12 elements"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                layer_norm_forward(y, empty({4}), empty({4}), x, Tensor(), Tensor(), 5, 1e-5);
              }),
              HasSubstr("normalized_ndim in [1, 4]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                layer_norm_backward(Tensor(), Tensor(), Tensor(), ones({4, 3, 2}), x, empty({4, 3}),
                                    empty({4, 3}), Tensor(), 1);
              }),
              HasSubstr("[4, 3, 2, 2]"));
}

}  // namespace
}  // namespace ferry::cpu
