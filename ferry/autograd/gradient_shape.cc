// sum_to and is_expandable_to.
#include "ferry/autograd/gradient_shape.h"

namespace ferry::autograd {

bool is_expandable_to(IntArrayRef shape, IntArrayRef desired) {
  if (shape.size() > desired.size()) return false;
  const size_t lead = desired.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != desired[lead + i] && shape[i] != 1) return false;
  }
  return true;
}

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  if (grad.sizes().equals(shape)) return grad;
  const size_t lead = grad.dim() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < static_cast<size_t>(grad.dim()); ++i) {
    if (i < lead || (shape[i - lead] == 1 && grad.sizes()[i] != 1)) {
      dims.push_back(static_cast<int64_t>(i));
    }
  }
  Tensor reduced = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  return reduced.view(shape);
}

}  // namespace ferry::autograd
