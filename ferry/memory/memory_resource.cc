// MemoryResource's checks and counters, the table of installed resources, the ferry::Allocator
// that puts resources under device tensors (installed for Sim and CUDA at load time), and
// record_stream for storages, and device view storages (one allocation aliased by many storages).
#include "ferry/memory/memory_resource.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/tensor.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/mem_pool.h"
#include "ferry/memory/pinned_allocator.h"

namespace ferry::memory {

// ---- MemoryResource --------------------------------------------------------------------------

void MemoryResource::Counter::add(int64_t n) {
  const int64_t now = current.fetch_add(n, std::memory_order_relaxed) + n;
  total.fetch_add(n, std::memory_order_relaxed);
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

Stat MemoryResource::Counter::load() const {
  Stat s;
  s.current = current.load(std::memory_order_relaxed);
  s.allocated = total.load(std::memory_order_relaxed);
  s.peak = std::max(peak.load(std::memory_order_relaxed), s.current);
  s.freed = s.allocated - s.current;
  return s;
}

void* MemoryResource::allocate(size_t bytes, const Stream& stream) {
  FERRY_CHECK_AS(DeviceError, !stream.is_cpu(),
                 "MemoryResource::allocate: expected a stream on a device, but got ", stream);
  if (bytes == 0) return nullptr;
  void* ptr = do_allocate(bytes, stream);
  if (ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % kDeviceAlignment != 0) {
    if (ptr != nullptr) do_deallocate(ptr, bytes, stream);
    FERRY_FAIL_AS(Error, "MemoryResource::allocate(", bytes, " bytes on ", stream,
                  "): expected the resource to return a pointer aligned to ", kDeviceAlignment,
                  " bytes, but it returned ", ptr);
  }
  count_.add(1);
  bytes_.add(static_cast<int64_t>(bytes));
  return ptr;
}

void MemoryResource::deallocate(void* ptr, size_t bytes, const Stream& stream) {
  if (ptr == nullptr) return;
  FERRY_CHECK_AS(DeviceError, !stream.is_cpu(),
                 "MemoryResource::deallocate: expected a stream on a device, but got ", stream);
  do_deallocate(ptr, bytes, stream);
  count_.remove(1);
  bytes_.remove(static_cast<int64_t>(bytes));
}

bool MemoryResource::record_stream(void* ptr, const Stream& allocation_stream,
                                   const Stream& stream) {
  if (ptr == nullptr || stream.is_cpu() || stream == allocation_stream) return true;
  return do_record_stream(ptr, allocation_stream, stream);
}

Stat MemoryResource::allocations() const { return count_.load(); }
Stat MemoryResource::allocated_bytes() const { return bytes_.load(); }

// ---- the resource table ----------------------------------------------------------------------

namespace {

constexpr int kResourceTableDevices = 128;  // DeviceIndex is int8_t

struct ResourceTable {
  std::array<std::atomic<MemoryResource*>, kNumDeviceTypes> per_type{};
  std::array<std::array<std::atomic<MemoryResource*>, kResourceTableDevices>, kNumDeviceTypes>
      per_device{};
};

ResourceTable& table() {
  static ResourceTable t;
  return t;
}

void check_device_type(DeviceType type, const char* what) {
  FERRY_CHECK_AS(DeviceError, type != DeviceType::CPU, what,
                 ": expected a sim or cuda device type (resources serve device memory), but got "
                 "cpu");
}

}  // namespace

MemoryResource* get_memory_resource(Device device) {
  check_device_type(device.type(), "get_memory_resource");
  const Device d = device.has_index() ? device : checked_device(device);
  if (const detail::ActivePool* pool = detail::active_pool(d)) return pool->resource;
  const auto type = static_cast<size_t>(d.type());
  if (MemoryResource* r = table().per_device[type][static_cast<size_t>(d.index())].load(
          std::memory_order_acquire)) {
    return r;
  }
  if (MemoryResource* r = table().per_type[type].load(std::memory_order_acquire)) return r;
  return caching_allocator();
}

MemoryResource* set_memory_resource(DeviceType type, MemoryResource* resource) {
  check_device_type(type, "set_memory_resource");
  return table().per_type[static_cast<size_t>(type)].exchange(resource, std::memory_order_acq_rel);
}

MemoryResource* set_memory_resource(Device device, MemoryResource* resource) {
  check_device_type(device.type(), "set_memory_resource");
  const Device d = checked_device(device);
  return table().per_device[static_cast<size_t>(d.type())][static_cast<size_t>(d.index())].exchange(
      resource, std::memory_order_acq_rel);
}

// ---- the tensor allocator --------------------------------------------------------------------

namespace {

// The DataPtr context of a device tensor's storage: enough to give the memory back, and the
// streams recorded for a resource that does not track them itself.
struct ResourceAllocation {
  MemoryResource* resource;
  void* ptr;
  size_t bytes;
  Stream stream;
  std::vector<Stream> deferred;  // guarded by deferred_mutex()
  // The resource's shared owner when it came from a MemPool that shares ownership: the resource
  // lives at least as long as the allocation.
  std::shared_ptr<MemoryResource> keep_alive;
};

std::mutex& deferred_mutex() {
  static std::mutex m;
  return m;
}

void release_allocation(void* context) {
  auto* a = static_cast<ResourceAllocation*>(context);
  try {
    // The last reference is gone, so no record_stream can race with this read. Ordering the
    // deallocating stream after the recorded ones keeps the contract for untracking resources.
    for (const Stream& s : a->deferred) wait_stream(a->stream, s);
    a->resource->deallocate(a->ptr, a->bytes, a->stream);
    a->keep_alive.reset();  // may destroy the resource: a fixed range returns to its upstream
  } catch (const std::exception& e) {
    // A deleter runs in destructors and must not throw; losing the memory is the lesser harm.
    std::fprintf(stderr, "ferry: failed to free %zu bytes of device memory on %s: %s\n", a->bytes,
                 a->stream.str().c_str(), e.what());
  }
  delete a;
}

// The context of a view storage (device_view_storage): the allocation's own storage, kept alive.
struct DeviceView {
  Storage block;
};
void release_device_view(void* context) { delete static_cast<DeviceView*>(context); }

// The storage that owns `storage`'s allocation: itself, or the block a view aliases.
const Storage& owning_storage(const Storage& storage) {
  if (storage.defined() && storage.data_ptr().deleter() == &release_device_view) {
    return static_cast<const DeviceView*>(storage.data_ptr().context())->block;
  }
  return storage;
}

class DeviceTensorAllocator final : public Allocator {
 public:
  explicit DeviceTensorAllocator(DeviceType type) : type_(type) {}

  DataPtr allocate(size_t nbytes, Device device) override {
    FERRY_CHECK_AS(DeviceError, device.type() == type_, "expected a ", type_, " device for the ",
                   type_, " tensor allocator, but got ", device);
    const Device d = device.has_index() ? device : checked_device(device);
    if (nbytes == 0) return DataPtr(nullptr, d);
    const Stream stream = current_stream(d);
    // The calling thread's innermost pool for the device, else the installed resource.
    const detail::ActivePool* pool = detail::active_pool(d);
    MemoryResource* resource = pool != nullptr ? pool->resource : get_memory_resource(d);
    void* ptr = resource->allocate(nbytes, stream);
    ResourceAllocation* context = nullptr;
    try {
      context = new ResourceAllocation{resource, ptr, nbytes,
                                       stream,   {},  pool != nullptr ? pool->owner : nullptr};
    } catch (...) {
      resource->deallocate(ptr, nbytes, stream);
      throw;
    }
    return DataPtr(ptr, context, &release_allocation, d);
  }

 private:
  DeviceType type_;
};

// Installed unconditionally: whichever of this and a backend's registration runs first, device
// tensors end up on the resources (the backend installs its raw allocator only if none is set).
// Creates no backend.
const bool kResourceAllocatorsInstalled = [] {
  set_allocator(DeviceType::Sim, device_tensor_allocator(DeviceType::Sim));
  set_allocator(DeviceType::CUDA, device_tensor_allocator(DeviceType::CUDA));
  return true;
}();

}  // namespace

Allocator* device_tensor_allocator(DeviceType type) {
  static std::array<DeviceTensorAllocator, kNumDeviceTypes> allocators{
      DeviceTensorAllocator(DeviceType::CPU), DeviceTensorAllocator(DeviceType::Sim),
      DeviceTensorAllocator(DeviceType::CUDA)};
  check_device_type(type, "device_tensor_allocator");
  return &allocators[static_cast<size_t>(type)];
}

Storage device_view_storage(const Storage& storage, size_t offset, size_t nbytes) {
  FERRY_CHECK(storage.defined(), "device_view_storage: expected a defined storage");
  Storage block = owning_storage(storage);
  if (!block.is_alias_of(storage)) {
    offset += static_cast<size_t>(static_cast<const char*>(storage.data()) -
                                  static_cast<const char*>(block.data()));
  }
  FERRY_CHECK(block.data_ptr().deleter() == &release_allocation,
              "device_view_storage: expected a storage of the device tensor allocator (or a view "
              "of one), but got one that is not");
  FERRY_CHECK(offset <= block.nbytes() && nbytes <= block.nbytes() - offset,
              "device_view_storage: expected bytes [", offset, ", ", offset + nbytes,
              ") to lie inside the device allocation of ", block.nbytes(), " bytes");
  void* data = static_cast<char*>(block.data()) + offset;
  const Device device = block.device();
  auto* view = new DeviceView{std::move(block)};
  return Storage(DataPtr(data, view, &release_device_view, device), nbytes);
}

MemoryResource* storage_memory_resource(const Storage& view) {
  const Storage& storage = owning_storage(view);
  if (!storage.defined() || storage.data_ptr().deleter() != &release_allocation) return nullptr;
  return static_cast<ResourceAllocation*>(storage.data_ptr().context())->resource;
}

Stream storage_allocation_stream(const Storage& view) {
  const Storage& storage = owning_storage(view);
  if (!storage.defined() || storage.data_ptr().deleter() != &release_allocation) return Stream();
  return static_cast<ResourceAllocation*>(storage.data_ptr().context())->stream;
}

// ---- record_stream ---------------------------------------------------------------------------

void record_stream(const Storage& view, const Stream& stream) {
  FERRY_CHECK(view.defined(), "record_stream: expected a defined storage");
  const Storage& storage = owning_storage(view);
  const DataPtr& data = storage.data_ptr();
  if (data.deleter() == &release_allocation) {
    // The context names the whole allocation, whatever view of it the caller holds.
    auto* a = static_cast<ResourceAllocation*>(data.context());
    if (stream.is_cpu() || stream == a->stream) return;
    FERRY_CHECK_AS(DeviceError, stream.device_type() == a->stream.device_type(),
                   "record_stream: expected a stream of the tensor's device type (",
                   a->stream.device_type(), "), but got ", stream);
    if (!a->resource->record_stream(a->ptr, a->stream, stream)) {
      std::lock_guard<std::mutex> lock(deferred_mutex());
      if (std::find(a->deferred.begin(), a->deferred.end(), stream) == a->deferred.end()) {
        a->deferred.push_back(stream);
      }
    }
    return;
  }
  if (storage.device().is_cpu()) {
    FERRY_CHECK(data.get() == nullptr || pinned_record_event(storage, stream),
                "record_stream: expected a device tensor or a tensor in pinned host memory, but "
                "got a cpu tensor in pageable memory");
    return;
  }
  // Device memory that ferry does not own (from_blob, the raw allocator): its owner (or the
  // backend's free, which waits for queued work) keeps it alive.
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  FERRY_CHECK(tensor.defined(),
              "record_stream: expected a defined tensor, but got an undefined one");
  record_stream(tensor.storage(), stream);
}

}  // namespace ferry::memory
