// fill_ and zero_: write one value into every element, honouring the lazy conj/neg bits so that
// reading the tensor back gives the value that was written.
#include <algorithm>

#include "ferry/core/element_walk.h"
#include "ferry/core/tensor.h"
#include "ferry/ops/device_copy.h"

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
  if (is_cpu()) {
    fill_cpu(*this, value);
  } else {
    // Queued on the device's current stream (ferry/ops/device_copy.h).
    device_fill(*this, stored_value(value, is_conj(), is_neg()));
  }
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

}  // namespace ferry
