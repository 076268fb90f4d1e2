// Shared regions: PipeSwitch's insertSharedCache / clearSharedCache as an API. The caching
// allocator adopts memory it does not own (typically a large allocation imported from another
// process with IpcMapping) and serves the allocations of one stream from a named sub-region of
// it; dropping a sub-region forgets its bookkeeping and never frees the memory.
// Invariants: sub-regions of a region never overlap and lie inside it; a stream is served by at
// most one sub-region per device, and then only by it (a full sub-region raises
// OutOfMemoryError instead of falling back to the backend); region bytes are counted in
// Stats::shared_bytes, never in reserved_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/stream.h"

namespace ferry::memory {

struct SubRegionInfo {
  std::string name;
  size_t offset = 0;  // from the region's base
  size_t size = 0;
  Stream stream;
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

// Registers [base, base + size) of `device` as shared region `name`. The allocator never frees
// or unmaps it; the caller keeps it mapped until drop_shared_region returns. `base` must be
// 512-byte aligned, `size` positive; the name must be new on the device and the range must not
// overlap another region of it.
void adopt_shared_region(Device device, const std::string& name, void* base, size_t size);

// From now on, allocations on `stream` (on the region's device) are served from bytes
// [offset, offset + size) of region `region`: best fit, merged on free, and split as in the small
// pool whatever the size (any remainder of at least 512 bytes is split off; max_split_size does
// not apply). PipeSwitch splits any remainder too: a fixed budget cannot afford the large pool's
// up to 1 MiB of slack per block. offset and size must be multiples of 512, the range inside the
// region and clear of its other sub-regions, and the stream not already bound to a sub-region.
// Allocations the stream made before keep coming from (and returning to) the ordinary pools.
void add_sub_region(Device device, const std::string& region, const std::string& name,
                    size_t offset, size_t size, const Stream& stream);

// Forgets sub-region `name`: waits for the events of its blocks that were freed with
// record_stream, unbinds its stream and drops its blocks; the memory is not freed. All or
// nothing: if any block of it is still allocated, raises ferry::Error listing them (address and
// size) and changes nothing; free the tensors that use the sub-region first.
void drop_sub_region(Device device, const std::string& region, const std::string& name);
// Drops every sub-region of `region` (all or nothing, as above); the region stays adopted.
void drop_sub_regions(Device device, const std::string& region);
// Drops every sub-region, then forgets the region itself.
void drop_shared_region(Device device, const std::string& region);

// The regions adopted on `device`, in address order.
std::vector<SharedRegionInfo> shared_regions(Device device);

}  // namespace ferry::memory
