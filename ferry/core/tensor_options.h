// TensorOptions: what a factory should make — dtype, device, memory format, pinned memory, and
// whether the result is a leaf that requires grad.
// Converts implicitly from a ScalarType, a Device, a DeviceType and a MemoryFormat, so that
// `empty({2, 3}, kHalf)` and `empty({2, 3}, Device("sim:0"))` read as in PyTorch. Unset fields
// take the defaults: float32, cpu, contiguous, pageable.
#pragma once

#include <optional>

#include "ferry/core/device.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/scalar_type.h"

namespace ferry {

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType dtype) : dtype_(dtype), has_dtype_(true) {}          // NOLINT
  TensorOptions(Device device) : device_(device), has_device_(true) {}          // NOLINT
  TensorOptions(DeviceType type) : device_(Device(type)), has_device_(true) {}  // NOLINT
  // NOLINTNEXTLINE(google-explicit-constructor)
  TensorOptions(MemoryFormat format) : memory_format_(format), has_memory_format_(true) {}

  // Builders: each returns a copy with one field set.
  TensorOptions dtype(ScalarType dtype) const {
    TensorOptions o = *this;
    o.dtype_ = dtype;
    o.has_dtype_ = true;
    return o;
  }
  TensorOptions device(Device device) const {
    TensorOptions o = *this;
    o.device_ = device;
    o.has_device_ = true;
    return o;
  }
  TensorOptions memory_format(MemoryFormat format) const {
    TensorOptions o = *this;
    o.memory_format_ = format;
    o.has_memory_format_ = true;
    return o;
  }
  TensorOptions pinned_memory(bool pinned) const {
    TensorOptions o = *this;
    o.pinned_memory_ = pinned;
    return o;
  }
  // The factory's result requires grad (floating and complex dtypes only).
  TensorOptions requires_grad(bool on) const {
    TensorOptions o = *this;
    o.requires_grad_ = on;
    return o;
  }

  // Getters with defaults applied (unset fields hold the defaults).
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
  MemoryFormat memory_format() const { return memory_format_; }
  bool pinned_memory() const { return pinned_memory_; }
  bool requires_grad() const { return requires_grad_; }

  std::optional<ScalarType> dtype_opt() const {
    return has_dtype_ ? std::optional<ScalarType>(dtype_) : std::nullopt;
  }
  std::optional<Device> device_opt() const {
    return has_device_ ? std::optional<Device>(device_) : std::nullopt;
  }
  std::optional<MemoryFormat> memory_format_opt() const {
    return has_memory_format_ ? std::optional<MemoryFormat>(memory_format_) : std::nullopt;
  }

  // Fields set here win over those of `defaults`.
  TensorOptions merged_over(const TensorOptions& defaults) const {
    TensorOptions o = defaults;
    if (has_dtype_) o = o.dtype(dtype_);
    if (has_device_) o = o.device(device_);
    if (has_memory_format_) o = o.memory_format(memory_format_);
    o.pinned_memory_ = pinned_memory_ || defaults.pinned_memory_;
    o.requires_grad_ = requires_grad_ || defaults.requires_grad_;
    return o;
  }

 private:
  // Plain fields with has_ flags rather than std::optional: GCC 12 reports false
  // -Wmaybe-uninitialized on copies of optionals inlined into large callers, and the result
  // depends on inlining budgets (it failed CI on one machine and not another).
  ScalarType dtype_ = kFloat32;
  Device device_ = Device(DeviceType::CPU);
  MemoryFormat memory_format_ = MemoryFormat::Contiguous;
  bool has_dtype_ = false;
  bool has_device_ = false;
  bool has_memory_format_ = false;
  bool pinned_memory_ = false;
  bool requires_grad_ = false;
};

// torch::dtype(...), torch::device(...) spellings.
inline TensorOptions dtype(ScalarType t) { return TensorOptions().dtype(t); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }
inline TensorOptions memory_format(MemoryFormat f) { return TensorOptions().memory_format(f); }
inline TensorOptions requires_grad(bool on = true) { return TensorOptions().requires_grad(on); }

}  // namespace ferry
