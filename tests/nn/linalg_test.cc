// matmul, mm, bmm, addmm and linear: values against a float64 reference written from the
// definition (PyTorch's broadcasting and vector rules), every floating dtype and int64, gradcheck
// over random shapes (broadcast batches, vectors, transposed operands), and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "ferry/ops/linalg.h"
#include "tests/nn/nn_ops_test_util.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// out[batch..., m, n] = sum_k a[batch..., m, k] b[batch..., k, n] with PyTorch's rules: a 1-d a
// is a row [1, K], a 1-d b a column [K, 1], batches broadcast, vector dims dropped at the end.
Tensor ref_matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  const Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(1) : b_in;
  const IntArrayRef ba = a.sizes().slice(0, a.dim() - 2), bb = b.sizes().slice(0, b.dim() - 2);
  const DimVector batch = broadcast_shapes(ba, bb);
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  DimVector ea = batch, eb = batch;
  ea.push_back(m);
  ea.push_back(k);
  eb.push_back(k);
  eb.push_back(n);
  const std::vector<double> va = values_of(a.expand(ea)), vb = values_of(b.expand(eb));
  int64_t batches = 1;
  for (int64_t s : batch) batches *= s;
  std::vector<double> out(static_cast<size_t>(batches * m * n), 0.0);
  for (int64_t p = 0; p < batches; ++p) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += va[(p * m + i) * k + q] * vb[(p * k + q) * n + j];
        out[(p * m + i) * n + j] = acc;
      }
    }
  }
  DimVector sizes = batch;
  if (a_in.dim() > 1) sizes.push_back(m);
  if (b_in.dim() > 1) sizes.push_back(n);
  return tensor_of(out, sizes);
}

struct MatmulCase {
  std::vector<int64_t> a, b;
};

const std::vector<MatmulCase> kMatmulCases = {
    {{3}, {3}},
    {{2, 3}, {3}},
    {{3}, {3, 4}},
    {{2, 3}, {3, 4}},
    {{5, 2, 3}, {3}},
    {{5, 2, 3}, {3, 4}},
    {{3}, {5, 3, 4}},
    {{2, 3}, {5, 3, 4}},
    {{5, 2, 3}, {5, 3, 4}},
    {{2, 1, 2, 3}, {5, 3, 4}},
    {{1, 2, 3}, {4, 1, 3, 2}},
    {{2, 1, 2, 3}, {1, 5, 3, 4}},
    {{0, 3}, {3, 4}},
    {{2, 0}, {0, 4}},
    {{4, 0, 2, 3}, {3, 1}},
};

std::string shapes(const MatmulCase& c) {
  std::ostringstream s;
  s << IntArrayRef(c.a) << " @ " << IntArrayRef(c.b);
  return s.str();
}

TEST(Matmul, MatchesTheReferenceForEveryRankCombination) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const MatmulCase& c : kMatmulCases) {
    SCOPED_TRACE(shapes(c));
    const Tensor a = uniform(rng, c.a), b = uniform(rng, c.b);
    const Tensor expected = ref_matmul(a, b);
    EXPECT_ALL_CLOSE(matmul(a, b), expected, 1e-12, 1e-12);
    EXPECT_ALL_CLOSE(a.matmul(b), expected, 1e-12, 1e-12);
  }
}

TEST(Matmul, ReducedPrecisionDtypesAccumulateInFloat32) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(scalar_type_name(dtype));
    // The inputs rounded to the dtype first: what remains is the accumulation error.
    const Tensor a = uniform(rng, {3, 7, 40}, dtype), b = uniform(rng, {40, 5}, dtype);
    const Tensor out = matmul(a, b);
    EXPECT_EQ(out.dtype(), dtype);
    const double tol = dtype == kFloat32 ? 1e-5 : (dtype == kBFloat16 ? 2e-2 : 4e-3);
    EXPECT_ALL_CLOSE(out, ref_matmul(a.to(kFloat64), b.to(kFloat64)), tol, tol);
  }
}

