// Shapes of gradients: a gradient computed for a broadcast result is summed back down to the
// shape of the input that was broadcast (PyTorch's sum_to), which the engine does for every
// node, so formulas need not.
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::autograd {

// Whether `shape` broadcasts to `desired` (each trailing dim equal or 1, no more dims).
bool is_expandable_to(IntArrayRef shape, IntArrayRef desired);
// `grad` summed over the dims that `shape` broadcasts (leading ones, and size-1 ones), viewed as
// `shape`. Requires is_expandable_to(shape, grad.sizes()).
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

}  // namespace ferry::autograd
