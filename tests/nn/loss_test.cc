// nll_loss, cross_entropy (class indices with weights, ignore_index and label smoothing; class
// probabilities), mse_loss, embedding and dropout: values against float64 closed forms written
// from PyTorch's definitions, gradcheck, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/nn/nn_ops_test_util.h"

namespace ferry::testing {
namespace {

using autograd::variable_list;
using ::testing::HasSubstr;

// The rows of x [N, C, d...] (or [C]): one vector of C values per (n, d...) position, in the
// order of the target's elements.
std::vector<std::vector<double>> class_rows(const Tensor& x) {
  const Tensor t = x.dim() == 1 ? x.unsqueeze(0) : x;
  const int64_t n = t.size(0), c = t.size(1), s = t.numel() / (n * c);
  const std::vector<double> v = values_of(t);
  std::vector<std::vector<double>> rows;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      std::vector<double> r(static_cast<size_t>(c));
      for (int64_t k = 0; k < c; ++k) r[k] = v[(i * c + k) * s + j];
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<double> log_softmax_of(const std::vector<double>& r) {
  double mx = -INFINITY, sum = 0;
  for (double v : r) mx = std::max(mx, v);
  for (double v : r) sum += std::exp(v - mx);
  std::vector<double> out;
  for (double v : r) out.push_back(v - mx - std::log(sum));
  return out;
}

// PyTorch's cross_entropy with class indices (log_softmax when `logits`, else x is already
// log-probabilities and smoothing is 0: nll_loss).
Tensor ref_loss(const Tensor& x, const Tensor& target, const Tensor& weight,
                const std::string& reduction, int64_t ignore_index, double smoothing, bool logits) {
  const auto rows = class_rows(x);
  const std::vector<double> t = values_of(target);
  const size_t c = rows.empty() ? 0 : rows[0].size();
  const std::vector<double> w = weight.defined() ? values_of(weight) : std::vector<double>(c, 1.0);
  std::vector<double> per_row;
  double nll_sum = 0, smooth_sum = 0, wsum = 0;
  std::vector<double> nll_rows, smooth_rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<double> lp = logits ? log_softmax_of(rows[i]) : rows[i];
    const auto ti = static_cast<int64_t>(t[i]);
    double nll = 0, smooth = 0;
    if (ti != ignore_index) {
      nll = -w[ti] * lp[ti];
      wsum += w[ti];
      for (size_t k = 0; k < c; ++k) smooth -= w[k] * lp[k];
    }
    nll_rows.push_back(nll);
    smooth_rows.push_back(smooth);
    nll_sum += nll;
    smooth_sum += smooth;
  }
  const double s = smoothing, cc = static_cast<double>(c);
  if (reduction == "none") {
    for (size_t i = 0; i < rows.size(); ++i) {
      per_row.push_back((1 - s) * nll_rows[i] + s / cc * smooth_rows[i]);
    }
    return tensor_of(per_row, target.sizes());
  }
  if (reduction == "sum") return tensor_of({(1 - s) * nll_sum + s / cc * smooth_sum}, {});
  return tensor_of({((1 - s) * nll_sum + s / cc * smooth_sum) / wsum}, {});
}

struct LossCase {
  std::vector<int64_t> input;
  bool weighted;
  int64_t ignore_index;
};

const std::vector<LossCase> kLossCases = {
    {{5}, false, -100},      {{4, 5}, false, -100},    {{4, 5}, true, 2},
    {{3, 4, 2, 3}, true, 1}, {{2, 3, 4}, false, -100},
};

// Targets for `input`'s shape ([N, d...] or [] for a 1-d input), some equal to ignore_index but
// never all of them: then the mean is 0 / 0, a NaN that finite differences cannot differentiate
// (about one seed in 625 drew four of four for {4, 5}); that case has its own check below.
Tensor targets_for(std::mt19937_64& rng, const LossCase& k) {
  std::vector<int64_t> shape;
  if (k.input.size() > 1) {
    shape.push_back(k.input[0]);
    for (size_t d = 2; d < k.input.size(); ++d) shape.push_back(k.input[d]);
  }
  const int64_t classes = k.input.size() == 1 ? k.input[0] : k.input[1];
  Tensor target = indices_of(rng, shape, classes);
  int64_t* t = target.data_ptr<int64_t>();
  if (std::all_of(t, t + target.numel(), [&](int64_t c) { return c == k.ignore_index; })) {
    t[0] = (k.ignore_index + 1) % classes;
  }
  return target;
}

TEST(NllLoss, MatchesTheClosedFormForEveryReductionAndShape) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const LossCase& k : kLossCases) {
    SCOPED_TRACE(::testing::PrintToString(k.input));
    const Tensor lp = uniform(rng, k.input, kFloat64, -3, 0);
    const Tensor target = targets_for(rng, k);
    const int64_t classes = k.input.size() == 1 ? k.input[0] : k.input[1];
    const Tensor w = k.weighted ? uniform(rng, {classes}, kFloat64, 0.5, 2) : Tensor();
    for (const char* r : {"none", "mean", "sum"}) {
      SCOPED_TRACE(r);
      const Tensor expected = ref_loss(lp, target, w, r, k.ignore_index, 0, false);
      EXPECT_ALL_CLOSE(nll_loss(lp, target, w, r, k.ignore_index), expected, 1e-12, 1e-12);
      EXPECT_ALL_CLOSE(
          nll_loss(lp.to(kFloat32), target, w.defined() ? w.to(kFloat32) : w, r, k.ignore_index),
          expected, 1e-5, 1e-5);
      EXPECT_TRUE(grad_ok(
          [&](const variable_list& in) -> variable_list {
            return {nll_loss(in[0], target, w, r, k.ignore_index)};
          },
          {leaf(lp)}));
    }
  }
  // Every target ignored: the mean is 0 / 0.
  const Tensor lp = uniform(rng, {2, 3});
  EXPECT_TRUE(
      std::isnan(nll_loss(lp, full({2}, 1, kInt64), std::nullopt, "mean", 1).item<double>()));
}

