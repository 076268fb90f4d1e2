// batch_norm (training with running statistics, evaluation) and layer_norm: values against the
// closed forms in float64, every floating dtype (16-bit inputs with float32 statistics and
// parameters), channels-last and non-contiguous inputs, gradcheck in both modes, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/nn/nn_ops_test_util.h"

namespace ferry::testing {
namespace {

using autograd::variable_list;
using ::testing::HasSubstr;

struct BnRef {
  Tensor out, mean, var;  // var: biased
};

// x [N, C, ...]: per-channel statistics over every other dim, then the affine normalization.
BnRef ref_batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean_in,
                     const Tensor& var_in, double eps) {
  const int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c);
  const std::vector<double> v = values_of(x);
  std::vector<double> mean(c, 0.0), var(c, 0.0);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < s; ++j) mean[ch] += v[(i * c + ch) * s + j];
    }
    mean[ch] /= static_cast<double>(n * s);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        const double d = v[(i * c + ch) * s + j] - mean[ch];
        var[ch] += d * d;
      }
    }
    var[ch] /= static_cast<double>(n * s);
  }
  const std::vector<double> m = mean_in.defined() ? values_of(mean_in) : mean;
  const std::vector<double> q = var_in.defined() ? values_of(var_in) : var;
  const std::vector<double> vw = w.defined() ? values_of(w) : std::vector<double>(c, 1.0);
  const std::vector<double> vb = b.defined() ? values_of(b) : std::vector<double>(c, 0.0);
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t j = 0; j < s; ++j) {
        const size_t at = static_cast<size_t>((i * c + ch) * s + j);
        out[at] = (v[at] - m[ch]) / std::sqrt(q[ch] + eps) * vw[ch] + vb[ch];
      }
    }
  }
  return {tensor_of(out, x.sizes()), tensor_of(mean, {c}), tensor_of(var, {c})};
}

TEST(BatchNorm, TrainingNormalizesWithBatchStatisticsAndUpdatesRunningOnes) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const double momentum = 0.1, eps = 1e-5;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{4, 3}, {2, 3, 5}, {2, 3, 4, 5}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const Tensor x = uniform(rng, shape, kFloat64, -2, 3);
    const Tensor w = uniform(rng, {3}), b = uniform(rng, {3});
    Tensor rm = uniform(rng, {3}), rv = uniform(rng, {3}, kFloat64, 0.5, 2);
    const Tensor rm0 = rm.clone(), rv0 = rv.clone();
    const uint32_t version = rm._version();
    auto [out, save_mean, save_invstd] = native_batch_norm(x, w, b, rm, rv, true, momentum, eps);
    const BnRef ref = ref_batch_norm(x, w, b, Tensor(), Tensor(), eps);
    EXPECT_ALL_CLOSE(out, ref.out, 1e-10, 1e-10);
    EXPECT_ALL_CLOSE(save_mean, ref.mean, 1e-12, 1e-12);
    EXPECT_ALL_CLOSE(save_invstd, (ref.var + eps).rsqrt(), 1e-10, 1e-12);
    const double count = static_cast<double>(x.numel() / 3);
    EXPECT_ALL_CLOSE(rm, rm0 * (1 - momentum) + ref.mean * momentum, 1e-12, 1e-12);
    EXPECT_ALL_CLOSE(rv, rv0 * (1 - momentum) + ref.var * (momentum * count / (count - 1)), 1e-12,
                     1e-12);
    EXPECT_GT(rm._version(), version);
    // The composite returns the same output; no running statistics is fine in training.
    EXPECT_ALL_CLOSE(batch_norm(x, w, b, std::nullopt, std::nullopt, true, momentum, eps), ref.out,
                     1e-10, 1e-10);
  }
}

