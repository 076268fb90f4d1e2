// Internal to ferry/memory: one device's caching-allocator state — blocks, the small and large
// pools, segments, the allocated table and pending events — behind one mutex. Shared regions are
// not here: their sub-regions are fixed-range resources of their own (shared_region.h); this
// only counts their bytes in Stats::shared_bytes and refuses to adopt its own segments.
// The contract is CachingAllocator's (caching_allocator.h). Invariants (check_invariants):
// each segment is tiled exactly by a doubly linked list of blocks in address order; a block is
// in exactly one state; free blocks are in their pool and never next to another free block;
// allocated blocks are in `allocated_`; blocks awaiting events have event_count > 0 (one per
// pending entry, with or without an event).
#pragma once

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/backend.h"
#include "ferry/device/stream.h"
#include "ferry/memory/alloc_config.h"
#include "ferry/memory/stats.h"
#include "ferry/memory/stream_event_queues.h"

namespace ferry::memory::detail {

struct BlockPool;

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  size_t requested = 0;  // while allocated
  StreamId stream = 0;   // the only stream that may reuse it
  BlockPool* pool = nullptr;
  Block* prev = nullptr;  // neighbours in the segment, in address order
  Block* next = nullptr;
  BlockState state = BlockState::kFree;
  bool oversize = false;     // counted in Stats::oversize_allocations while allocated
  int event_count = 0;       // pending entries (in pending_) while kAwaitingEvents
  uint64_t free_tick = 0;    // when it last became free (least recently used first, for gc)
  std::vector<Stream> uses;  // record_stream'ed streams other than `stream`, while allocated
};

// Lookup key for the pools: (stream, size, address).
struct BlockKey {
  StreamId stream;
  size_t size;
  uintptr_t address;
};

struct BlockOrder {
  using is_transparent = void;
  static BlockKey key(const Block* b) {
    return {b->stream, b->size, reinterpret_cast<uintptr_t>(b->ptr)};
  }
  static BlockKey key(const BlockKey& k) { return k; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const BlockKey x = key(a), y = key(b);
    if (x.stream != y.stream) return x.stream < y.stream;
    if (x.size != y.size) return x.size < y.size;
    return x.address < y.address;
  }
};

struct BlockPool {
  std::set<Block*, BlockOrder> blocks;  // free blocks only
  bool is_small = false;
};

struct Segment {
  size_t size = 0;
  Block* head = nullptr;  // the block at the segment's base; never merged away
  BlockPool* pool = nullptr;
  StreamId stream = 0;
  bool oversize = false;  // counted in Stats::oversize_segments
};

class DeviceAllocator {
 public:
  explicit DeviceAllocator(Device device);
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // `stream` is on this device.
  void* malloc(size_t bytes, const Stream& stream);
  void free(void* ptr, size_t bytes, const Stream& stream);
  // `stream` has this device's type.
  void record_stream(void* ptr, const Stream& stream);

  Stats stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  void empty_cache();
  void set_memory_fraction(double fraction);
  std::optional<double> memory_fraction() const;
  Snapshot snapshot() const;
  void check_invariants() const;

  // For shared regions (shared_region.cc): the base of a segment of this allocator that overlaps
  // [base, base + size), or nullptr; and the running count of sub-region bytes on the device.
  const char* overlapping_segment(const char* base, size_t size) const;
  void add_shared_bytes(int64_t delta);

 private:
  using Lock = std::unique_lock<std::mutex>;
  Block* find_free_block(BlockPool& pool, StreamId stream, size_t size, size_t max_split);
  Block* allocate_from_backend(Lock& lock, BlockPool& pool, const Stream& stream, size_t size,
                               size_t requested, const AllocConfig& config);
  Block* new_segment(BlockPool& pool, StreamId stream, size_t size, size_t max_split);
  Block* hand_out(Block* block, size_t size, size_t requested, size_t max_split);
  void free_block(Block* block);
  // Events on each stream recorded for `block` (device_allocator_events.cc).
  void insert_events(Block* block);
  void process_events();
  // Waits, with the lock released, until every entry pending when called is complete; raises the
  // first backend error after marking what did complete.
  void synchronize_pending_events(Lock& lock);
  // Before an out-of-memory error: waits for segments that other threads are returning to the
  // backend and retries. nullptr when none were in flight or nothing fitted after them.
  Block* retry_after_releases(Lock& lock, BlockPool& pool, StreamId stream, size_t size,
                              size_t segment_bytes, size_t max_split);
  // Entirely free backend segments (one free block, no neighbours).
  std::vector<char*> free_segments() const;
  // Unlinks the segments at `bases` under the lock, then frees them with the lock released.
  void release_segments(Lock& lock, const std::vector<char*>& bases);
  bool collect_garbage(Lock& lock, size_t segment_bytes, double threshold);
  size_t total_memory() const;
  size_t largest_free_block() const;
  std::string oom_message(size_t requested, const Stream& stream) const;

  // Through the memory layer's override (tests wrap the backend to count or fail calls).
  Backend& backend() const { return memory_backend(device_.type()); }

  const Device device_;
  mutable std::mutex mutex_;
  BlockPool small_;
  BlockPool large_;
  std::map<char*, Segment> segments_;  // by base address
  std::unordered_map<void*, Block*> allocated_;
  StreamEventQueues<Block> pending_;  // record_stream'ed streams freed blocks wait for
  // Segments taken off the books whose backend free has not returned yet: their bytes are
  // neither reserved nor back in the backend. Waited for (released_) before an OOM is raised.
  int releases_in_flight_ = 0;
  uint64_t release_generation_ = 0;  // bumped each time a release_segments call finishes
  std::condition_variable released_;
  Stats stats_;
  std::optional<double> fraction_;
  size_t allowed_ = SIZE_MAX;  // fraction_ * the total memory when the fraction was set
  uint64_t tick_ = 0;
};

// The state of `device` (a Sim or CUDA device with an index), created on first use and kept for
// the life of the process.
DeviceAllocator& device_allocator(Device device);

// `device` checked and with its index filled in (the current device when it has none); raises
// DeviceError naming `what` for a CPU device, which the caching allocator does not serve.
Device resolve_device(Device device, const char* what);

}  // namespace ferry::memory::detail
