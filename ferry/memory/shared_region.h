// Shared regions: PipeSwitch's insertSharedCache / clearSharedCache as an API, over fixed-range
// resources and MemPools. A worker adopts memory it does not own (typically one large allocation
// imported from another process with IpcMapping) and carves named sub-regions out of it; each
// sub-region is a FixedRangeResource over its bytes, reached through the MemPool that
// add_sub_region returns and that the sub-region's user enters with UseMemPool. Nothing else
// allocates from a sub-region: not other threads, and not other code on the same streams.
// Dropping a sub-region forgets its bookkeeping and never frees the memory.
// Invariants: sub-regions of a region never overlap and lie inside it; a full sub-region raises
// OutOfMemoryError naming it instead of falling back to other memory; region bytes in use by
// sub-regions are counted in Stats::shared_bytes, never in reserved_bytes; drops are all or
// nothing, list the live blocks that prevent them, and wait for recorded streams first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/memory/mem_pool.h"
#include "ferry/memory/stats.h"

namespace ferry::memory {

struct SubRegionInfo {
  std::string name;
  size_t offset = 0;  // from the region's base
  size_t size = 0;
  size_t allocated_bytes = 0;  // in live allocations
  int64_t allocations = 0;
  size_t active_bytes = 0;  // allocated, plus freed blocks still waiting for recorded streams
};

struct SharedRegionInfo {
  std::string name;
  Device device;
  void* base = nullptr;
  size_t size = 0;
  std::vector<SubRegionInfo> sub_regions;  // in offset order
};

// Registers [base, base + size) of `device` as shared region `name`. Nothing frees or unmaps
// it; the caller keeps it mapped until drop_shared_region returns. `base` must be 512-byte
// aligned, `size` positive; the name must be new on the device and the range must overlap
// neither another region of it nor the caching allocator's own memory.
void adopt_shared_region(Device device, const std::string& name, void* base, size_t size);

// Makes bytes [offset, offset + size) of region `region` the sub-region `name` and returns its
// pool. Device tensors come from it only while a thread has entered the pool:
//   ferry::memory::UseMemPool use(pool);  // on the pool's device, until the scope ends
// Inside a sub-region: best fit, merged on free, any remainder of at least 512 bytes split off
// (a fixed budget cannot afford the large pool's up to 1 MiB of slack per block; PipeSwitch
// splits every remainder too), record_stream honoured, and stream-ordered reuse as
// FixedRangeResource describes. offset and size must be multiples of 512, the range inside the
// region and clear of its other sub-regions. Copies of the pool stay valid handles after the
// sub-region is dropped, but allocating through them then raises ferry::Error.
MemPool add_sub_region(Device device, const std::string& region, const std::string& name,
                       size_t offset, size_t size);
// The pool of an existing sub-region (the one add_sub_region returned).
MemPool sub_region_pool(Device device, const std::string& region, const std::string& name);

// Forgets sub-region `name`: waits for the events of its blocks that were freed with
// record_stream, then drops its bookkeeping; the memory is not freed. All or nothing: if any
// block of it is still allocated, raises ferry::Error listing them (address and size) and
// changes nothing; free the tensors that use the sub-region first.
void drop_sub_region(Device device, const std::string& region, const std::string& name);
// Drops every sub-region of `region` (all or nothing, as above); the region stays adopted.
void drop_sub_regions(Device device, const std::string& region);
// Drops every sub-region, then forgets the region itself.
void drop_shared_region(Device device, const std::string& region);

// The regions adopted on `device`, in address order.
std::vector<SharedRegionInfo> shared_regions(Device device);

namespace detail {
// For the caching allocator's snapshot and check_invariants: one segment per sub-region, and
// each sub-region's own invariants plus Stats::shared_bytes against the sub-regions' sizes.
std::vector<SegmentInfo> shared_region_segments(Device device);
void check_shared_region_invariants(Device device);
}  // namespace detail

}  // namespace ferry::memory
