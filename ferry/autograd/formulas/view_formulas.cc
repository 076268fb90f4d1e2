// Backward formulas of the view operators. (Every view knows its base from its backend kernel,
// recorded or not: Note [In-place on views] in variable.cc.)
#include <algorithm>
#include <vector>

#include "ferry/autograd/record.h"
#include "ferry/ops/view_ops.h"

namespace ferry::autograd {
namespace {

using Grads = const variable_list&;

// Runs the view below autograd and, when recording, gives it `formula` and marks it a view.
template <typename View>
Tensor record_view(const char* name, const Tensor& self, View view, FormulaNode::Formula formula) {
  Recorder rec(name, {&self});
  Tensor out = below_autograd(view);
  if (rec) rec.record(out, std::move(formula));
  return out;
}

Tensor alias_autograd(const Tensor& self) {
  return record_view(
      "AliasBackward0", self, [&] { return self.alias(); },
      [](FormulaNode&, Grads g) -> variable_list { return {g[0]}; });
}

Tensor view_autograd(const Tensor& self, IntArrayRef sizes) {
  const DimVector input_sizes(self.sizes());
  return record_view(
      "ViewBackward0", self, [&] { return self.view(sizes); },
      [input_sizes](FormulaNode&, Grads g) -> variable_list {
        return {g[0].reshape(input_sizes)};
      });
}

Tensor permute_autograd(const Tensor& self, IntArrayRef dims) {
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    inverse[static_cast<size_t>(wrap_dim(dims[i], self.dim(), "permute dim"))] =
        static_cast<int64_t>(i);
  }
  return record_view(
      "PermuteBackward0", self, [&] { return self.permute(dims); },
      [inverse](FormulaNode&, Grads g) -> variable_list { return {g[0].permute(inverse)}; });
}

Tensor transpose_autograd(const Tensor& self, int64_t dim0, int64_t dim1) {
  return record_view(
      "TransposeBackward0", self, [&] { return self.transpose(dim0, dim1); },
      [dim0, dim1](FormulaNode&, Grads g) -> variable_list {
        return {g[0].transpose(dim0, dim1)};
      });
}

Tensor slice_autograd(const Tensor& self, int64_t dim, std::optional<int64_t> start,
                      std::optional<int64_t> end, int64_t step) {
  const auto view = [&] { return self.slice(dim, start, end, step); };
  if (!compute_requires_grad({&self})) return below_autograd(view);
  // The bounds as the view resolved them (negative and out-of-range values clamped).
  const int64_t d = wrap_dim(dim, self.dim(), "slice dim");
  const int64_t size = self.size(d);
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t lo = start ? clamp(*start) : 0;
  const int64_t hi = std::max(lo, end ? clamp(*end) : size);
  const DimVector input_sizes(self.sizes());
  return record_view("SliceBackward0", self, view,
                     [input_sizes, d, lo, hi, step](FormulaNode&, Grads g) -> variable_list {
                       return {slice_backward(g[0], input_sizes, d, lo, hi, step)};
                     });
}

Tensor select_autograd(const Tensor& self, int64_t dim, int64_t index) {
  const auto view = [&] { return self.select(dim, index); };
  if (!compute_requires_grad({&self})) return below_autograd(view);
  const int64_t d = wrap_dim(dim, self.dim(), "select dim");
  const int64_t i = index < 0 ? index + self.size(d) : index;
  const DimVector input_sizes(self.sizes());
  return record_view("SelectBackward0", self, view,
                     [input_sizes, d, i](FormulaNode&, Grads g) -> variable_list {
                       return {select_backward(g[0], input_sizes, d, i)};
                     });
}

Tensor expand_autograd(const Tensor& self, IntArrayRef sizes) {
  // The engine sums the gradient back to the input's shape.
  return record_view(
      "ExpandBackward0", self, [&] { return self.expand(sizes); },
      [](FormulaNode&, Grads g) -> variable_list { return {g[0]}; });
}

Tensor unsqueeze_autograd(const Tensor& self, int64_t dim) {
  const int64_t d = dim < 0 ? dim + self.dim() + 1 : dim;
  return record_view(
      "UnsqueezeBackward0", self, [&] { return self.unsqueeze(dim); },
      [d](FormulaNode&, Grads g) -> variable_list { return {g[0].squeeze(d)}; });
}

Tensor squeeze_autograd(const Tensor& self) {
  const DimVector input_sizes(self.sizes());
  return record_view(
      "SqueezeBackward0", self, [&] { return self.squeeze(); },
      [input_sizes](FormulaNode&, Grads g) -> variable_list {
        return {g[0].reshape(input_sizes)};
      });
}

Tensor squeeze_dim_autograd(const Tensor& self, int64_t dim) {
  const DimVector input_sizes(self.sizes());
  return record_view(
      "SqueezeBackward1", self, [&] { return self.squeeze(dim); },
      [input_sizes](FormulaNode&, Grads g) -> variable_list {
        return {g[0].reshape(input_sizes)};
      });
}

Tensor as_strided_autograd(const Tensor& self, IntArrayRef sizes, IntArrayRef strides,
                           std::optional<int64_t> offset) {
  const DimVector in_sizes(self.sizes()), in_strides(self.strides());
  const int64_t in_offset = self.storage_offset();
  const DimVector out_sizes(sizes), out_strides(strides);
  const int64_t out_offset = offset.value_or(in_offset);
  return record_view(
      "AsStridedBackward0", self, [&] { return self.as_strided(sizes, strides, offset); },
      [=](FormulaNode&, Grads g) -> variable_list {
        return {as_strided_backward(g[0], in_sizes, in_strides, in_offset, out_sizes, out_strides,
                                    out_offset)};
      });
}

// The view backwards are linear in the gradient: their own gradients are the views again.
Tensor slice_backward_autograd(const Tensor& grad, IntArrayRef input_sizes, int64_t dim,
                               int64_t start, int64_t end, int64_t step) {
  Recorder rec("SliceBackwardBackward0", {&grad});
  Tensor out =
      below_autograd([&] { return slice_backward(grad, input_sizes, dim, start, end, step); });
  if (rec) {
    rec.record(out, [dim, start, end, step](FormulaNode&, Grads g) -> variable_list {
      return {g[0].slice(dim, start, end, step)};
    });
  }
  return out;
}

Tensor select_backward_autograd(const Tensor& grad, IntArrayRef input_sizes, int64_t dim,
                                int64_t index) {
  Recorder rec("SelectBackwardBackward0", {&grad});
  Tensor out = below_autograd([&] { return select_backward(grad, input_sizes, dim, index); });
  if (rec) {
    rec.record(out, [dim, index](FormulaNode&, Grads g) -> variable_list {
      return {g[0].select(dim, index)};
    });
  }
  return out;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  impl_autograd(m, "alias", &alias_autograd, "AliasBackward0");
  impl_autograd(m, "view", &view_autograd, "ViewBackward0");
  impl_autograd(m, "permute", &permute_autograd, "PermuteBackward0");
  impl_autograd(m, "transpose.int", &transpose_autograd, "TransposeBackward0");
  impl_autograd(m, "slice.Tensor", &slice_autograd, "SliceBackward0");
  impl_autograd(m, "select.int", &select_autograd, "SelectBackward0");
  impl_autograd(m, "expand", &expand_autograd, "ExpandBackward0");
  impl_autograd(m, "unsqueeze", &unsqueeze_autograd, "UnsqueezeBackward0");
  impl_autograd(m, "squeeze", &squeeze_autograd, "SqueezeBackward0");
  impl_autograd(m, "squeeze.dim", &squeeze_dim_autograd, "SqueezeBackward1");
  impl_autograd(m, "as_strided", &as_strided_autograd, "AsStridedBackward0");
  impl_autograd(m, "slice_backward", &slice_backward_autograd, "SliceBackwardBackward0");
  impl_autograd(m, "select_backward", &select_backward_autograd, "SelectBackwardBackward0");
}

}  // namespace ferry::autograd
