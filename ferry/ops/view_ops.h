// The backwards of the view operators, as operators of their own (so that they run on every
// device and are differentiable): the gradient of a view written into zeros shaped like the
// view's input. The views themselves are Tensor methods (ferry/core/tensor.h).
#pragma once

#include <cstdint>

#include "ferry/core/tensor.h"

namespace ferry {

Tensor slice_backward(const Tensor& grad, IntArrayRef input_sizes, int64_t dim, int64_t start,
                      int64_t end, int64_t step);
Tensor select_backward(const Tensor& grad, IntArrayRef input_sizes, int64_t dim, int64_t index);
// The input must be dense and non-overlapping (with input_strides) and the view must not
// overlap itself; offsets are storage offsets.
Tensor as_strided_backward(const Tensor& grad, IntArrayRef input_sizes, IntArrayRef input_strides,
                           int64_t input_offset, IntArrayRef sizes, IntArrayRef strides,
                           int64_t offset);

}  // namespace ferry
