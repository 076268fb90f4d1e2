// Device-level functions shared by every backend: how many devices there are, the calling
// thread's current device, validation of device indices, synchronization, memory and peer-access
// queries, and pinned host memory. CPU is always present (one device, no backend); other types
// go through their registered backend (ferry/device/backend.h).
#pragma once

#include <cstddef>
#include <string>

#include "ferry/core/device.h"
#include "ferry/device/backend.h"

namespace ferry {

// CPU: 1. Sim/CUDA: the backend's count, 0 when it is not built or has no usable device.
int device_count(DeviceType type);
// Why device_count(type) is 0, e.g. "cudaGetDeviceCount: CUDA driver version is insufficient
// for CUDA runtime version" or "ferry was built without the CUDA backend"; empty otherwise.
std::string device_unavailable_reason(DeviceType type);

// `device` with its index filled in (the current device when it has none) after checking it
// exists. Raises DeviceError naming the device, the index and the count, e.g.
// "sim:5: expected a device index below 2 (there are 2 sim devices), but got 5", or
// "cuda:0: no CUDA device (cudaGetDeviceCount: ...)". CPU is returned as it is.
Device checked_device(Device device);

// The calling thread's current device of `type` (cpu for CPU). Raises when there is none.
Device current_device(DeviceType type);
// Makes `device` the calling thread's current device of its type; CPU is a no-op.
void set_device(Device device);

// Blocks until all work queued on every stream of `device` is done. CPU: no-op.
void device_synchronize(Device device);

// Free and total device memory as the backend sees it. CPU: zeros.
MemoryInfo memory_info(Device device);

// Whether kernels on `device` can access `peer`'s memory (true for device == peer), and turning
// that on. enable_peer_access returns false (rather than raising) when it is not possible.
bool can_access_peer(Device device, Device peer);
bool enable_peer_access(Device device, Device peer);
bool peer_access_enabled(Device device, Device peer);
// Forgets which peer accesses were enabled for `type`: for a backend whose topology can change
// at run time (sim::configure), so that the next enable_peer_access asks the backend again.
void forget_peer_access(DeviceType type);

// Page-locked host memory from the backend of `type` (pinned for that runtime's copies).
void* pinned_malloc(DeviceType type, size_t nbytes);
void pinned_free(DeviceType type, void* ptr);
// True when [ptr, ptr + nbytes) lies inside page-locked memory of any backend that has devices,
// whichever backend pinned it: memory from pinned_malloc(DeviceType::CUDA, n) counts as pinned
// for sim copies too, as page-locked memory does for every runtime on a real machine.
bool is_pinned(const void* ptr, size_t nbytes = 1);

// Page-locks [ptr, ptr + nbytes) of host memory ferry did not allocate (a memfd or file
// mapping) with every backend that has devices (CUDA: cudaHostRegister; sim: its pinned table),
// so that is_pinned is true for it and asynchronous copies from and to it only enqueue. Returns
// false, registering nothing, when no backend has devices. Raises DeviceError (leaving nothing
// registered) for an empty or unmapped range, or one overlapping pinned or registered memory.
bool register_host(void* ptr, size_t nbytes);
// Undoes register_host(ptr, ...) with every backend that has devices, after waiting for queued
// work (as pinned_free does). Raises DeviceError when `ptr` is not the start of a registered
// range (a malloc_host block included).
void unregister_host(void* ptr);

// The allocation holding device address `ptr` on `device`: its base and size (interior
// addresses included), so that a tensor's storage can be exported whole with an offset. Raises
// DeviceError for an address outside every allocation of the device (past-the-end included) and
// for the CPU. Sim: its address table; CUDA: cuMemGetAddressRange, looked up through
// cudaGetDriverEntryPoint.
MemoryRange memory_range(Device device, const void* ptr);

}  // namespace ferry
