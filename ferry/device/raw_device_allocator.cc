// The non-caching device allocator: backend malloc on allocate, backend free on release.
#include "ferry/device/raw_device_allocator.h"

#include <array>
#include <cstdio>
#include <exception>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"

namespace ferry {
namespace {

// The DataPtr context: enough to find the backend and device again when the last Storage goes.
struct RawBlock {
  void* ptr;
  Device device;
};

void release_block(void* context) {
  auto* block = static_cast<RawBlock*>(context);
  try {
    get_backend(block->device.type()).free(block->device.index(), block->ptr);
  } catch (const std::exception& e) {
    // A deleter runs in destructors and must not throw; losing the block is the lesser harm.
    std::fprintf(stderr, "ferry: failed to free device memory: %s\n", e.what());
  }
  delete block;
}

class RawDeviceAllocator final : public Allocator {
 public:
  explicit RawDeviceAllocator(DeviceType type) : type_(type) {}

  DataPtr allocate(size_t nbytes, Device device) override {
    FERRY_CHECK_AS(DeviceError, device.type() == type_, "expected a ", type_,
                   " device for the raw ", type_, " allocator, but got ", device);
    const Device resolved = checked_device(device);
    if (nbytes == 0) return DataPtr(nullptr, resolved);
    void* ptr = get_backend(type_).malloc(resolved.index(), nbytes);
    return DataPtr(ptr, new RawBlock{ptr, resolved}, &release_block, resolved);
  }

 private:
  DeviceType type_;
};

}  // namespace

Allocator* raw_device_allocator(DeviceType type) {
  static std::array<RawDeviceAllocator, kNumDeviceTypes> allocators{
      RawDeviceAllocator(DeviceType::CPU), RawDeviceAllocator(DeviceType::Sim),
      RawDeviceAllocator(DeviceType::CUDA)};
  FERRY_CHECK_AS(DeviceError, type != DeviceType::CPU,
                 "expected a device type with a backend, but got cpu");
  return &allocators[static_cast<size_t>(type)];
}

void install_raw_device_allocator(DeviceType type) {
  // set_allocator has no compare-and-swap; this runs during static initialization, before any
  // other thread can install an allocator, so putting a previous one back is race-free.
  Allocator* previous = set_allocator(type, raw_device_allocator(type));
  if (previous != nullptr) set_allocator(type, previous);
}

}  // namespace ferry
