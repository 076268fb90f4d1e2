// The reduction operators (sum, mean, amax, argmax) and softmax / log_softmax: output dtype and
// shape as PyTorch decides them, then the device's reduce / softmax kernel.
#include <algorithm>
#include <string>

#include "ferry/core/views.h"
#include "ferry/device/compute_kernels.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"
#include "ferry/ops/op_registration.h"

namespace ferry {

std::vector<int64_t> reduction_dims(IntArrayRef dims, int64_t rank, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank, op);
    FERRY_CHECK_AS(IndexError, std::find(out.begin(), out.end(), w) == out.end(), op, ": dim ", w,
                   " appears multiple times in the list of dims ", dims);
    out.push_back(w);
  }
  // A 0-d tensor accepts dim 0 / -1 but has no dims to reduce.
  if (rank == 0) out.clear();
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Reduces `self` over `dims` into a new tensor of `dtype`, keeping the dims or not.
Tensor reduce_into(const Tensor& input, const std::vector<int64_t>& dims, bool keepdim,
                   ScalarType dtype, ReduceKind kind) {
  // Kernels read stored values: a lazily negated view (_neg_view) is materialized first.
  const Tensor self = input.is_neg() ? input.resolve_neg() : input;
  DimVector kept(self.sizes());
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  Tensor out = empty(kept, TensorOptions(dtype).device(self.device()));
  if (out.numel() > 0) reduce_stub(self.device().type(), out, self, dims, kind);
  if (keepdim) return out;
  DimVector squeezed;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!std::binary_search(dims.begin(), dims.end(), d)) squeezed.push_back(self.size(d));
  }
  return native::view(out, squeezed);
}

ScalarType sum_dtype(const Tensor& self, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return is_integral(self.dtype(), /*include_bool=*/true) ? kInt64 : self.dtype();
}

void check_reducible(const Tensor& self, const char* op) {
  FERRY_CHECK_AS(DTypeError, !is_complex(self.dtype()), op, ": expected a real dtype, but got ",
                 self.dtype());
}

Tensor sum_kernel(const Tensor& self, std::optional<ScalarType> dtype) {
  check_reducible(self, "sum");
  return reduce_into(self, reduction_dims({}, self.dim(), "sum"), false, sum_dtype(self, dtype),
                     ReduceKind::Sum);
}

Tensor sum_dim_kernel(const Tensor& self, IntArrayRef dims, bool keepdim,
                      std::optional<ScalarType> dtype) {
  check_reducible(self, "sum");
  return reduce_into(self, reduction_dims(dims, self.dim(), "sum"), keepdim, sum_dtype(self, dtype),
                     ReduceKind::Sum);
}

ScalarType mean_dtype(const Tensor& self, std::optional<ScalarType> dtype) {
  const ScalarType t = dtype.value_or(self.dtype());
  FERRY_CHECK_AS(DTypeError, is_floating_point(t),
                 "mean(): could not infer output dtype. Input dtype must be either a floating "
                 "point or complex dtype. Got: ",
                 t);
  return t;
}

Tensor mean_kernel(const Tensor& self, std::optional<ScalarType> dtype) {
  return reduce_into(self, reduction_dims({}, self.dim(), "mean"), false, mean_dtype(self, dtype),
                     ReduceKind::Mean);
}

Tensor mean_dim_kernel(const Tensor& self, IntArrayRef dims, bool keepdim,
                       std::optional<ScalarType> dtype) {
  return reduce_into(self, reduction_dims(dims, self.dim(), "mean"), keepdim,
                     mean_dtype(self, dtype), ReduceKind::Mean);
}

Tensor amax_kernel(const Tensor& self, IntArrayRef dims, bool keepdim) {
  check_reducible(self, "amax");
  const std::vector<int64_t> d = reduction_dims(dims, self.dim(), "amax");
  for (int64_t i : d) {
    FERRY_CHECK_AS(IndexError, self.size(i) > 0, "amax(): Expected reduction dim ", i,
                   " to have non-zero size.");
  }
  return reduce_into(self, d, keepdim, self.dtype(), ReduceKind::Amax);
}

Tensor argmax_kernel(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  check_reducible(self, "argmax");
  if (!dim) {
    FERRY_CHECK_AS(IndexError, self.numel() > 0,
                   "argmax(): Expected reduction dim to be specified for input.numel() == 0.");
    return reduce_into(native::view(self.contiguous(), {self.numel()}), {0}, false, kInt64,
                       ReduceKind::Argmax);
  }
  const int64_t d = wrap_dim(*dim, self.dim(), "argmax dim");
  if (self.dim() == 0) return zeros({}, TensorOptions(kInt64).device(self.device()));
  FERRY_CHECK_AS(IndexError, self.size(d) > 0, "argmax(): Expected reduction dim ", d,
                 " to have non-zero size.");
  return reduce_into(self, {d}, keepdim, kInt64, ReduceKind::Argmax);
}

Tensor softmax_impl(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  const Tensor input = dtype && *dtype != self.dtype() ? self.to(*dtype) : self;
  FERRY_CHECK_AS(DTypeError, is_floating_point(input.dtype()), op,
                 ": expected a floating dtype, but got ", input.dtype());
  const int64_t d = wrap_dim(dim, input.dim(), op);
  Tensor out = empty_like(input);
  if (out.numel() > 0) {
    if (input.dim() == 0) {
      out.fill_(log ? 0 : 1);
    } else {
      softmax_forward_stub(input.device().type(), out, input, d, log);
    }
  }
  return out;
}

