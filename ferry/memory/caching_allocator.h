// The caching device allocator: PyTorch's CUDACachingAllocator semantics, written once above the
// backend contract so sim and CUDA share it. Per device it keeps small and large pools of free
// blocks ordered by (stream, size, address) and never lets a block cross streams; blocks split and
// merge inside the backend segments they come from, and every byte of a segment is in exactly one
// block. The default MemoryResource for device tensors.
#pragma once

#include <cstddef>
#include <optional>

#include "ferry/core/device.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/memory/stats.h"

namespace ferry::memory {

// Requests are rounded up to multiples of 512 bytes. Requests of at most 1 MiB come from 2 MiB
// segments (the small pool), requests below 10 MiB from 20 MiB segments, larger ones from
// segments rounded up to 2 MiB (the large pool).
inline constexpr size_t kMinBlockSize = 512;
inline constexpr size_t kSmallSize = size_t{1} << 20;
inline constexpr size_t kSmallBuffer = size_t{2} << 20;
inline constexpr size_t kLargeBuffer = size_t{20} << 20;
inline constexpr size_t kMinLargeAlloc = size_t{10} << 20;
inline constexpr size_t kRoundLarge = size_t{2} << 20;

// Stream-ordering contract (MemoryResource's, made concrete):
// - A block belongs to the stream it was allocated on. After deallocate it is reused only by
//   allocations on that same stream, with no host synchronization: the stream's own order makes
//   the reuse safe.
// - record_stream(ptr, alloc, s) for another stream s adds s to the block's uses. At deallocate,
//   an event is recorded on each such stream, and the block goes back to its pool only when all
//   of them have completed (polled on later allocations; waited on by empty_cache and before an
//   out-of-memory error). If an event cannot be recorded, the block waits for that whole stream
//   instead (idle when polled, or synchronized); deallocate still succeeds. deallocate on a
//   stream other than the allocation's counts as a record_stream of it.
// - An allocation that misses the cache calls the backend. If that fails, the allocator releases
//   cached segments that are entirely free, retries, then waits for pending events, releases
//   again and retries, then waits for segments other threads are still returning to the backend
//   and retries, and only then raises OutOfMemoryError. Stats are the same after it as before
//   it, apart from the released cache and the retry/wait/OOM counters.
// - Cached allocate/free make no backend or system call (beyond polling pending events); blocking
//   backend calls (free, event synchronize) are never made while holding a device's lock.
// Thread-safe: one mutex per device.
class CachingAllocator final : public MemoryResource {
 public:
  // The process-wide instance (serves every Sim and CUDA device).
  static CachingAllocator& instance();

  Stats stats(Device device) const;
  void reset_peak_stats(Device device);
  void reset_accumulated_stats(Device device);
  // Waits for pending events, then returns every cached segment that is entirely free to the
  // backend. Allocated blocks and shared regions (and their sub-regions) are untouched.
  void empty_cache(Device device);
  // Caps the memory this allocator reserves on `device` at fraction * total (0 < fraction <= 1).
  void set_memory_fraction(double fraction, Device device);
  // The cap set for `device`, if any.
  std::optional<double> memory_fraction(Device device) const;
  // The allocator's segments and, beside them, one segment per shared sub-region of the device
  // (shared_region.h), in address order.
  Snapshot snapshot(Device device) const;
  // Raises ferry::Error describing the first violated invariant: blocks tile their segments
  // exactly (so no two blocks overlap), free neighbours are merged, the pools hold exactly the
  // free blocks, the allocated table exactly the allocated ones, pending blocks have events, and
  // the stats add up to what the blocks say; the same for every shared sub-region of the device,
  // and shared_bytes equals the sub-regions' total size.
  void check_invariants(Device device) const;

 private:
  CachingAllocator() = default;
  void* do_allocate(size_t bytes, const Stream& stream) override;
  void do_deallocate(void* ptr, size_t bytes, const Stream& stream) override;
  bool do_record_stream(void* ptr, const Stream& allocation_stream, const Stream& stream) override;
};

// The default resource, as a MemoryResource.
MemoryResource* caching_allocator();

// Shorthands for CachingAllocator::instance().<name>(device). An index-less device means the
// current device of its type.
Stats stats(Device device);
void reset_peak_stats(Device device);
void reset_accumulated_stats(Device device);
void empty_cache(Device device);
void set_memory_fraction(double fraction, Device device);
std::optional<double> memory_fraction(Device device);
Snapshot snapshot(Device device);
void check_invariants(Device device);

}  // namespace ferry::memory
