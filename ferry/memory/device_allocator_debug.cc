// Looking inside one device's caching allocator: snapshots of segments and blocks, and the
// invariant check that tests run after every step of their stress loops.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/memory/device_allocator.h"

namespace ferry::memory::detail {

Snapshot DeviceAllocator::snapshot() const {
  Snapshot snap;
  snap.device = device_;
  Lock lock(mutex_);
  snap.segments.reserve(segments_.size());
  for (const auto& [base, seg] : segments_) {
    SegmentInfo info;
    info.address = base;
    info.size = seg.size;
    info.stream = Stream(device_, seg.stream);
    info.is_large = !seg.pool->is_small;
    for (const Block* b = seg.head; b != nullptr; b = b->next) {
      info.blocks.push_back(BlockInfo{b->ptr, b->size, b->requested, b->state});
      if (b->state == BlockState::kAllocated) info.allocated_bytes += b->size;
      if (b->state != BlockState::kFree) info.active_bytes += b->size;
    }
    snap.segments.push_back(std::move(info));
  }
  return snap;
}

namespace {

// Counts recomputed from the blocks, to compare with the running stats.
struct Tally {
  int64_t allocation = 0, allocated_bytes = 0, requested_bytes = 0, active = 0, active_bytes = 0;
  int64_t segment = 0, reserved_bytes = 0, oversize_allocations = 0;
  int64_t oversize_segments = 0, events = 0;
};

}  // namespace

void DeviceAllocator::check_invariants() const {
  Lock lock(mutex_);
  const auto fail = [this](const auto&... parts) {
    FERRY_FAIL_AS(Error, device_, ": caching allocator invariant violated: ", parts...);
  };
  Tally t;
  std::unordered_map<const BlockPool*, size_t> free_in_pool;
  const char* previous_end = nullptr;
  for (const auto& [base, seg] : segments_) {
    if (previous_end != nullptr && base < previous_end) {
      fail("segment at ", static_cast<const void*>(base), " overlaps the one before it");
    }
    previous_end = base + seg.size;
    ++t.segment;
    t.reserved_bytes += static_cast<int64_t>(seg.size);
    if (seg.oversize) ++t.oversize_segments;
    if (seg.pool != &small_ && seg.pool != &large_) fail("segment with a foreign pool");
    if (seg.head == nullptr || seg.head->ptr != base || seg.head->prev != nullptr) {
      fail("segment at ", static_cast<const void*>(base), " does not start with its head block");
    }
    size_t covered = 0;
    const Block* prev = nullptr;
    for (const Block* b = seg.head; b != nullptr; prev = b, b = b->next) {
      const void* at = b->ptr;
      if (b->prev != prev) fail("block ", at, " has a broken prev link");
      if (b->ptr != base + covered) {
        fail("block ", at, " should start at offset ", covered, " of segment ",
             static_cast<const void*>(base), " (a gap or an overlap)");
      }
      if (b->size == 0 || b->size % 512 != 0) fail("block ", at, " has size ", b->size);
      if (b->pool != seg.pool || b->stream != seg.stream) {
        fail("block ", at, " disagrees with its segment about its pool or stream");
      }
      covered += b->size;
      const auto bytes = static_cast<int64_t>(b->size);
      switch (b->state) {
        case BlockState::kAllocated: {
          auto it = allocated_.find(b->ptr);
          if (it == allocated_.end() || it->second != b) {
            fail("allocated block ", at, " is missing from the allocated table");
          }
          if (b->requested > b->size || b->event_count != 0) {
            fail("allocated block ", at, " has requested ", b->requested, " of ", b->size,
                 " bytes and ", b->event_count, " events");
          }
          ++t.allocation;
          t.allocated_bytes += bytes;
          t.requested_bytes += static_cast<int64_t>(b->requested);
          ++t.active;
          t.active_bytes += bytes;
          if (b->oversize) ++t.oversize_allocations;
          break;
        }
        case BlockState::kAwaitingEvents:
          if (b->event_count <= 0) fail("block ", at, " awaits events but has none");
          ++t.active;
          t.active_bytes += bytes;
          t.events += b->event_count;
          break;
        case BlockState::kFree:
          if (b->event_count != 0 || !b->uses.empty()) {
            fail("free block ", at, " still has events or recorded streams");
          }
          if (prev != nullptr && prev->state == BlockState::kFree) {
            fail("free blocks ", static_cast<const void*>(prev->ptr), " and ", at,
                 " are neighbours but were not merged");
          }
          if (seg.pool->blocks.count(const_cast<Block*>(b)) != 1) {
            fail("free block ", at, " is not in its pool");
          }
          ++free_in_pool[seg.pool];
          break;
      }
    }
    if (covered != seg.size) {
      fail("the blocks of segment ", static_cast<const void*>(base), " cover ", covered,
           " bytes of ", seg.size);
    }
  }
  for (const BlockPool* pool : {&small_, &large_}) {
    if (pool->blocks.size() != free_in_pool[pool]) {
      fail(pool->is_small ? "small" : "large", " pool holds ", pool->blocks.size(),
           " blocks, but the segments have ", free_in_pool[pool], " free blocks in it");
    }
  }
  if (static_cast<int64_t>(allocated_.size()) != t.allocation) {
    fail("the allocated table has ", allocated_.size(), " entries, but ", t.allocation,
         " blocks are allocated");
  }
  const size_t queued = pending_.count_queued();
  if (queued != pending_.size() || static_cast<int64_t>(queued) != t.events) {
    fail(queued, " events are queued, ", pending_.size(), " counted, and blocks expect ", t.events);
  }
  const auto check = [&](const char* name, const Stat& stat, int64_t expected) {
    if (stat.current != expected) {
      fail("stats say ", name, " = ", stat.current, ", but the blocks add up to ", expected);
    }
    if (stat.peak < stat.current || stat.allocated - stat.freed != stat.current) {
      fail("stat ", name, " is inconsistent (current ", stat.current, ", peak ", stat.peak,
           ", allocated ", stat.allocated, ", freed ", stat.freed, ")");
    }
  };
  check("allocation", stats_.allocation, t.allocation);
  check("allocated_bytes", stats_.allocated_bytes, t.allocated_bytes);
  check("requested_bytes", stats_.requested_bytes, t.requested_bytes);
  check("active", stats_.active, t.active);
  check("active_bytes", stats_.active_bytes, t.active_bytes);
  check("segment", stats_.segment, t.segment);
  check("reserved_bytes", stats_.reserved_bytes, t.reserved_bytes);
  check("oversize_allocations", stats_.oversize_allocations, t.oversize_allocations);
  check("oversize_segments", stats_.oversize_segments, t.oversize_segments);
}

}  // namespace ferry::memory::detail
