// The linear-algebra operators (see linalg.h): PyTorch's shape rules, then one gemm_stub call on
// 3-d views of the operands. Batch dims are merged into one by a view whenever the strides allow
// it (a broadcast batch becomes a stride-0 batch), and copied into a dense tensor only when they
// do not; matmul of an N-d tensor with a matrix or vector folds the batch into the rows (one
// large GEMM rather than many small ones), as PyTorch does.
#include <algorithm>
#include <string>

#include "ferry/core/views.h"
#include "ferry/device/compute_kernels.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/linalg.h"
#include "ferry/ops/op_checks.h"
#include "ferry/ops/op_registration.h"

namespace ferry {
namespace {

using op_checks::check_same_device;
using op_checks::check_same_dtype;

void check_gemm_dtype(const char* op, const Tensor& t) {
  const ScalarType d = t.dtype();
  FERRY_CHECK_AS(DTypeError,
                 d != kBool && !is_complex(d) && d != kFloat8_e4m3fn && d != kFloat8_e5m2, op,
                 ": expected a floating or integer dtype other than float8, but got ", d);
}

void check_operands(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                    const Tensor& b) {
  check_same_device(op, {&a, &b});
  check_same_dtype(op, name_a, a, name_b, b);
  check_gemm_dtype(op, a);
}

void check_rank(const char* op, const char* name, const Tensor& t, int64_t rank) {
  FERRY_CHECK_AS(ShapeError, t.dim() == rank, op, ": expected ", name, " to be a ", rank,
                 "-D tensor, but got a ", t.dim(), "-D tensor of shape ", t.sizes());
}

// t (sizes batch... + [R, C]) as [batch, R, C]: a view when the batch dims merge (stride-0
// broadcast batches merge into a stride-0 batch), else a dense copy.
Tensor as_batch3(const Tensor& t, int64_t batch) {
  const DimVector sizes{batch, t.size(-2), t.size(-1)};
  if (auto strides = native::compute_view_strides(t.sizes(), t.strides(), sizes)) {
    return native::as_strided(t, sizes, *strides);
  }
  return native::view(t.contiguous(), sizes);
}

// out3 = alpha * a3 @ b3 + beta * out3 + bias on out3's device (nothing to do when empty).
void run_gemm(const Tensor& out3, const Tensor& a3, const Tensor& b3, double alpha = 1,
              double beta = 0, const Tensor& bias = Tensor()) {
  if (out3.numel() == 0) return;
  gemm_stub(out3.device().type(), out3, a3, b3, alpha, beta, bias);
}

void check_multipliable(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  FERRY_CHECK_AS(ShapeError, ka == kb, op, ": shapes ", a.sizes(), " and ", b.sizes(),
                 " cannot be multiplied (", ka, " columns against ", kb, " rows)");
}

// t as a matrix [product of the leading sizes, last size] (a view when the strides allow).
Tensor as_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return t.reshape({rows, t.dim() == 0 ? 1 : t.size(-1)});
}

// Whether `shape` broadcasts to `desired` without changing it.
bool expands_to(IntArrayRef shape, IntArrayRef desired) {
  if (shape.size() > desired.size()) return false;
  const size_t lead = desired.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && shape[i] != desired[lead + i]) return false;
  }
  return true;
}

Tensor mm_impl(const Tensor& a, const Tensor& b) {
  Tensor out = empty({a.size(0), b.size(1)}, a.options());
  run_gemm(native::unsqueeze(out, 0), native::unsqueeze(a, 0), native::unsqueeze(b, 0));
  return out;
}

Tensor mm_kernel(const Tensor& a, const Tensor& b) {
  check_rank("mm", "self", a, 2);
  check_rank("mm", "mat2", b, 2);
  check_operands("mm", "self", a, "mat2", b);
  check_multipliable("mm", a, b, a.size(1), b.size(0));
  return mm_impl(a, b);
}