TEST(NllLoss, DoubleBackwardThroughNllLossBackward) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor lp = uniform(rng, {4, 3}), target = indices_of(rng, {4}, 3);
  const Tensor w = uniform(rng, {3}, kFloat64, 0.5, 2);
  auto [loss, total] = nll_loss_forward(lp, target, w, 1, -100);
  EXPECT_TRUE(grad_ok(
      [&](const variable_list& in) -> variable_list {
        return {nll_loss_backward(in[0], lp, target, w, 1, -100, total)};
      },
      {leaf(uniform(rng, {}))}));
}

TEST(CrossEntropy, WeightsIgnoreIndexAndLabelSmoothingAsPyTorch) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const LossCase& k : kLossCases) {
    SCOPED_TRACE(::testing::PrintToString(k.input));
    const Tensor x = uniform(rng, k.input, kFloat64, -2, 2);
    const Tensor target = targets_for(rng, k);
    const int64_t classes = k.input.size() == 1 ? k.input[0] : k.input[1];
    const Tensor w = k.weighted ? uniform(rng, {classes}, kFloat64, 0.5, 2) : Tensor();
    for (double smoothing : {0.0, 0.25}) {
      for (const char* r : {"none", "mean", "sum"}) {
        SCOPED_TRACE(std::string(r) + " smoothing " + std::to_string(smoothing));
        const Tensor expected = ref_loss(x, target, w, r, k.ignore_index, smoothing, true);
        EXPECT_ALL_CLOSE(cross_entropy(x, target, w, r, k.ignore_index, smoothing), expected, 1e-10,
                         1e-12);
        EXPECT_TRUE(grad_ok(
            [&](const variable_list& in) -> variable_list {
              return {cross_entropy(in[0], target, w, r, k.ignore_index, smoothing)};
            },
            {leaf(x)}));
      }
    }
  }
}

TEST(CrossEntropy, ReducedPrecisionAndProbabilityTargets) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor x = uniform(rng, {6, 5}, kFloat64, -2, 2);
  const Tensor target = indices_of(rng, {6}, 5);
  const Tensor expected = ref_loss(x, target, Tensor(), "mean", -100, 0.1, true);
  for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
    const Tensor loss = cross_entropy(x.to(dtype), target, std::nullopt, "mean", -100, 0.1);
    EXPECT_EQ(loss.dtype(), dtype);
    const double tol = dtype == kFloat32 ? 1e-5 : 3e-2;
    EXPECT_ALL_CLOSE(loss, expected, tol, tol) << scalar_type_name(dtype);
  }
  // Probabilities: -sum_c w_c t'_c log_softmax(x)_c, t' = t (1 - s) + s / C; mean over rows.
  const Tensor probs = softmax(uniform(rng, {6, 5}), 1);
  const Tensor w = uniform(rng, {5}, kFloat64, 0.5, 2);
  const auto rows = class_rows(x);
  const std::vector<double> p = values_of(probs), vw = values_of(w);
  double total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<double> lp = log_softmax_of(rows[i]);
    for (size_t c = 0; c < 5; ++c) total -= vw[c] * (p[i * 5 + c] * 0.8 + 0.2 / 5) * lp[c];
  }
  EXPECT_NEAR(cross_entropy(x, probs, w, "mean", -100, 0.2).item<double>(), total / 6, 1e-12);
  EXPECT_TRUE(grad_ok(
      [&](const variable_list& in) -> variable_list {
        return {cross_entropy(in[0], in[1], w, "sum", -100, 0.2)};
      },
      {leaf(x), leaf(probs)}));
}

