// A non-caching ferry::Allocator for device types with a backend: every allocate() is a backend
// malloc and every free a backend free (which waits for queued work, as cudaFree does).
// It is the stopgap until ferry/memory installs its caching allocator, which simply replaces it
// with ferry::set_allocator(type, ...).
#pragma once

#include "ferry/core/device.h"
#include "ferry/core/storage.h"

namespace ferry {

// The raw allocator of `type` (Sim or CUDA). Lives for the whole process.
Allocator* raw_device_allocator(DeviceType type);

// Installs raw_device_allocator(type) unless an allocator for `type` is already installed.
// Called when a backend registers itself (during static initialization).
void install_raw_device_allocator(DeviceType type);

}  // namespace ferry