Tensor bmm_kernel(const Tensor& a, const Tensor& b) {
  check_rank("bmm", "self", a, 3);
  check_rank("bmm", "mat2", b, 3);
  check_operands("bmm", "self", a, "mat2", b);
  FERRY_CHECK_AS(ShapeError, a.size(0) == b.size(0) && a.size(2) == b.size(1),
                 "bmm: expected mat2 of shape [", a.size(0), ", ", a.size(2), ", *] for self ",
                 a.sizes(), ", but got ", b.sizes());
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, a.options());
  run_gemm(out, a, b);
  return out;
}

Tensor addmm_kernel(const Tensor& self, const Tensor& m1, const Tensor& m2, const Scalar& beta,
                    const Scalar& alpha) {
  check_rank("addmm", "mat1", m1, 2);
  check_rank("addmm", "mat2", m2, 2);
  check_operands("addmm", "mat1", m1, "mat2", m2);
  check_same_device("addmm", {&m1, &self});
  check_same_dtype("addmm", "self", self, "mat1", m1);
  check_multipliable("addmm", m1, m2, m1.size(1), m2.size(0));
  const int64_t m = m1.size(0), n = m2.size(1);
  const DimVector out_sizes{m, n};
  FERRY_CHECK_AS(ShapeError, expands_to(self.sizes(), out_sizes),
                 "addmm: expected self to broadcast to [", m, ", ", n, "] (mat1 ", m1.sizes(),
                 " @ mat2 ", m2.sizes(), "), but got ", self.sizes());
  Tensor out = empty(out_sizes, m1.options());
  double b = beta.to<double>();
  Tensor bias;
  if (b != 0) {
    // A row vector added once is oneDNN's bias; anything else is copied into out and scaled.
    const bool row =
        (self.dim() == 1 || (self.dim() == 2 && self.size(0) == 1)) && self.size(-1) == n;
    if (b == 1 && row) {
      bias = self.dim() == 1 ? self : native::select(self, 0, 0);
      b = 0;
    } else if (out.numel() > 0) {
      out.copy_(native::expand(self, out_sizes));
    }
  }
  run_gemm(native::unsqueeze(out, 0), native::unsqueeze(m1, 0), native::unsqueeze(m2, 0),
           alpha.to<double>(), b, bias);
  return out;
}

Tensor linear_kernel(const Tensor& input, const Tensor& weight,
                     const std::optional<Tensor>& bias_opt) {
  const Tensor& bias = op_checks::value_or_undefined(bias_opt);
  check_rank("linear", "weight ([out_features, in_features])", weight, 2);
  FERRY_CHECK_AS(ShapeError, input.dim() >= 1,
                 "linear: expected input of at least 1 dimension, but got a 0-D tensor");
  check_operands("linear", "input", input, "weight", weight);
  const int64_t k = input.size(-1), n = weight.size(0);
  FERRY_CHECK_AS(ShapeError, weight.size(1) == k, "linear: input ", input.sizes(), " and weight ",
                 weight.sizes(), " cannot be multiplied (expected weight [out_features, ", k, "])");
  if (bias.defined()) {
    check_same_device("linear", {&input, &bias});
    check_same_dtype("linear", "input", input, "bias", bias);
    FERRY_CHECK_AS(ShapeError, bias.dim() == 1 && bias.size(0) == n, "linear: expected bias [", n,
                   "] for weight ", weight.sizes(), ", but got ", bias.sizes());
  }
  const Tensor in2 = input.dim() == 2 ? input : as_rows(input);
  Tensor out2 = empty({in2.size(0), n}, input.options());
  run_gemm(native::unsqueeze(out2, 0), native::unsqueeze(in2, 0),
           native::unsqueeze(native::transpose(weight, 0, 1), 0), 1, 0, bias);
  DimVector out_sizes(input.sizes().slice(0, input.dim() - 1));
  out_sizes.push_back(n);
  return native::view(out2, out_sizes);
}

