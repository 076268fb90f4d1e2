// The view operators: Tensor's view methods dispatch to them, so that autograd records a node
// for a view of a tensor that requires grad (ferry/autograd/formulas/view_formulas.cc); every
// backend key runs the same metadata arithmetic (ferry/core/views.h). reshape, t, narrow and
// flatten are composites of these, as in PyTorch.
#include <algorithm>
#include <utility>
#include <vector>

#include "ferry/core/size_math.h"
#include "ferry/core/views.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/op_registration.h"
#include "ferry/ops/view_ops.h"

namespace ferry {
namespace {

Tensor as_strided_kernel(const Tensor& self, IntArrayRef sizes, IntArrayRef strides,
                         std::optional<int64_t> offset) {
  return native::as_strided(self, sizes, strides, offset);
}
Tensor slice_kernel(const Tensor& self, int64_t dim, std::optional<int64_t> start,
                    std::optional<int64_t> end, int64_t step) {
  return native::slice(self, dim, start, end, step);
}
Tensor squeeze_all_kernel(const Tensor& self) { return native::squeeze(self); }

// A backend's view kernel: Fn's view, marked a view of self's base (Note [In-place on views] in
// ferry/autograd/variable.cc), whether or not anything requires grad.
template <auto Fn>
struct MarkedView;
template <typename... Args, Tensor (*Fn)(const Tensor&, Args...)>
struct MarkedView<Fn> {
  static Tensor call(const Tensor& self, Args... args) {
    Tensor out = Fn(self, args...);
    out.impl()->mark_view(*self.impl());
    return out;
  }
};

// The view operators' backwards: zeros of the input's shape with the gradient written where the
// view's elements were.
Tensor slice_backward_kernel(const Tensor& grad, IntArrayRef input_sizes, int64_t dim,
                             int64_t start, int64_t end, int64_t step) {
  Tensor out = zeros(input_sizes, grad.options());
  native::slice(out, dim, start, end, step).copy_(grad);
  return out;
}
Tensor select_backward_kernel(const Tensor& grad, IntArrayRef input_sizes, int64_t dim,
                              int64_t index) {
  Tensor out = zeros(input_sizes, grad.options());
  native::select(out, dim, index).copy_(grad);
  return out;
}
// Whether two elements of (sizes, strides) may share memory: false when, taking the dims in
// increasing stride order, each stride steps past everything the smaller ones reach.
bool may_overlap(IntArrayRef sizes, IntArrayRef strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return false;
    if (sizes[d] > 1) dims.emplace_back(strides[d], sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the largest offset the dims so far reach
  for (auto [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

// For an input laid out densely with `input_strides`: the gradient scattered through the same
// as_strided view of a zero buffer with that layout. A view whose elements overlap would need
// sums, and is refused.
Tensor as_strided_backward_kernel(const Tensor& grad, IntArrayRef input_sizes,
                                  IntArrayRef input_strides, int64_t input_offset,
                                  IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  FERRY_CHECK_AS(NotImplementedError, compute_non_overlapping_and_dense(input_sizes, input_strides),
                 "as_strided backward: expected an input whose elements are dense and do not "
                 "overlap (sizes ",
                 input_sizes, ", strides ", input_strides, ")");
  FERRY_CHECK_AS(NotImplementedError, !may_overlap(sizes, strides),
                 "as_strided backward: expected a view whose elements do not overlap, but got "
                 "sizes ",
                 sizes, " and strides ", strides);
  FERRY_CHECK_AS(IndexError, offset >= input_offset,
                 "as_strided backward: expected the view to start inside its input");
  Tensor out = empty_strided(input_sizes, input_strides, grad.options()).zero_();
  native::as_strided(out, sizes, strides, offset - input_offset).copy_(grad);
  return out;
}
Tensor squeeze_dim_kernel(const Tensor& self, int64_t dim) { return native::squeeze(self, dim); }

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def("alias(Tensor(a) self) -> Tensor(a)");
  m.def(
      "as_strided(Tensor(a) self, int[] size, int[] stride, int? storage_offset=None) -> "
      "Tensor(a)");
  m.def("view(Tensor(a) self, int[] size) -> Tensor(a)");
  m.def("permute(Tensor(a) self, int[] dims) -> Tensor(a)");
  m.def("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)");
  m.def(
      "slice.Tensor(Tensor(a) self, int dim=0, int? start=None, int? end=None, int step=1) -> "
      "Tensor(a)");
  m.def("select.int(Tensor(a) self, int dim, int index) -> Tensor(a)");
  m.def("expand(Tensor(a) self, int[] size) -> Tensor(a)");
  m.def("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)");
  m.def("squeeze(Tensor(a) self) -> Tensor(a)");
  m.def("squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)");
  impl_backends(m, "alias", &MarkedView<&native::alias>::call, "native::alias");
  impl_backends(m, "as_strided", &MarkedView<&as_strided_kernel>::call, "native::as_strided");
  impl_backends(m, "view", &MarkedView<&native::view>::call, "native::view");
  impl_backends(m, "permute", &MarkedView<&native::permute>::call, "native::permute");
  impl_backends(m, "transpose.int", &MarkedView<&native::transpose>::call, "native::transpose");
  impl_backends(m, "slice.Tensor", &MarkedView<&slice_kernel>::call, "native::slice");
  impl_backends(m, "select.int", &MarkedView<&native::select>::call, "native::select");
  impl_backends(m, "expand", &MarkedView<&native::expand>::call, "native::expand");
  impl_backends(m, "unsqueeze", &MarkedView<&native::unsqueeze>::call, "native::unsqueeze");
  impl_backends(m, "squeeze", &MarkedView<&squeeze_all_kernel>::call, "native::squeeze");
  impl_backends(m, "squeeze.dim", &MarkedView<&squeeze_dim_kernel>::call, "native::squeeze");
  m.def(
      "slice_backward(Tensor grad_output, int[] input_sizes, int dim, int start, int end, "
      "int step) -> Tensor");
  m.def("select_backward(Tensor grad_output, int[] input_sizes, int dim, int index) -> Tensor");
  m.def(
      "as_strided_backward(Tensor grad_output, int[] input_sizes, int[] input_strides, "
      "int input_offset, int[] size, int[] stride, int storage_offset) -> Tensor");
  impl_backends(m, "slice_backward", &slice_backward_kernel, "slice_backward");
  impl_backends(m, "select_backward", &select_backward_kernel, "select_backward");
  impl_backends(m, "as_strided_backward", &as_strided_backward_kernel, "as_strided_backward");
}

Tensor slice_backward(const Tensor& grad, IntArrayRef input_sizes, int64_t dim, int64_t start,
                      int64_t end, int64_t step) {
  return FERRY_OP("ferry::slice_backward",
                  Tensor(const Tensor&, IntArrayRef, int64_t, int64_t, int64_t, int64_t))
      .call(grad, input_sizes, dim, start, end, step);
}
Tensor select_backward(const Tensor& grad, IntArrayRef input_sizes, int64_t dim, int64_t index) {
  return FERRY_OP("ferry::select_backward", Tensor(const Tensor&, IntArrayRef, int64_t, int64_t))
      .call(grad, input_sizes, dim, index);
}
Tensor as_strided_backward(const Tensor& grad, IntArrayRef input_sizes, IntArrayRef input_strides,
                           int64_t input_offset, IntArrayRef sizes, IntArrayRef strides,
                           int64_t offset) {
  return FERRY_OP("ferry::as_strided_backward", Tensor(const Tensor&, IntArrayRef, IntArrayRef,
                                                       int64_t, IntArrayRef, IntArrayRef, int64_t))
      .call(grad, input_sizes, input_strides, input_offset, sizes, strides, offset);
}

Tensor Tensor::alias() const { return FERRY_OP("ferry::alias", Tensor(const Tensor&)).call(*this); }

Tensor Tensor::as_strided(IntArrayRef sizes, IntArrayRef strides,
                          std::optional<int64_t> storage_offset) const {
  return FERRY_OP("ferry::as_strided",
                  Tensor(const Tensor&, IntArrayRef, IntArrayRef, std::optional<int64_t>))
      .call(*this, sizes, strides, storage_offset);
}

Tensor Tensor::view(IntArrayRef sizes) const {
  return FERRY_OP("ferry::view", Tensor(const Tensor&, IntArrayRef)).call(*this, sizes);
}

Tensor Tensor::permute(IntArrayRef dims) const {
  return FERRY_OP("ferry::permute", Tensor(const Tensor&, IntArrayRef)).call(*this, dims);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  return FERRY_OP("ferry::transpose.int", Tensor(const Tensor&, int64_t, int64_t))
      .call(*this, dim0, dim1);
}

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  return FERRY_OP("ferry::slice.Tensor", Tensor(const Tensor&, int64_t, std::optional<int64_t>,
                                                std::optional<int64_t>, int64_t))
      .call(*this, dim, start, end, step);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  return FERRY_OP("ferry::select.int", Tensor(const Tensor&, int64_t, int64_t))
      .call(*this, dim, index);
}

Tensor Tensor::expand(IntArrayRef sizes) const {
  return FERRY_OP("ferry::expand", Tensor(const Tensor&, IntArrayRef)).call(*this, sizes);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  return FERRY_OP("ferry::unsqueeze", Tensor(const Tensor&, int64_t)).call(*this, dim);
}

Tensor Tensor::squeeze() const {
  return FERRY_OP("ferry::squeeze", Tensor(const Tensor&)).call(*this);
}

Tensor Tensor::squeeze(int64_t dim) const {
  return FERRY_OP("ferry::squeeze.dim", Tensor(const Tensor&, int64_t)).call(*this, dim);
}

// ---- composites -----------------------------------------------------------------------------

Tensor Tensor::reshape(IntArrayRef sizes) const {
  const DimVector new_sizes = native::infer_sizes(sizes, numel(), "reshape");
  if (native::compute_view_strides(this->sizes(), strides(), new_sizes)) return view(new_sizes);
  return clone(MemoryFormat::Contiguous).view(new_sizes);
}

Tensor Tensor::t() const {
  FERRY_CHECK_AS(ShapeError, dim() <= 2, "t: expected a tensor with at most 2 dimensions, but got ",
                 dim(), " dimensions");
  return dim() < 2 ? alias() : transpose(0, 1);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  FERRY_CHECK_AS(ShapeError, this->dim() > 0,
                 "narrow: expected a tensor with at least 1 dimension, but got a 0-d tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "narrow dim");
  const int64_t size = sizes()[d];
  FERRY_CHECK_AS(IndexError, start >= -size && start <= size,
                 "narrow: start: expected a value in [", -size, ", ", size, "], but got ", start);
  const int64_t s = start < 0 ? start + size : start;
  FERRY_CHECK_AS(IndexError, length >= 0 && s + length <= size,
                 "narrow: length: expected a value in [0, ", size - s, "] for start ", start,
                 " in a dimension of size ", size, ", but got ", length);
  return slice(d, s, s + length, 1);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim(), "flatten start_dim");
  const int64_t e = wrap_dim(end_dim, dim(), "flatten end_dim");
  FERRY_CHECK_AS(IndexError, s <= e, "flatten: expected start_dim <= end_dim, but got start_dim ",
                 start_dim, " and end_dim ", end_dim);
  if (s == e) return alias();
  DimVector new_sizes;
  for (int64_t i = 0; i < s; ++i) new_sizes.push_back(sizes()[i]);
  new_sizes.push_back(checked_numel(sizes().slice(s, e - s + 1), "flatten"));
  for (int64_t i = e + 1; i < dim(); ++i) new_sizes.push_back(sizes()[i]);
  return reshape(new_sizes);
}

}  // namespace ferry
