// device_fill: fill_ and zero_ of sim and CUDA tensors, queued on the device's current stream
// like any other device work (the host does not wait). A dense tensor whose value is one
// repeated byte (zero above all) takes one memset; anything else is a broadcast copy from a
// value carried inside the kernel's problem, so no memory has to outlive the call.
#include <cstring>

#include "ferry/device/device_copy_kernel.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/ops/copy.h"
#include "ferry/ops/device_copy.h"
#include "ferry/ops/device_copy_detail.h"
#include "ferry/ops/factories.h"

namespace ferry {

void device_fill(const Tensor& self, const Scalar& stored) {
  FERRY_CHECK(!self.is_cpu(), "device_fill: expected a device tensor, but got one on the cpu");
  if (self.numel() == 0) return;
  alignas(16) unsigned char value[sizeof(CopyProblem::value)] = {};
  static_assert(sizeof(value) >= sizeof(std::complex<double>));
  const size_t item = self.element_size();
  visit_dtype(self.dtype(), [&]<typename T>() {
    const T v = stored.to<T>();
    std::memcpy(value, &v, sizeof(T));
  });
  const Device device = self.device();
  const Stream stream = current_stream(device);

  bool one_byte = true;
  for (size_t i = 1; i < item; ++i) one_byte = one_byte && value[i] == value[0];
  if (one_byte && self.is_non_overlapping_and_dense()) {
    // Dense with non-negative strides: the elements fill [data_ptr, data_ptr + nbytes).
    get_backend(device.type())
        .memset_async(device.index(), self.data_ptr(), value[0], self.nbytes(), stream.raw());
    return;
  }

  // Writing an element that several indices share once is enough (and keeps the kernel's "dst
  // never aliases itself" rule); the iterator then coalesces dst against a broadcast scalar.
  const Tensor dst = compact_broadcast(self);
  const Tensor scalar = from_blob(value, {}, TensorOptions(self.dtype()));
  const TensorIterator iter = build_copy_iterator(dst, scalar);
  // The iterator's shape, strides and destination; the source is the value itself, carried in
  // the problem and stored as it is (`stored` already reads back as the requested value through
  // self's lazy bits, so none are applied).
  CopyProblem problem = copy_problem_from(iter);
  problem.src = nullptr;
  problem.src_is_value = true;
  problem.conj = false;
  problem.neg = false;
  std::memcpy(problem.value, value, sizeof(value));
  device_copy_kernel_stub(device.type(), problem, stream);
}

}  // namespace ferry
