// Statistics and snapshots of the memory layer: what the caching device allocator holds and hands
// out, per device. Every Stat keeps current == allocated - freed and peak >= current, where peak is
// the highest current since the last reset_peak_stats().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/stream.h"

namespace ferry::memory {

struct Stat {
  int64_t current = 0;    // now
  int64_t peak = 0;       // highest `current` since the last reset of peaks
  int64_t allocated = 0;  // everything ever added
  int64_t freed = 0;      // everything ever removed

  void increase(int64_t amount) {
    current += amount;
    allocated += amount;
    peak = std::max(peak, current);
  }
  void decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void reset_peak() { peak = current; }
  void reset_accumulated() {
    allocated = current;
    freed = 0;
  }
};

// One device's counters of the caching allocator. Byte counts are block sizes (requests rounded
// up to 512 bytes), except requested_bytes. Shared sub-regions are resources of their own (fixed
// ranges over adopted memory, shared_region.h): their bytes are counted in shared_bytes and
// never in reserved_bytes, and allocations served from them are not counted here at all but per
// sub-region (shared_regions(), SubRegionInfo) and in the snapshot's sub-region segments.
struct Stats {
  Stat allocation;       // live allocations (blocks handed out and not freed)
  Stat allocated_bytes;  // their bytes
  Stat requested_bytes;  // the bytes callers asked for
  // Allocated blocks plus freed blocks still waiting for their recorded streams.
  Stat active;
  Stat active_bytes;
  Stat segment;         // backend allocations the allocator holds (in use or cached)
  Stat reserved_bytes;  // their bytes
  Stat shared_bytes;    // bytes of the device's shared sub-regions (defined, not dropped)
  // Allocations and segments of at least max_split_size (never split).
  Stat oversize_allocations;
  Stat oversize_segments;
  int64_t num_alloc_retries = 0;  // backend allocations retried after freeing cached memory
  int64_t num_ooms = 0;           // OutOfMemoryErrors raised
  int64_t num_device_alloc = 0;   // backend malloc calls that succeeded
  int64_t num_device_free = 0;    // backend free calls
  int64_t num_gc_frees = 0;       // segments released by the garbage-collection threshold
  // Allocations that found the backend short while another thread was returning cached
  // segments to it, and waited for that before retrying (each wait counts once).
  int64_t num_release_waits = 0;
  // Events that could not be recorded when a record_stream'ed block was freed; the block then
  // waited for the whole stream to be idle or synchronized instead.
  int64_t num_event_record_failures = 0;
  size_t max_split_size = 0;  // the setting in effect (SIZE_MAX: unlimited)
};

// ---- snapshots -------------------------------------------------------------------------------

enum class BlockState : uint8_t {
  kAllocated,       // handed out, not freed
  kAwaitingEvents,  // freed, but work on a recorded stream may still use it
  kFree,            // cached, ready for reuse on its stream
};
// "allocated", "awaiting events", "free".
std::string_view block_state_name(BlockState state);

struct BlockInfo {
  void* address = nullptr;
  size_t size = 0;
  size_t requested_size = 0;  // 0 unless allocated
  BlockState state = BlockState::kFree;
};

// A segment is one backend allocation, or one shared sub-region; its blocks tile it exactly, in
// address order.
struct SegmentInfo {
  void* address = nullptr;
  size_t size = 0;
  // The only stream whose allocations its blocks serve; the CPU stream (none) for a sub-region,
  // whose blocks serve whichever streams its pool's users allocate on.
  Stream stream;
  bool is_large = false;       // large pool (requests above 1 MiB) or small pool; false: sub-region
  std::string shared_region;   // for sub-regions: the region's name; empty otherwise
  std::string sub_region;      // for sub-regions: the sub-region's name
  size_t allocated_bytes = 0;  // sum of its allocated blocks
  size_t active_bytes = 0;     // allocated plus awaiting events
  std::vector<BlockInfo> blocks;
};

struct Snapshot {
  Device device;
  std::vector<SegmentInfo> segments;  // in address order
};

// "512 B", "1.50 KiB", "20.00 MiB", "4.00 GiB".
std::string format_bytes(size_t bytes);

}  // namespace ferry::memory
