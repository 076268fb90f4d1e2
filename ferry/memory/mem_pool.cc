// MemPool handles and the calling thread's stack of UseMemPool guards (innermost last), which
// get_memory_resource and the device tensor allocator consult before the installed resources.
#include "ferry/memory/mem_pool.h"

#include <iterator>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/fixed_range_resource.h"

namespace ferry::memory {
namespace {

std::vector<detail::ActivePool>& thread_pool_stack() {
  thread_local std::vector<detail::ActivePool> stack;
  return stack;
}

}  // namespace

MemPool::MemPool(MemoryResource* resource, std::optional<Device> device)
    : resource_(resource), device_(device) {
  FERRY_CHECK(resource != nullptr, "MemPool: expected a memory resource, but got none");
  FERRY_CHECK_AS(DeviceError, !device.has_value() || (!device->is_cpu() && device->has_index()),
                 "MemPool: expected a sim or cuda device with an index, but got ", *device);
}

MemPool::MemPool(std::shared_ptr<MemoryResource> resource, std::optional<Device> device)
    : MemPool(resource.get(), device) {
  owner_ = std::move(resource);
}

MemPool::MemPool(std::shared_ptr<FixedRangeResource> range)
    : MemPool(std::shared_ptr<MemoryResource>(range),
              range != nullptr ? std::optional<Device>(range->device()) : std::nullopt) {}

UseMemPool::UseMemPool(const MemPool& pool, Device device) {
  FERRY_CHECK_AS(DeviceError, !device.is_cpu(),
                 "UseMemPool: expected a sim or cuda device (pools serve device tensors), but got "
                 "cpu");
  device_ = device.has_index() ? device : checked_device(device);
  FERRY_CHECK_AS(DeviceError, !pool.device().has_value() || *pool.device() == device_,
                 "UseMemPool: expected the pool's device ", *pool.device(), ", but got ", device_);
  thread_pool_stack().push_back(
      detail::ActivePool{device_, pool.resource(), pool.shared_resource(), this});
}

UseMemPool::UseMemPool(const MemPool& pool)
    : UseMemPool(pool, [&] {
        FERRY_CHECK_AS(DeviceError, pool.device().has_value(),
                       "UseMemPool: expected a device for a pool that has none of its own");
        return *pool.device();
      }()) {}

UseMemPool::~UseMemPool() {
  // Normally the last entry; guards destroyed out of order (heap-allocated ones) remove their
  // own entry wherever it is.
  auto& stack = thread_pool_stack();
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    if (it->guard == this) {
      stack.erase(std::next(it).base());
      return;
    }
  }
}

MemoryResource* active_mem_pool_resource(Device device) {
  const detail::ActivePool* pool = detail::active_pool(device);
  return pool != nullptr ? pool->resource : nullptr;
}

namespace detail {

const ActivePool* active_pool(Device device) {
  const auto& stack = thread_pool_stack();
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    if (it->device == device) return &*it;
  }
  return nullptr;
}

}  // namespace detail

}  // namespace ferry::memory
