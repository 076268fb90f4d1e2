// Tensor::item(): the value of a one-element tensor as a Scalar, lazy bits applied.
#include "ferry/core/tensor.h"
#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/local_dispatch_key_set.h"

namespace ferry {

Scalar Tensor::item() const {
  FERRY_CHECK_AS(ShapeError, numel() == 1, "item: expected a tensor with one element, but got ",
                 numel(), " elements (sizes ", sizes(), ")");
  if (!is_cpu()) {
    // A number is out of any graph: the copy to the host records nothing.
    ExcludeDispatchKeyGuard no_autograd(DispatchKeySet::autograd());
    return cpu().item();
  }
  Scalar s = Scalar::from_element(data_ptr(), dtype());
  if (is_complex()) {
    auto v = s.to<std::complex<double>>();
    if (is_conj()) v = std::conj(v);
    if (is_neg()) v = -v;
    return Scalar(v);
  }
  if (!is_neg()) return s;
  if (s.is_floating_point()) return Scalar(-s.to<double>());
  if (s.is_bool()) return s;
  return Scalar(-s.to<int64_t>());
}

}  // namespace ferry