TEST(BatchNorm, EvaluationUsesRunningStatisticsAndKeepsChannelsLast) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor x = uniform(rng, {2, 3, 4, 5});
  const Tensor w = uniform(rng, {3}), b = uniform(rng, {3});
  const Tensor rm = uniform(rng, {3}), rv = uniform(rng, {3}, kFloat64, 0.5, 2);
  const BnRef ref = ref_batch_norm(x, w, b, rm, rv, 1e-3);
  auto [out, m, s] = native_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-3);
  EXPECT_ALL_CLOSE(out, ref.out, 1e-12, 1e-12);
  EXPECT_EQ(m.numel(), 0);
  const Tensor cl =
      batch_norm(x.contiguous(MemoryFormat::ChannelsLast), w, b, rm, rv, false, 0.1, 1e-3);
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_ALL_CLOSE(cl, ref.out, 1e-12, 1e-12);
  const Tensor cl_train = batch_norm(x.contiguous(MemoryFormat::ChannelsLast), w, b, std::nullopt,
                                     std::nullopt, true, 0.1, 1e-3);
  EXPECT_TRUE(cl_train.is_contiguous(MemoryFormat::ChannelsLast));
  // 16-bit inputs take float32 (or their own dtype's) parameters and statistics.
  for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(scalar_type_name(dtype));
    const Tensor xd = x.to(dtype);
    const Tensor ref_d = ref_batch_norm(xd.to(kFloat64), w, b, rm, rv, 1e-3).out;
    const double tol = dtype == kFloat32 ? 1e-5 : (dtype == kBFloat16 ? 3e-2 : 5e-3);
    const Tensor eval = batch_norm(xd, w.to(kFloat32), b.to(kFloat32), rm.to(kFloat32),
                                   rv.to(kFloat32), false, 0.1, 1e-3);
    EXPECT_EQ(eval.dtype(), dtype);
    EXPECT_ALL_CLOSE(eval, ref_d, tol, tol);
    Tensor rm32 = rm.to(kFloat32), rv32 = rv.to(kFloat32);
    auto [train, sm, si] =
        native_batch_norm(xd, w.to(dtype), b.to(dtype), rm32, rv32, true, 0.1, 1e-3);
    EXPECT_EQ(sm.dtype(), kFloat32);
    // Running statistics in the input's own 16-bit dtype work too, and receive the update.
    Tensor rm16 = rm.to(dtype), rv16 = rv.to(dtype);
    const Tensor both = batch_norm(xd, w.to(dtype), b.to(dtype), rm16, rv16, true, 0.1, 1e-3);
    EXPECT_ALL_CLOSE(both, train, 0, 0);
    EXPECT_ALL_CLOSE(rm16, rm32, tol, tol);
    EXPECT_ALL_CLOSE(rv16, rv32, tol, tol);
    const Tensor w32 = w.to(kFloat32), b32 = b.to(kFloat32);
    EXPECT_ALL_CLOSE(
        batch_norm(xd, w32, b32, rm16, rv16, false, 0.1, 1e-3),
        batch_norm(xd, w32, b32, rm16.to(kFloat32), rv16.to(kFloat32), false, 0.1, 1e-3), 0, 0);
    EXPECT_ALL_CLOSE(
        train,
        ref_batch_norm(xd.to(kFloat64), w.to(dtype), b.to(dtype), Tensor(), Tensor(), 1e-3).out,
        tol, tol);
  }
}

TEST(BatchNorm, GradcheckInTrainingAndEvaluationAcrossLayouts) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor x = leaf(uniform(rng, {2, 3, 3, 2}, kFloat64, -1, 2));
  const Tensor w = leaf(uniform(rng, {3})), b = leaf(uniform(rng, {3}));
  const Tensor rm = uniform(rng, {3}), rv = uniform(rng, {3}, kFloat64, 0.5, 2);
  for (bool training : {true, false}) {
    for (int layout = 0; layout < 3; ++layout) {
      SCOPED_TRACE(std::string(training ? "training" : "eval") + " layout " +
                   std::to_string(layout));
      EXPECT_TRUE(grad_ok(
          [&](const variable_list& in) -> variable_list {
            Tensor xi = in[0];
            if (layout == 1) xi = xi.contiguous(MemoryFormat::ChannelsLast);
            if (layout == 2) xi = xi.transpose(2, 3);  // not dense in either format
            return {batch_norm(xi, in[1], in[2], training ? std::nullopt : std::optional(rm),
                               training ? std::nullopt : std::optional(rv), training, 0.1, 1e-5)};
          },
          {x, w, b}));
    }
  }
  // No affine parameters; a 2-d input.
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {batch_norm(in[0], std::nullopt, std::nullopt, std::nullopt, std::nullopt, true, 0.1,
                           1e-5)};
      },
      {leaf(uniform(rng, {5, 2}))}));
  EXPECT_EQ(batch_norm(x, w, b, std::nullopt, std::nullopt, true, 0.1, 1e-5).grad_fn()->name(),
            "NativeBatchNormBackward0");
}

TEST(BatchNorm, Errors) {
  const Tensor x = zeros({2, 3, 4});
  EXPECT_THAT(error_of<ShapeError>([&] {
                batch_norm(zeros({1, 3}), std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                           true, 0.1, 1e-5);
              }),
              HasSubstr("Expected more than 1 value per channel when training, got input size "
                        "[1, 3]"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                batch_norm(x, zeros({4}), std::nullopt, std::nullopt, std::nullopt, true, 0.1,
                           1e-5);
              }),
              HasSubstr("expected weight of shape [3] for input [2, 3, 4], but got [4]"));
  EXPECT_THAT(error_of<Error>([&] {
                batch_norm(x, std::nullopt, std::nullopt, std::nullopt, std::nullopt, false, 0.1,
                           1e-5);
              }),
              HasSubstr("running_mean and running_var must be defined in evaluation mode"));
  EXPECT_THAT(error_of<DTypeError>([&] {
                batch_norm(x, zeros({3}, kFloat64), std::nullopt, std::nullopt, std::nullopt, true,
                           0.1, 1e-5);
              }),
              HasSubstr("expected weight of dtype Float32, but got Float64"));
  EXPECT_THAT(error_of<DeviceError>([&] {
                batch_norm(x, zeros({3}, Device("sim:0")), std::nullopt, std::nullopt, std::nullopt,
                           true, 0.1, 1e-5);
              }),
              HasSubstr("cpu and sim:0"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                batch_norm(zeros({3}), std::nullopt, std::nullopt, std::nullopt, std::nullopt, true,
                           0.1, 1e-5);
              }),
              HasSubstr("expected input of at least 2 dimensions"));
}

