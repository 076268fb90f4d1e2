// fill_ and zero_: write one value into every element, honouring the lazy conj/neg bits so that
// reading the tensor back gives the value that was written. fill_ is the dispatcher operator
// ferry::fill_, with a CPU kernel here and the device kernel of ferry/ops/device_copy.h.
#include <algorithm>

#include "ferry/core/element_walk.h"
#include "ferry/core/tensor.h"
#include "ferry/dispatch/dispatcher.h"
#include "ferry/dispatch/library.h"
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

Tensor& fill_cpu(Tensor& self, const Scalar& value) {
  self.impl()->bump_version();
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
  return self;
}

// Queued on the device's current stream, without waiting.
Tensor& fill_device(Tensor& self, const Scalar& value) {
  self.impl()->bump_version();
  device_fill(self, stored_value(value, self.is_conj(), self.is_neg()));
  return self;
}

}  // namespace

FERRY_LIBRARY(ferry, m) { m.def("ferry::fill_(Tensor(a!) self, Scalar value) -> Tensor(a!)"); }
FERRY_LIBRARY_IMPL(ferry, CPU, m) { m.impl("fill_", &fill_cpu, "fill_cpu"); }
FERRY_LIBRARY_IMPL(ferry, Sim, m) { m.impl("fill_", &fill_device, "fill_device"); }
FERRY_LIBRARY_IMPL(ferry, CUDA, m) { m.impl("fill_", &fill_device, "fill_device"); }

Tensor& Tensor::fill_(const Scalar& value) {
  static const auto op =
      Dispatcher::singleton().find("ferry::fill_").typed<Tensor&(Tensor&, const Scalar&)>();
  return op.call(*this, value);
}

Tensor& Tensor::zero_() { return fill_(0); }

}  // namespace ferry
