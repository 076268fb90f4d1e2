// TensorOptions: what a factory should make — dtype, device, memory format, pinned memory.
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
  TensorOptions(ScalarType dtype) : dtype_(dtype) {}              // NOLINT
  TensorOptions(Device device) : device_(device) {}               // NOLINT
  TensorOptions(DeviceType type) : device_(Device(type)) {}       // NOLINT
  TensorOptions(MemoryFormat format) : memory_format_(format) {}  // NOLINT

  // Builders: each returns a copy with one field set.
  TensorOptions dtype(ScalarType dtype) const {
    TensorOptions o = *this;
    o.dtype_ = dtype;
    return o;
  }
  TensorOptions device(Device device) const {
    TensorOptions o = *this;
    o.device_ = device;
    return o;
  }
  TensorOptions memory_format(MemoryFormat format) const {
    TensorOptions o = *this;
    o.memory_format_ = format;
    return o;
  }
  TensorOptions pinned_memory(bool pinned) const {
    TensorOptions o = *this;
    o.pinned_memory_ = pinned;
    return o;
  }

  // Getters with defaults applied.
  ScalarType dtype() const { return dtype_.value_or(kFloat32); }
  Device device() const { return device_.value_or(Device(DeviceType::CPU)); }
  MemoryFormat memory_format() const { return memory_format_.value_or(MemoryFormat::Contiguous); }
  bool pinned_memory() const { return pinned_memory_; }

  std::optional<ScalarType> dtype_opt() const { return dtype_; }
  std::optional<Device> device_opt() const { return device_; }
  std::optional<MemoryFormat> memory_format_opt() const { return memory_format_; }

  // Fields set here win over those of `defaults`.
  TensorOptions merged_over(const TensorOptions& defaults) const {
    TensorOptions o;
    o.dtype_ = dtype_ ? dtype_ : defaults.dtype_;
    o.device_ = device_ ? device_ : defaults.device_;
    o.memory_format_ = memory_format_ ? memory_format_ : defaults.memory_format_;
    o.pinned_memory_ = pinned_memory_ || defaults.pinned_memory_;
    return o;
  }

 private:
  std::optional<ScalarType> dtype_;
  std::optional<Device> device_;
  std::optional<MemoryFormat> memory_format_;
  bool pinned_memory_ = false;
};

// torch::dtype(...), torch::device(...) spellings.
inline TensorOptions dtype(ScalarType t) { return TensorOptions().dtype(t); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }
inline TensorOptions memory_format(MemoryFormat f) { return TensorOptions().memory_format(f); }

}  // namespace ferry
