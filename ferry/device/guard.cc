// Device and stream guards.
#include "ferry/device/guard.h"

#include <cstdio>
#include <exception>

#include "ferry/core/error.h"
#include "ferry/device/runtime.h"

namespace ferry {
namespace {

// Destructors must not throw; a failed restore is reported and otherwise ignored.
void restore_device(Device device) noexcept {
  if (device.is_cpu()) return;
  try {
    get_backend(device.type()).set_current_device(device.index());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: failed to restore the current device %s: %s\n",
                 device.str().c_str(), e.what());
  }
}

}  // namespace

DeviceGuard::DeviceGuard(Device device) {
  if (device.is_cpu()) return;
  const Device d = checked_device(device);
  original_ = ferry::current_device(d.type());
  if (d != original_) get_backend(d.type()).set_current_device(d.index());
  current_ = d;
}

DeviceGuard::~DeviceGuard() {
  if (!original_.is_cpu() && current_ != original_) restore_device(original_);
}

void DeviceGuard::set_device(Device device) {
  if (device.is_cpu()) {
    FERRY_CHECK_AS(DeviceError, original_.is_cpu(), "DeviceGuard::set_device: expected a ",
                   original_.type(), " device (the guard's type), but got ", device);
    return;
  }
  const Device d = checked_device(device);
  if (original_.is_cpu()) {
    original_ = ferry::current_device(d.type());
    current_ = original_;
  }
  FERRY_CHECK_AS(DeviceError, d.type() == original_.type(), "DeviceGuard::set_device: expected a ",
                 original_.type(), " device (the guard's type), but got ", device);
  if (d != current_) get_backend(d.type()).set_current_device(d.index());
  current_ = d;
}

StreamGuard::StreamGuard(const Stream& stream)
    : original_stream_(stream.is_cpu() ? Stream() : ferry::current_stream(stream.device())),
      current_stream_(stream) {
  if (stream.is_cpu()) return;
  original_device_ = ferry::current_device(stream.device_type());
  set_device(stream.device());
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() {
  if (current_stream_.is_cpu()) return;
  set_current_stream(original_stream_);  // a thread_local store: cannot fail
  if (current_stream_.device() != original_device_) restore_device(original_device_);
}

void StreamGuard::reset_stream(const Stream& stream) {
  if (current_stream_.is_cpu() && !stream.is_cpu()) {
    // A guard made for the CPU stream becomes a real one on first switch.
    original_device_ = ferry::current_device(stream.device_type());
    original_stream_ = ferry::current_stream(stream.device());
  } else if (stream.is_cpu() || stream.device_type() != current_stream_.device_type()) {
    FERRY_CHECK_AS(DeviceError, stream.is_cpu() && current_stream_.is_cpu(),
                   "StreamGuard::reset_stream: expected a stream of the guard's device type (",
                   current_stream_.device_type(), "), but got ", stream);
    return;
  } else if (stream.device() != current_stream_.device()) {
    set_current_stream(original_stream_);
    original_stream_ = ferry::current_stream(stream.device());
  }
  set_device(stream.device());
  set_current_stream(stream);
  current_stream_ = stream;
}

}  // namespace ferry
