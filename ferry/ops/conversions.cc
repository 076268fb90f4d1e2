// contiguous, clone, to and cpu: composite front-ends over copy_ (PyTorch's
// CompositeImplicitAutograd operators), so every device and every dtype pair reaches the same
// copy path. Invariant: `to` returns the tensor itself exactly when nothing would change and
// no copy was asked for; otherwise the result is new memory that shares nothing with self (pinned
// host memory when asked, and for a non_blocking move from a device to the cpu).
#include <optional>

#include "ferry/device/runtime.h"
#include "ferry/ops/factories.h"

namespace ferry {
namespace {

bool same_device(Device requested, Device have) {
  // An index-less device ("sim") means the current one, as for the allocation a copy would
  // make (PyTorch's ensure_has_index); checking it also rejects a device that does not exist.
  return checked_device(requested) == have;
}

Tensor to_impl(const Tensor& self, std::optional<Device> device, std::optional<ScalarType> dtype,
               bool pinned, bool non_blocking, bool copy, std::optional<MemoryFormat> format) {
  const MemoryFormat f = format.value_or(MemoryFormat::Preserve);
  const bool nothing_changes = !copy && (!device || same_device(*device, self.device())) &&
                               (!dtype || *dtype == self.dtype()) &&
                               (f == MemoryFormat::Preserve || self.is_contiguous(f)) &&
                               (!pinned || self.is_pinned());
  if (nothing_changes) return self;
  const Device target = device.value_or(self.device());
  // A non-blocking copy from a device to the host into pageable memory would wait for the
  // stream on the host (a pageable memcpy returns once it is done): pin the result, as
  // PyTorch's _to_copy does, so the copy is only queued. The caller synchronizes before reading.
  const bool pin_result = non_blocking && !self.is_cpu() && target.is_cpu();
  const TensorOptions options = TensorOptions(dtype.value_or(self.dtype()))
                                    .device(target)
                                    .pinned_memory(pinned || pin_result);
  Tensor out = empty_like(self, options, f);
  out.copy_(self, non_blocking);
  return out;
}

}  // namespace

Tensor Tensor::clone(MemoryFormat format) const {
  Tensor out = empty_like(*this, options(), format);
  out.copy_(*this);
  return out;
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  FERRY_CHECK(format != MemoryFormat::Preserve,
              "contiguous: expected a concrete memory format, but got preserve_format (clone() "
              "keeps a tensor's layout)");
  if (is_contiguous(format)) return *this;
  return clone(format);
}

Tensor Tensor::to(TensorOptions options, bool non_blocking, bool copy,
                  std::optional<MemoryFormat> format) const {
  FERRY_CHECK(!(options.memory_format_opt() && format),
              "to: expected the memory format in the options or as an argument, but got both (",
              *options.memory_format_opt(), " and ", *format, ")");
  return to_impl(*this, options.device_opt(), options.dtype_opt(), options.pinned_memory(),
                 non_blocking, copy, format ? format : options.memory_format_opt());
}

Tensor Tensor::to(ScalarType dtype, bool non_blocking, bool copy,
                  std::optional<MemoryFormat> format) const {
  return to_impl(*this, std::nullopt, dtype, false, non_blocking, copy, format);
}

Tensor Tensor::to(Device device, ScalarType dtype, bool non_blocking, bool copy,
                  std::optional<MemoryFormat> format) const {
  return to_impl(*this, device, dtype, false, non_blocking, copy, format);
}

Tensor Tensor::to(const Tensor& other, bool non_blocking, bool copy,
                  std::optional<MemoryFormat> format) const {
  return to_impl(*this, other.device(), other.dtype(), false, non_blocking, copy, format);
}

Tensor Tensor::cpu() const {
  return to_impl(*this, Device(DeviceType::CPU), std::nullopt, false, false, false, std::nullopt);
}

}  // namespace ferry
