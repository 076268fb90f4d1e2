// fill_ and zero_: write one value into every element, honouring the lazy conj/neg bits so that
// reading the tensor back gives the value that was written.
#include <algorithm>

#include "ferry/core/element_walk.h"
#include "ferry/core/tensor.h"

namespace ferry {
namespace {

// The value to store so that a view with these bits reads back `value`.
Scalar stored_value(const Scalar& value, bool conj, bool neg) {
  std::complex<double> v = value.to<std::complex<double>>();
  if (value.is_complex()) {
    if (conj) v = std::conj(v);
    return Scalar(neg ? -v : v);
  }
  if (!neg) return value;
  if (value.is_floating_point()) return Scalar(-value.to<double>());
  return Scalar(-value.to<int64_t>());
}

void fill_cpu(const Tensor& self, const Scalar& value) {
  const Scalar stored = stored_value(value, self.is_conj(), self.is_neg());
  visit_dtype(self.dtype(), [&]<typename T>() {
    const T v = stored.to<T>();
    T* data = static_cast<T*>(self.data_ptr());
    if (self.is_contiguous()) {
      std::fill_n(data, self.numel(), v);
    } else {
      for_each_element_offset(self.sizes(), self.strides(), [&](int64_t i) { data[i] = v; });
    }
  });
}

}  // namespace

Tensor& Tensor::fill_(const Scalar& value) {
  FERRY_CHECK_AS(NotImplementedError, is_cpu(), "fill_: expected a cpu tensor, but got device ",
                 device(), " (device fills arrive with the cross-device copy work)");
  fill_cpu(*this, value);
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

}  // namespace ferry