TEST(Losses, Errors) {
  const Tensor x = zeros({3, 5});
  EXPECT_THAT(error_of<ShapeError>([&] { nll_loss(x, zeros({4}, kInt64)); }),
              HasSubstr("size mismatch (got input: [3, 5], target: [4])"));
  EXPECT_THAT(error_of<ShapeError>([&] { nll_loss(x, zeros({3}, kInt64), zeros({4})); }),
              HasSubstr("weight tensor should be defined either for all 5 classes or no classes "
                        "but got weight tensor of shape: [4]"));
  EXPECT_THAT(error_of<DTypeError>([&] { nll_loss(x, zeros({3}, kInt32)); }),
              HasSubstr("expected target of dtype int64, but got Int32"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                cross_entropy(zeros({2, 3, 4}), zeros({2, 5}, kInt64));
              }),
              HasSubstr("Expected target size [2, 4], got [2, 5]"));
  EXPECT_THAT(error_of<Error>([&] { cross_entropy(x, zeros({3}, kInt64), std::nullopt, "avg"); }),
              HasSubstr("reduction: expected \"none\", \"mean\" or \"sum\", but got \"avg\""));
  EXPECT_THAT(error_of<Error>(
                  [&] { cross_entropy(x, zeros({3}, kInt64), std::nullopt, "mean", -100, 1.5); }),
              HasSubstr("label_smoothing must be between 0.0 and 1.0. Got: 1.5"));
  EXPECT_THAT(error_of<DeviceError>(
                  [&] { nll_loss(x, zeros({3}, TensorOptions(kInt64).device(Device("sim:0")))); }),
              HasSubstr("cpu and sim:0"));
  EXPECT_THAT(error_of<IndexError>([&] { nll_loss(x, full({3}, 7, kInt64)); }), HasSubstr("7"));
  // A weight that requires grad is refused at backward, as PyTorch does.
  const Tensor lp = leaf(x), w = leaf(ones({5}));
  const Tensor loss = nll_loss(lp, zeros({3}, kInt64), w);
  EXPECT_THAT(error_of<NotImplementedError>([&] { loss.backward(); }),
              HasSubstr("the derivative for 'weight' is not implemented"));
}

TEST(MseLoss, ReductionsBroadcastingAndGradients) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor a = uniform(rng, {3, 4}), b = uniform(rng, {4});
  const std::vector<double> va = values_of(a), vb = values_of(b);
  std::vector<double> sq;
  double sum = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    const double d = va[i] - vb[i % 4];
    sq.push_back(d * d);
    sum += d * d;
  }
  EXPECT_ALL_CLOSE(mse_loss(a, b, "none"), tensor_of(sq, {3, 4}), 1e-12, 1e-12);
  EXPECT_NEAR(mse_loss(a, b, "sum").item<double>(), sum, 1e-12);
  EXPECT_NEAR(mse_loss(a, b).item<double>(), sum / 12, 1e-12);
  EXPECT_NEAR(mse_loss(a.to(kBFloat16), b.to(kBFloat16)).item<double>(), sum / 12, 2e-2);
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {mse_loss(in[0], in[1]), mse_loss(in[0], in[1], "none")};
      },
      {leaf(a), leaf(b)}));
}

// ---- embedding and dropout ---------------------------------------------------------------------

TEST(Embedding, RowsAtIndicesOfAnyShapeAndDtype) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor w = uniform(rng, {6, 3});
  const Tensor idx = tensor_of({5, 0, 2, 2, 1, 5}, {2, 3}, kInt64);
  const Tensor out = embedding(w, idx);
  EXPECT_EQ(out.sizes(), IntArrayRef({2, 3, 3}));
  const std::vector<double> vw = values_of(w), vo = values_of(out), vi = values_of(idx);
  for (size_t i = 0; i < vi.size(); ++i) {
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(vo[i * 3 + j], vw[vi[i] * 3 + j]);
  }
  EXPECT_ALL_CLOSE(embedding(w, idx.to(kInt32)), out, 0, 0);
  EXPECT_ALL_CLOSE(embedding(w.to(kBFloat16), idx), out.to(kBFloat16), 0, 0);
  EXPECT_ALL_CLOSE(embedding(w, idx.t()), out.transpose(0, 1), 0, 0);
}

