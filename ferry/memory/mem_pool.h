// MemPool and UseMemPool: scoped allocation contexts, as PyTorch's torch.cuda.MemPool and
// use_mem_pool. A MemPool names a MemoryResource; while a UseMemPool guard lives, the device
// tensors that the calling thread creates on the guard's device come from the pool's resource,
// whatever stream they are allocated on. Guarantees: per thread (other threads are unaffected),
// nestable (the innermost guard for a device wins; guards for other devices do not interfere),
// and a tensor goes back to the resource it came from whenever and on whichever thread it is
// freed (the storage remembers it: storage_memory_resource). A pool that shares ownership of its
// resource keeps it alive for as long as any tensor allocated through the pool lives.
#pragma once

#include <memory>
#include <optional>

#include "ferry/core/device.h"
#include "ferry/memory/memory_resource.h"

namespace ferry::memory {

class FixedRangeResource;

// A handle: copies name the same pool.
class MemPool {
 public:
  // Over `resource`, which the caller keeps alive while the pool is in use and while tensors
  // allocated from it live (as with set_memory_resource). `device`, if given, is the only device
  // the pool may be used for.
  explicit MemPool(MemoryResource* resource, std::optional<Device> device = std::nullopt);
  // Shares ownership of `resource`: tensors allocated through the pool keep it alive.
  explicit MemPool(std::shared_ptr<MemoryResource> resource,
                   std::optional<Device> device = std::nullopt);
  // Over a fixed range: the pool is for the range's device.
  explicit MemPool(std::shared_ptr<FixedRangeResource> range);

  MemoryResource* resource() const { return resource_; }
  // The shared owner, or null for a pool made from a plain pointer.
  const std::shared_ptr<MemoryResource>& shared_resource() const { return owner_; }
  std::optional<Device> device() const { return device_; }

  friend bool operator==(const MemPool& a, const MemPool& b) { return a.resource_ == b.resource_; }

 private:
  std::shared_ptr<MemoryResource> owner_;
  MemoryResource* resource_ = nullptr;
  std::optional<Device> device_;
};

// While it lives, device tensors that this thread creates on `device` (an index-less device
// means the current one) come from `pool`. Raises DeviceError for a CPU device, or a device other
// than the pool's own. Destroy guards in reverse order of creation (scopes do that).
class UseMemPool {
 public:
  UseMemPool(const MemPool& pool, Device device);
  // For a pool that knows its device (a fixed-range pool).
  explicit UseMemPool(const MemPool& pool);
  UseMemPool(const UseMemPool&) = delete;
  UseMemPool& operator=(const UseMemPool&) = delete;
  ~UseMemPool();

  Device device() const { return device_; }

 private:
  Device device_;
};

// The resource of the innermost pool the calling thread uses for `device` (a device with an
// index), or nullptr when it uses none.
MemoryResource* active_mem_pool_resource(Device device);

namespace detail {

// The innermost pool entry of the calling thread for `device`; nullptr when none.
struct ActivePool {
  Device device;
  MemoryResource* resource;
  std::shared_ptr<MemoryResource> owner;
  const UseMemPool* guard;  // the guard that pushed it
};
const ActivePool* active_pool(Device device);

}  // namespace detail

}  // namespace ferry::memory