Tensor matmul_kernel(const Tensor& a, const Tensor& b) {
  FERRY_CHECK_AS(ShapeError, a.dim() >= 1 && b.dim() >= 1,
                 "matmul: both arguments to matmul need to be at least 1D, but they are ", a.dim(),
                 "D and ", b.dim(), "D");
  check_operands("matmul", "self", a, "other", b);
  const int64_t da = a.dim(), db = b.dim();
  const int64_t k = a.size(-1);
  check_multipliable("matmul", a, b, k, db == 1 ? b.size(0) : b.size(-2));
  if (da == 2 && db == 2) return mm_impl(a, b);
  const int64_t m = da == 1 ? 1 : a.size(-2);
  const int64_t n = db == 1 ? 1 : b.size(-1);
  const Tensor b2 = db == 1 ? native::unsqueeze(b, 1) : b;  // [K, 1] for a vector

  if (da >= 3 && db <= 2) {
    // Fold a's batch into its rows: one [batch * M, K] x [K, N] GEMM.
    const Tensor a2 = as_rows(a);
    Tensor out2 = empty({a2.size(0), n}, a.options());
    run_gemm(native::unsqueeze(out2, 0), native::unsqueeze(a2, 0), native::unsqueeze(b2, 0));
    DimVector sizes(a.sizes().slice(0, da - 1));
    if (db == 2) sizes.push_back(n);
    return native::view(out2, sizes);
  }

  const IntArrayRef batch_a = a.sizes().slice(0, da > 2 ? da - 2 : 0);
  const IntArrayRef batch_b = b.sizes().slice(0, db > 2 ? db - 2 : 0);
  bool broadcastable = true;
  for (size_t i = 1; i <= std::min(batch_a.size(), batch_b.size()); ++i) {
    const int64_t x = batch_a[batch_a.size() - i], y = batch_b[batch_b.size() - i];
    broadcastable = broadcastable && (x == y || x == 1 || y == 1);
  }
  FERRY_CHECK_AS(ShapeError, broadcastable, "matmul: the batch dims ", batch_a, " of self ",
                 a.sizes(), " and ", batch_b, " of other ", b.sizes(), " do not broadcast");
  const DimVector batch = broadcast_shapes(batch_a, batch_b);
  int64_t batches = 1;
  for (int64_t s : batch) batches *= s;
  auto with = [&](int64_t r, int64_t c) {
    DimVector s = batch;
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  const Tensor a2 = da == 1 ? native::unsqueeze(a, 0) : a;  // [1, K] for a vector
  const Tensor a3 = as_batch3(native::expand(a2, with(m, k)), batches);
  const Tensor b3 = as_batch3(native::expand(b2, with(k, n)), batches);
  Tensor out3 = empty({batches, m, n}, a.options());
  run_gemm(out3, a3, b3);
  DimVector sizes = batch;
  if (da > 1) sizes.push_back(m);
  if (db > 1) sizes.push_back(n);
  return native::view(out3, sizes);
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def("matmul(Tensor self, Tensor other) -> Tensor");
  m.def("mm(Tensor self, Tensor mat2) -> Tensor");
  m.def("bmm(Tensor self, Tensor mat2) -> Tensor");
  m.def("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
  impl_backends(m, "matmul", &matmul_kernel, "matmul");
  impl_backends(m, "mm", &mm_kernel, "mm");
  impl_backends(m, "bmm", &bmm_kernel, "bmm");
  impl_backends(m, "addmm", &addmm_kernel, "addmm");
  impl_backends(m, "linear", &linear_kernel, "linear");
}

using TT = Tensor(const Tensor&, const Tensor&);

Tensor matmul(const Tensor& self, const Tensor& other) {
  return FERRY_OP("ferry::matmul", TT).call(self, other);
}
Tensor mm(const Tensor& self, const Tensor& mat2) {
  return FERRY_OP("ferry::mm", TT).call(self, mat2);
}
Tensor bmm(const Tensor& self, const Tensor& mat2) {
  return FERRY_OP("ferry::bmm", TT).call(self, mat2);
}
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  return FERRY_OP("ferry::addmm",
                  Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&))
      .call(self, mat1, mat2, beta, alpha);
}
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  // An undefined bias tensor means none, as in PyTorch.
  const std::optional<Tensor> b = bias && bias->defined() ? bias : std::nullopt;
  return FERRY_OP("ferry::linear",
                  Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&))
      .call(input, weight, b);
}

Tensor Tensor::matmul(const Tensor& other) const { return ferry::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return ferry::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return ferry::bmm(*this, other); }

}  // namespace ferry