TEST(Embedding, GradientsAccumulateRowsAndSkipThePaddingIndex) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor idx = tensor_of({5, 0, 2, 2, 1, 5}, {2, 3}, kInt64);
  const Tensor w = leaf(uniform(rng, {6, 3}));
  const Tensor g = uniform(rng, {2, 3, 3});
  (embedding(w, idx, /*padding_idx=*/2) * g).sum().backward();
  const std::vector<double> grad = values_of(w.grad()), vg = values_of(g), vi = values_of(idx);
  std::vector<double> expected(18, 0.0), counted(18, 0.0);
  for (size_t i = 0; i < vi.size(); ++i) {
    if (vi[i] == 2) continue;
    for (size_t j = 0; j < 3; ++j) expected[vi[i] * 3 + j] += vg[i * 3 + j];
  }
  EXPECT_ALL_CLOSE(w.grad(), tensor_of(expected, {6, 3}), 1e-12, 1e-12);
  // scale_grad_by_freq divides each row's gradient by the count of its index.
  const Tensor w2 = leaf(uniform(rng, {6, 3}));
  (embedding(w2, idx, -1, true) * g).sum().backward();
  std::vector<double> count(6, 0.0);
  for (double v : vi) count[static_cast<size_t>(v)] += 1;
  for (size_t i = 0; i < vi.size(); ++i) {
    for (size_t j = 0; j < 3; ++j) counted[vi[i] * 3 + j] += vg[i * 3 + j] / count[vi[i]];
  }
  EXPECT_ALL_CLOSE(w2.grad(), tensor_of(counted, {6, 3}), 1e-12, 1e-12);
  // (padding_idx's row is used by the forward but gets no gradient: gradcheck takes none.)
  EXPECT_TRUE(
      grad_ok([&](const variable_list& in) -> variable_list { return {embedding(in[0], idx)}; },
              {leaf(uniform(rng, {6, 3}))}));
  // The backward's gradient with respect to the incoming gradient.
  EXPECT_TRUE(grad_ok(
      [&](const variable_list& in) -> variable_list {
        return {embedding_dense_backward(in[0], idx, 6, 5, false)};
      },
      {leaf(g)}));
  EXPECT_THAT(error_of<DTypeError>([&] { embedding(w, idx.to(kFloat32)); }),
              HasSubstr("expected indices of dtype int64 or int32, but got Float32"));
  EXPECT_THAT(error_of<ShapeError>([&] { embedding(zeros({6}), idx); }),
              HasSubstr("'weight' must be 2-D"));
  EXPECT_THAT(error_of<IndexError>([&] { embedding(w.detach(), full({1}, 6, kInt64)); }),
              HasSubstr("index 6 is out of bounds"));
  EXPECT_THAT(error_of<NotImplementedError>([&] { embedding(w, idx, -1, false, true); }),
              HasSubstr("sparse gradients are not supported"));
}

TEST(Dropout, SeededMaskScaledKeptValuesAndTheirGradient) {
  const Tensor x = full({64, 64}, 2.0, kFloat64);
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  EXPECT_EQ(values_of(dropout(x, 1.0, true).sum())[0], 0.0);
  Generator g1(42), g2(42);
  const Tensor a = dropout(x, 0.25, true, &g1), b = dropout(x, 0.25, true, &g2);
  EXPECT_ALL_CLOSE(a, b, 0, 0);
  const std::vector<double> v = values_of(a);
  int zeros_seen = 0;
  for (double e : v) {
    if (e == 0) {
      ++zeros_seen;
    } else {
      EXPECT_DOUBLE_EQ(e, 2.0 / 0.75);
    }
  }
  // 4096 draws with p = 0.25: 1024 expected, standard deviation about 28.
  EXPECT_NEAR(zeros_seen, 1024, 200);
  const Tensor leaf_x = leaf(x);
  Generator g3(42);
  const Tensor out = dropout(leaf_x, 0.25, true, &g3);
  out.sum().backward();
  EXPECT_ALL_CLOSE(leaf_x.grad(), a / 2.0, 0, 0);
  for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
    Generator g(42);
    EXPECT_ALL_CLOSE(dropout(x.to(dtype), 0.25, true, &g), a, 1e-2, 0) << scalar_type_name(dtype);
  }
  EXPECT_THAT(error_of<Error>([&] { dropout(x, 1.5, true); }),
              HasSubstr("dropout probability has to be between 0 and 1, but got 1.5"));
}

}  // namespace
}  // namespace ferry::testing