TEST(Matmul, IntegerOperandsAreExact) {
  const Tensor a = tensor_of({1, 2, 3, 4, 5, 6}, {2, 3}, kInt64);
  const Tensor b = tensor_of({7, 8, 9, 10, 11, 12}, {3, 2}, kInt64);
  const Tensor out = mm(a, b);
  EXPECT_EQ(out.dtype(), kInt64);
  EXPECT_THAT(values_of(out), ::testing::ElementsAre(58, 64, 139, 154));
}

TEST(Matmul, GradcheckOverRandomShapesBroadcastAndTransposedOperands) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const MatmulCase& c : kMatmulCases) {
    SCOPED_TRACE(shapes(c));
    const Tensor a = leaf(uniform(rng, c.a)), b = leaf(uniform(rng, c.b));
    EXPECT_TRUE(grad_ok([](const autograd::variable_list& in)
                            -> autograd::variable_list { return {matmul(in[0], in[1])}; },
                        {a, b}));
  }
  // Non-contiguous operands: the function transposes what it is given.
  const Tensor a = leaf(uniform(rng, {2, 4, 3})), b = leaf(uniform(rng, {5, 4}));
  EXPECT_TRUE(grad_ok(
      [](const autograd::variable_list& in) -> autograd::variable_list {
        return {matmul(in[0].transpose(1, 2), in[1].t())};
      },
      {a, b}));
}

TEST(Matmul, MmBmmAddmmAndTheirGradients) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor a = uniform(rng, {3, 4}), b = uniform(rng, {4, 2});
  EXPECT_ALL_CLOSE(mm(a, b), ref_matmul(a, b), 1e-12, 1e-12);
  EXPECT_ALL_CLOSE(a.mm(b), ref_matmul(a, b), 1e-12, 1e-12);
  const Tensor x = uniform(rng, {2, 3, 4}), y = uniform(rng, {2, 4, 5});
  EXPECT_ALL_CLOSE(bmm(x, y), ref_matmul(x, y), 1e-12, 1e-12);
  EXPECT_ALL_CLOSE(x.bmm(y), ref_matmul(x, y), 1e-12, 1e-12);
  // addmm: beta * self + alpha * mat1 @ mat2, self broadcast (a bias row, a column, a full
  // matrix, a 0-d number).
  for (const std::vector<int64_t>& self_shape :
       std::vector<std::vector<int64_t>>{{2}, {1, 2}, {3, 1}, {3, 2}, {}}) {
    SCOPED_TRACE(::testing::PrintToString(self_shape));
    const Tensor s = uniform(rng, self_shape);
    for (auto [beta, alpha] : std::vector<std::pair<double, double>>{{1, 1}, {0.5, 2}, {0, -1}}) {
      const Tensor expected = s.expand({3, 2}) * beta + ref_matmul(a, b) * alpha;
      EXPECT_ALL_CLOSE(addmm(s, a, b, beta, alpha), expected, 1e-12, 1e-12);
    }
    EXPECT_TRUE(grad_ok(
        [](const autograd::variable_list& in) -> autograd::variable_list {
          return {addmm(in[0], in[1], in[2], 0.5, 2.0)};
        },
        {leaf(s), leaf(a), leaf(b)}));
  }
  // beta == 0 ignores self's values, NaN included.
  const Tensor nan = full({3, 2}, std::nan(""), kFloat64);
  EXPECT_ALL_CLOSE(addmm(nan, a, b, 0, 1), ref_matmul(a, b), 1e-12, 1e-12);
  EXPECT_TRUE(grad_ok(
      [](const autograd::variable_list& in) -> autograd::variable_list {
        return {mm(in[0], in[1]), bmm(in[2], in[3])};
      },
      {leaf(a), leaf(b), leaf(x), leaf(y)}));
}

