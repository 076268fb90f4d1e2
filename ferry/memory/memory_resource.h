// MemoryResource: the interface between ferry's device tensors and whatever hands out their
// memory, in the style of RAPIDS RMM: public non-virtual allocate/deallocate forward to private
// virtuals, so checks and per-resource counters live in one place. The caching allocator is the
// default resource; users may install their own per device type or per device.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ferry/core/device.h"
#include "ferry/core/storage.h"
#include "ferry/device/stream.h"
#include "ferry/memory/stats.h"

namespace ferry {
class Tensor;
}

namespace ferry::memory {

// Device pointers from allocate() are aligned to at least this many bytes.
inline constexpr size_t kDeviceAlignment = 256;

// Stream-ordering contract (as RMM's device_memory_resource):
// - allocate(bytes, stream) returns memory that is ready for work queued on `stream` from now
//   on. Work on other streams must first be ordered after `stream` (an event or wait_stream).
// - deallocate(ptr, bytes, stream) says the memory is no longer needed once the work queued on
//   `stream` so far is done. The resource may hand it out again to later work on `stream` at
//   once, without waiting on the host. If other streams still use it, the caller must either
//   order `stream` after them, or call record_stream() for each of them before deallocating.
// - record_stream(ptr, allocation_stream, stream) declares that work queued on `stream` uses the
//   allocation made on `allocation_stream`. A resource that tracks this returns true and will not
//   reuse the memory before the work queued on every recorded stream up to the deallocate() is
//   done; one that does not returns false (the tensor allocator then makes the deallocating
//   stream wait for those streams instead).
// - `bytes` passed to deallocate must equal the bytes passed to allocate; `stream`'s device must
//   be the device the memory was allocated on.
// Every member is thread-safe. A resource must outlive the allocations it made, and must not be
// destroyed while it is installed.
class MemoryResource {
 public:
  MemoryResource() = default;
  MemoryResource(const MemoryResource&) = delete;
  MemoryResource& operator=(const MemoryResource&) = delete;
  virtual ~MemoryResource() = default;

  // Raises OutOfMemoryError when the memory cannot be had, ferry::Error on a bad argument or a
  // misbehaving resource (null or misaligned result). bytes == 0 returns nullptr.
  void* allocate(size_t bytes, const Stream& stream);
  // ptr == nullptr is a no-op.
  void deallocate(void* ptr, size_t bytes, const Stream& stream);
  // See the contract above. A CPU stream, or the allocation's own stream, needs nothing (true).
  bool record_stream(void* ptr, const Stream& allocation_stream, const Stream& stream);
  // Whether memory from one resource may be deallocated by the other.
  bool is_equal(const MemoryResource& other) const noexcept { return do_is_equal(other); }

  // What this resource has handed out and not taken back (counted here, for every resource).
  Stat allocations() const;
  Stat allocated_bytes() const;

 private:
  virtual void* do_allocate(size_t bytes, const Stream& stream) = 0;
  virtual void do_deallocate(void* ptr, size_t bytes, const Stream& stream) = 0;
  virtual bool do_is_equal(const MemoryResource& other) const noexcept { return this == &other; }
  virtual bool do_record_stream(void* /*ptr*/, const Stream& /*allocation_stream*/,
                                const Stream& /*stream*/) {
    return false;
  }

  struct Counter {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};
    std::atomic<int64_t> total{0};
    void add(int64_t n);
    void remove(int64_t n) { current.fetch_sub(n, std::memory_order_relaxed); }
    Stat load() const;
  };
  Counter count_;
  Counter bytes_;
};

// ---- which resource serves which device ------------------------------------------------------

// The resource for new tensors on `device` (an index-less device means the current one): the
// calling thread's innermost MemPool for the device (UseMemPool, mem_pool.h), else the one set
// for the device, else the one set for its type, else the caching allocator.
MemoryResource* get_memory_resource(Device device);
// Installs `resource` for every device of `type` (Sim or CUDA), or for one device; nullptr goes
// back to the default. Returns the previous setting (nullptr when it was the default). Tensors
// allocated earlier keep the resource they came from.
MemoryResource* set_memory_resource(DeviceType type, MemoryResource* resource);
MemoryResource* set_memory_resource(Device device, MemoryResource* resource);

// The ferry::Allocator that Storage uses for device tensors of `type`: it allocates on the
// calling thread's current stream of the device through get_memory_resource(device), and
// deallocates on that same stream, from whichever thread frees it. A tensor from a MemPool that
// shares ownership of its resource keeps the resource alive. Installed for Sim and CUDA when the
// library loads.
Allocator* device_tensor_allocator(DeviceType type);

// The resource and stream behind a storage made by device_tensor_allocator (nullptr / the CPU
// stream otherwise).
MemoryResource* storage_memory_resource(const Storage& storage);
Stream storage_allocation_stream(const Storage& storage);

// A storage of its own (own version counter, own nbytes) for the bytes [offset, offset + nbytes)
// of `storage`, which must be a storage made by device_tensor_allocator or such a view: the device
// counterpart of pinned_view_storage. It keeps the whole allocation alive (it is freed, on its
// allocation stream, when the last view and the storage itself are gone), and record_stream,
// storage_memory_resource and storage_allocation_stream on it act on the whole allocation. What a
// planned transfer (nn::batched_move) hands out per tensor when many small tensors land in one
// device block.
Storage device_view_storage(const Storage& storage, size_t offset, size_t nbytes);

// PyTorch's record_stream: the storage's memory is not reused until the work queued on `stream`
// when the storage is freed has completed. The whole allocation is protected, whatever view of
// it the tensor is. Pinned host storages are recorded in the pinned allocator; device memory that
// ferry does not own (from_blob) is left to its owner; recording the allocation's own stream or a
// CPU stream does nothing. Raises Error for pageable host memory or a stream of another device
// type.
void record_stream(const Storage& storage, const Stream& stream);
void record_stream(const Tensor& tensor, const Stream& stream);

}  // namespace ferry::memory
