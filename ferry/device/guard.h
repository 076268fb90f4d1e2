// RAII guards for the calling thread's current device and current stream, as c10's
// DeviceGuard / OptionalDeviceGuard / StreamGuard. Each restores exactly what it changed when it
// goes out of scope, including when an exception unwinds through it. CPU devices and streams
// make the guards no-ops. Guards are neither copyable nor movable: they belong to one scope on
// one thread.
#pragma once

#include <optional>

#include "ferry/core/device.h"
#include "ferry/device/stream.h"

namespace ferry {

class DeviceGuard {
 public:
  // Makes `device` (checked; an index-less device means the current one) the current device of
  // its type.
  explicit DeviceGuard(Device device);
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard();

  // Switches to `device`, which must have the guard's device type (any type if the guard was
  // made for the CPU); the destructor still restores the original.
  void set_device(Device device);
  // The current device when the guard was made (cpu for a CPU guard).
  Device original_device() const { return original_; }
  // The device the guard last set.
  Device current_device() const { return current_; }

 private:
  Device original_;
  Device current_;
};

class OptionalDeviceGuard {
 public:
  OptionalDeviceGuard() = default;
  explicit OptionalDeviceGuard(std::optional<Device> device) {
    if (device) guard_.emplace(*device);
  }
  OptionalDeviceGuard(const OptionalDeviceGuard&) = delete;
  OptionalDeviceGuard& operator=(const OptionalDeviceGuard&) = delete;

  // Initializes the guard on first use, switches device afterwards.
  void set_device(Device device) {
    if (guard_) {
      guard_->set_device(device);
    } else {
      guard_.emplace(device);
    }
  }
  // Restores the original device now and disengages.
  void reset() { guard_.reset(); }
  std::optional<Device> original_device() const {
    return guard_ ? std::optional<Device>(guard_->original_device()) : std::nullopt;
  }
  std::optional<Device> current_device() const {
    return guard_ ? std::optional<Device>(guard_->current_device()) : std::nullopt;
  }

 private:
  std::optional<DeviceGuard> guard_;
};

class StreamGuard {
 public:
  // Makes stream.device() the current device and `stream` its current stream.
  explicit StreamGuard(const Stream& stream);
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;
  ~StreamGuard();

  // Switches to `stream` (same device type as the guard's). Moving to another device restores
  // the previous device's current stream first, as c10's StreamGuard does.
  void reset_stream(const Stream& stream);
  // The current stream of the guarded device when the guard (last) switched to it.
  Stream original_stream() const { return original_stream_; }
  Stream current_stream() const { return current_stream_; }
  Device original_device() const { return original_device_; }
  Device current_device() const { return current_stream_.device(); }

 private:
  Device original_device_;
  Stream original_stream_;
  Stream current_stream_;
};

}  // namespace ferry
