// Storage, the allocator registry and the default CPU allocator (large blocks through the
// cache in cpu_block_cache.h).
#include "ferry/core/storage.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "ferry/core/cpu_block_cache.h"
#include "ferry/core/error.h"

namespace ferry {
namespace {

constexpr size_t kHugePageThreshold = size_t{4} << 20;

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device /*device*/) override {
    const Device cpu(DeviceType::CPU);
    if (nbytes < kHugePageThreshold) {
      // glibc's aligned_alloc takes a slow path; malloc plus manual alignment costs half as
      // much, which matters for the per-call cost of small to()/clone(). The context keeps the
      // pointer malloc returned, for free.
      void* raw = std::malloc(nbytes + kCpuAlignment);
      FERRY_CHECK_AS(OutOfMemoryError, raw != nullptr, "cpu: failed to allocate ", nbytes,
                     " bytes of host memory");
      const auto address = reinterpret_cast<uintptr_t>(raw);
      void* aligned = reinterpret_cast<void*>((address + kCpuAlignment) & ~(kCpuAlignment - 1));
      return DataPtr(aligned, raw, &std::free, cpu);
    }
    detail::CpuBlock* block = detail::acquire_cpu_block(nbytes);
    FERRY_CHECK_AS(OutOfMemoryError, block != nullptr, "cpu: failed to allocate ", nbytes,
                   " bytes of host memory");
    return DataPtr(detail::cpu_block_data(block), block, &detail::release_cpu_block, cpu);
  }
};

std::array<std::atomic<Allocator*>, kNumDeviceTypes>& registry() {
  static std::array<std::atomic<Allocator*>, kNumDeviceTypes> allocators{cpu_allocator(), nullptr,
                                                                         nullptr};
  return allocators;
}

}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator allocator;
  return &allocator;
}

Allocator* get_allocator(DeviceType type) {
  Allocator* a = registry()[static_cast<size_t>(type)].load(std::memory_order_acquire);
  FERRY_CHECK_AS(DeviceError, a != nullptr, "expected an allocator for device type ", type,
                 ", but none is installed (is the ", type, " backend built and initialized?)");
  return a;
}

Allocator* set_allocator(DeviceType type, Allocator* allocator) {
  return registry()[static_cast<size_t>(type)].exchange(allocator, std::memory_order_acq_rel);
}

namespace {
std::atomic<Allocator*>& pinned_slot() {
  static std::atomic<Allocator*> slot{nullptr};
  return slot;
}
}  // namespace

Allocator* get_pinned_host_allocator() {
  Allocator* a = pinned_slot().load(std::memory_order_acquire);
  FERRY_CHECK_AS(DeviceError, a != nullptr,
                 "expected a pinned host allocator, but none is installed (pinned memory needs a "
                 "device backend)");
  return a;
}

Allocator* set_pinned_host_allocator(Allocator* allocator) {
  return pinned_slot().exchange(allocator, std::memory_order_acq_rel);
}

Storage::Storage(size_t nbytes, Allocator* allocator, Device device)
    : Storage(allocator->allocate(nbytes, device), nbytes, allocator) {}

Storage::Storage(DataPtr data, size_t nbytes, Allocator* allocator)
    : impl_(make_intrusive<StorageImpl>(std::move(data), nbytes, allocator)) {}

}  // namespace ferry