TEST(Linear, AnyLeadingDimsWithAndWithoutBias) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor w = uniform(rng, {5, 4}), bias = uniform(rng, {5});
  for (const std::vector<int64_t>& in_shape :
       std::vector<std::vector<int64_t>>{{4}, {3, 4}, {2, 3, 4}, {0, 4}}) {
    SCOPED_TRACE(::testing::PrintToString(in_shape));
    const Tensor x = uniform(rng, in_shape);
    const Tensor expected = ref_matmul(x, w.t());
    EXPECT_ALL_CLOSE(linear(x, w), expected, 1e-12, 1e-12);
    EXPECT_ALL_CLOSE(linear(x, w, bias), expected + bias, 1e-12, 1e-12);
    EXPECT_TRUE(grad_ok([](const autograd::variable_list& in)
                            -> autograd::variable_list { return {linear(in[0], in[1], in[2])}; },
                        {leaf(x), leaf(w), leaf(bias)}));
  }
  // A transposed input and an undefined bias tensor (None).
  const Tensor x = leaf(uniform(rng, {4, 3}));
  EXPECT_TRUE(grad_ok(
      [](const autograd::variable_list& in) -> autograd::variable_list {
        return {linear(in[0].t(), in[1], Tensor())};
      },
      {x, leaf(w)}));
  EXPECT_EQ(linear(x.t(), w, bias).grad_fn()->name(), "LinearBackward0");
}

TEST(Linear, ReducedPrecisionDtypes) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
    const Tensor x = uniform(rng, {6, 32}, dtype), w = uniform(rng, {8, 32}, dtype);
    const Tensor b = uniform(rng, {8}, dtype);
    const double tol = dtype == kFloat32 ? 1e-5 : 2e-2;
    const Tensor expected = ref_matmul(x.to(kFloat64), w.to(kFloat64).t()) + b.to(kFloat64);
    EXPECT_ALL_CLOSE(linear(x, w, b), expected, tol, tol) << scalar_type_name(dtype);
  }
}

TEST(Matmul, ErrorsNameBothShapesDevicesAndDtypes) {
  const Tensor a = zeros({2, 3}, kFloat64), b = zeros({4, 5}, kFloat64);
  EXPECT_THAT(error_of<ShapeError>([&] { mm(a, b); }),
              HasSubstr("mm: shapes [2, 3] and [4, 5] cannot be multiplied"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                matmul(zeros({2, 2, 3}), zeros({2, 4, 5}));
              }),
              HasSubstr("shapes [2, 2, 3] and [2, 4, 5] cannot be multiplied"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                matmul(zeros({2, 2, 3}), zeros({3, 3, 5}));
              }),
              HasSubstr("matmul: the batch dims [2] of self [2, 2, 3] and [3] of other [3, 3, 5] "
                        "do not broadcast"));
  EXPECT_THAT(error_of<ShapeError>([&] { matmul(zeros({}), zeros({3})); }),
              HasSubstr("both arguments to matmul need to be at least 1D, but they are 0D and 1D"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                mm(zeros({2, 3, 1}), zeros({1, 2}));
              }),
              HasSubstr("mm: expected self to be a 2-D tensor, but got a 3-D tensor"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                bmm(zeros({2, 3, 4}), zeros({3, 4, 5}));
              }),
              HasSubstr("bmm: expected mat2 of shape [2, 4, *] for self [2, 3, 4], but got "
                        "[3, 4, 5]"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                addmm(zeros({4}), zeros({2, 3}), zeros({3, 2}));
              }),
              HasSubstr("addmm: expected self to broadcast to [2, 2]"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                linear(zeros({2, 3}), zeros({4, 5}));
              }),
              HasSubstr("linear: input [2, 3] and weight [4, 5] cannot be multiplied"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                linear(zeros({2, 3}), zeros({4, 3}), zeros({5}));
              }),
              HasSubstr("expected bias [4]"));
  EXPECT_THAT(error_of<DTypeError>([&] {
                mm(zeros({2, 2}, kFloat32), zeros({2, 2}, kFloat64));
              }),
              HasSubstr("expected self and mat2 to have the same dtype, but got: Float32 != "
                        "Float64"));
  EXPECT_THAT(error_of<DTypeError>([&] {
                mm(zeros({2, 2}, kBool), zeros({2, 2}, kBool));
              }),
              HasSubstr("expected a floating or integer dtype"));
  EXPECT_THAT(error_of<DeviceError>([&] {
                mm(zeros({2, 2}), zeros({2, 2}, Device("sim:0")));
              }),
              HasSubstr("Expected all tensors to be on the same device, but found at least two "
                        "devices, cpu and sim:0!"));
}

}  // namespace
}  // namespace ferry::testing