Tensor softmax_kernel(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl(self, dim, dtype, false);
}
Tensor log_softmax_kernel(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl(self, dim, dtype, true);
}

Tensor softmax_backward_impl(const Tensor& grad, const Tensor& output, int64_t dim, bool log) {
  FERRY_CHECK_AS(ShapeError, grad.sizes().equals(output.sizes()),
                 log ? "log_softmax_backward" : "softmax_backward",
                 ": expected grad_output and output of one shape, but got ", grad.sizes(), " and ",
                 output.sizes());
  const Tensor g = grad.dtype() == output.dtype() ? grad : grad.to(output.dtype());
  Tensor grad_input = empty_like(output);
  if (grad_input.numel() == 0) return grad_input;
  if (output.dim() == 0) return grad_input.zero_();
  softmax_backward_stub(output.device().type(), grad_input, g, output,
                        wrap_dim(dim, output.dim(), "softmax dim"), log);
  return grad_input;
}

Tensor softmax_backward_kernel(const Tensor& grad, const Tensor& output, int64_t dim) {
  return softmax_backward_impl(grad, output, dim, false);
}
Tensor log_softmax_backward_kernel(const Tensor& grad, const Tensor& output, int64_t dim) {
  return softmax_backward_impl(grad, output, dim, true);
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor");
  m.def(
      "sum.dim_IntList(Tensor self, int[] dim, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor");
  m.def("mean(Tensor self, *, ScalarType? dtype=None) -> Tensor");
  m.def(
      "mean.dim(Tensor self, int[] dim, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor");
  m.def("amax(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor");
  m.def("argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor");
  m.def("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor");
  m.def("log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor");
  m.def("_softmax_backward_data(Tensor grad_output, Tensor output, int dim) -> Tensor");
  m.def("_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim) -> Tensor");
  impl_backends(m, "sum", &sum_kernel, "sum");
  impl_backends(m, "sum.dim_IntList", &sum_dim_kernel, "sum");
  impl_backends(m, "mean", &mean_kernel, "mean");
  impl_backends(m, "mean.dim", &mean_dim_kernel, "mean");
  impl_backends(m, "amax", &amax_kernel, "amax");
  impl_backends(m, "argmax", &argmax_kernel, "argmax");
  impl_backends(m, "softmax.int", &softmax_kernel, "softmax");
  impl_backends(m, "log_softmax.int", &log_softmax_kernel, "log_softmax");
  impl_backends(m, "_softmax_backward_data", &softmax_backward_kernel, "softmax_backward");
  impl_backends(m, "_log_softmax_backward_data", &log_softmax_backward_kernel,
                "log_softmax_backward");
}

using DT = std::optional<ScalarType>;

Tensor sum(const Tensor& self, DT dtype) {
  return FERRY_OP("ferry::sum", Tensor(const Tensor&, DT)).call(self, dtype);
}
Tensor sum(const Tensor& self, IntArrayRef dims, bool keepdim, DT dtype) {
  return FERRY_OP("ferry::sum.dim_IntList", Tensor(const Tensor&, IntArrayRef, bool, DT))
      .call(self, dims, keepdim, dtype);
}
Tensor mean(const Tensor& self, DT dtype) {
  return FERRY_OP("ferry::mean", Tensor(const Tensor&, DT)).call(self, dtype);
}
Tensor mean(const Tensor& self, IntArrayRef dims, bool keepdim, DT dtype) {
  return FERRY_OP("ferry::mean.dim", Tensor(const Tensor&, IntArrayRef, bool, DT))
      .call(self, dims, keepdim, dtype);
}
Tensor amax(const Tensor& self, IntArrayRef dims, bool keepdim) {
  return FERRY_OP("ferry::amax", Tensor(const Tensor&, IntArrayRef, bool))
      .call(self, dims, keepdim);
}
Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return FERRY_OP("ferry::argmax", Tensor(const Tensor&, std::optional<int64_t>, bool))
      .call(self, dim, keepdim);
}
Tensor softmax(const Tensor& self, int64_t dim, DT dtype) {
  return FERRY_OP("ferry::softmax.int", Tensor(const Tensor&, int64_t, DT)).call(self, dim, dtype);
}
Tensor log_softmax(const Tensor& self, int64_t dim, DT dtype) {
  return FERRY_OP("ferry::log_softmax.int", Tensor(const Tensor&, int64_t, DT))
      .call(self, dim, dtype);
}
Tensor softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim) {
  return FERRY_OP("ferry::_softmax_backward_data", Tensor(const Tensor&, const Tensor&, int64_t))
      .call(grad, output, dim);
}
Tensor log_softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim) {
  return FERRY_OP("ferry::_log_softmax_backward_data",
                  Tensor(const Tensor&, const Tensor&, int64_t))
      .call(grad, output, dim);
}

Tensor Tensor::sum(DT dtype) const { return ferry::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim, DT dtype) const {
  return ferry::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean(DT dtype) const { return ferry::mean(*this, dtype); }
Tensor Tensor::mean(IntArrayRef dims, bool keepdim, DT dtype) const {
  return ferry::mean(*this, dims, keepdim, dtype);
}
Tensor Tensor::amax(IntArrayRef dims, bool keepdim) const {
  return ferry::amax(*this, dims, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return ferry::argmax(*this, dim, keepdim);
}
Tensor Tensor::softmax(int64_t dim, DT dtype) const { return ferry::softmax(*this, dim, dtype); }
Tensor Tensor::log_softmax(int64_t dim, DT dtype) const {
  return ferry::log_softmax(*this, dim, dtype);
}

}  // namespace ferry