// ---- layer norm -------------------------------------------------------------------------------

Tensor ref_layer_norm(const Tensor& x, int64_t nd, const Tensor& w, const Tensor& b, double eps) {
  int64_t d = 1;
  for (int64_t i = x.dim() - nd; i < x.dim(); ++i) d *= x.size(i);
  const int64_t rows = x.numel() / d;
  const std::vector<double> v = values_of(x);
  const std::vector<double> vw = w.defined() ? values_of(w) : std::vector<double>(d, 1.0);
  const std::vector<double> vb = b.defined() ? values_of(b) : std::vector<double>(d, 0.0);
  std::vector<double> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += v[r * d + j];
    mean /= static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) var += (v[r * d + j] - mean) * (v[r * d + j] - mean);
    var /= static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) {
      out[r * d + j] = (v[r * d + j] - mean) / std::sqrt(var + eps) * vw[j] + vb[j];
    }
  }
  return tensor_of(out, x.sizes());
}

TEST(LayerNorm, MatchesTheClosedFormInEveryDtype) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor x = uniform(rng, {2, 3, 4, 5}, kFloat64, -2, 3);
  for (int64_t nd : {1, 2}) {
    SCOPED_TRACE(nd);
    const std::vector<int64_t> shape(x.sizes().end() - nd, x.sizes().end());
    const Tensor w = uniform(rng, shape), b = uniform(rng, shape);
    const Tensor ref = ref_layer_norm(x, nd, w, b, 1e-5);
    auto [out, mean, rstd] = native_layer_norm(x, shape, w, b, 1e-5);
    EXPECT_ALL_CLOSE(out, ref, 1e-10, 1e-10);
    DimVector stats(x.sizes().slice(0, static_cast<size_t>(x.dim() - nd)));
    for (int64_t i = 0; i < nd; ++i) stats.push_back(1);
    EXPECT_EQ(mean.sizes(), IntArrayRef(stats));
    EXPECT_ALL_CLOSE(layer_norm(x, shape), ref_layer_norm(x, nd, Tensor(), Tensor(), 1e-5), 1e-10,
                     1e-10);
    // A channels-last input gives a contiguous output of the same values.
    const Tensor cl = layer_norm(x.contiguous(MemoryFormat::ChannelsLast), shape, w, b);
    EXPECT_TRUE(cl.is_contiguous());
    EXPECT_ALL_CLOSE(cl, ref, 1e-10, 1e-10);
    for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
      const Tensor xd = x.to(dtype);
      const double tol = dtype == kFloat32 ? 1e-5 : (dtype == kBFloat16 ? 5e-2 : 1e-2);
      auto [o, m, r] = native_layer_norm(xd, shape, w.to(dtype), b.to(dtype), 1e-5);
      EXPECT_EQ(o.dtype(), dtype);
      EXPECT_EQ(m.dtype(), kFloat32);
      EXPECT_ALL_CLOSE(o, ref_layer_norm(xd.to(kFloat64), nd, w.to(dtype), b.to(dtype), 1e-5), tol,
                       tol)
          << scalar_type_name(dtype);
    }
  }
}

TEST(LayerNorm, GradcheckWithAndWithoutAffineOnNonContiguousInputs) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor x = leaf(uniform(rng, {3, 2, 4}));
  const Tensor w = leaf(uniform(rng, {2, 4})), b = leaf(uniform(rng, {2, 4}));
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {layer_norm(in[0], {2, 4}, in[1], in[2])};
      },
      {x, w, b}));
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {layer_norm(in[0].transpose(0, 1), {3, 4}, std::nullopt, in[1])};
      },
      {x, leaf(uniform(rng, {3, 4}))}));
  EXPECT_EQ(layer_norm(x, {4}).grad_fn()->name(), "NativeLayerNormBackward0");
}

TEST(LayerNorm, Errors) {
  EXPECT_THAT(error_of<ShapeError>([&] {
                layer_norm(zeros({2, 3, 4}), {5});
              }),
              HasSubstr("Given normalized_shape=[5], expected input with shape [*, 5], but got "
                        "input of size[2, 3, 4]"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                layer_norm(zeros({2, 3, 4}), {4}, zeros({5}));
              }),
              HasSubstr("expected weight of shape [4] for input [2, 3, 4], but got [5]"));
  EXPECT_THAT(error_of<DTypeError>([&] {
                layer_norm(zeros({2, 4}, kInt64), {4});
              }),
              HasSubstr("expected input of a floating dtype"));
  EXPECT_THAT(error_of<DeviceError>([&] {
                layer_norm(zeros({2, 4}), {4}, zeros({4}, Device("sim:0")));
              }),
              HasSubstr("cpu and sim:0"));
}

}  // namespace
}  // namespace ferry::testing
