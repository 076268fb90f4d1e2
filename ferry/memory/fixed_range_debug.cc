// FixedRangeResource's invariant check: what the tests run after each step of their random
// sequences, and what check_invariants(device) runs for every shared sub-region.
#include "ferry/core/error.h"
#include "ferry/memory/fixed_range_resource.h"

namespace ferry::memory {

void FixedRangeResource::check_invariants() const {
  Lock lock(mutex_);
  check_invariants_locked();
}

void FixedRangeResource::check_invariants_locked() const {
  const auto fail = [this](const auto&... parts) {
    FERRY_FAIL_AS(Error, name_, ": fixed range invariant violated: ", parts...);
  };
  size_t covered = 0;
  size_t free_blocks = 0;
  int64_t allocations = 0, allocated = 0, active = 0, events = 0;
  const Block* prev = nullptr;
  if (head_ == nullptr || head_->ptr != base_ || head_->prev != nullptr) {
    fail("the first block does not start the range");
  }
  for (const Block* b = head_; b != nullptr; prev = b, b = b->next) {
    const void* at = b->ptr;
    if (b->prev != prev) fail("block ", at, " has a broken prev link");
    if (b->ptr != base_ + covered) fail("block ", at, " should start at offset ", covered);
    if (b->size == 0 || b->size % 512 != 0) fail("block ", at, " has size ", b->size);
    covered += b->size;
    const auto bytes = static_cast<int64_t>(b->size);
    switch (b->state) {
      case BlockState::kAllocated: {
        auto it = allocated_.find(b->ptr);
        if (it == allocated_.end() || it->second != b) {
          fail("allocated block ", at, " is missing from the allocated table");
        }
        if (b->requested == 0 || b->requested > b->size || b->event_count != 0) {
          fail("allocated block ", at, " has requested ", b->requested, " of ", b->size,
               " bytes and ", b->event_count, " events");
        }
        ++allocations;
        allocated += bytes;
        active += bytes;
        break;
      }
      case BlockState::kAwaitingEvents:
        if (b->event_count <= 0) fail("block ", at, " awaits events but has none");
        active += bytes;
        events += b->event_count;
        break;
      case BlockState::kFree:
        if (b->event_count != 0 || !b->uses.empty()) {
          fail("free block ", at, " still has events or recorded streams");
        }
        // A reclaim leaves idle blocks beside blocks a stream owns (see reclaim_other_streams);
        // neighbours with the same owner are always merged.
        if (prev != nullptr && prev->state == BlockState::kFree && prev->owner == b->owner) {
          fail("free blocks ", static_cast<const void*>(prev->ptr), " and ", at,
               " could merge but were not merged");
        }
        if (free_.count(const_cast<Block*>(b)) != 1) fail("free block ", at, " is not free-listed");
        ++free_blocks;
        break;
    }
  }
  if (covered != size_) fail("the blocks cover ", covered, " bytes of ", size_);
  if (free_.size() != free_blocks) {
    fail("the free set holds ", free_.size(), " blocks, but ", free_blocks, " are free");
  }
  if (static_cast<int64_t>(allocated_.size()) != allocations) {
    fail("the allocated table has ", allocated_.size(), " entries, but ", allocations,
         " blocks are allocated");
  }
  const size_t queued = pending_.count_queued();
  if (queued != pending_.size() || static_cast<int64_t>(queued) != events) {
    fail(queued, " entries are queued, ", pending_.size(), " counted, and blocks expect ", events);
  }
  const auto check = [&](const char* name, const Stat& stat, int64_t expected) {
    if (stat.current != expected) {
      fail("stats say ", name, " = ", stat.current, ", but the blocks add up to ", expected);
    }
    if (stat.peak < stat.current || stat.allocated - stat.freed != stat.current) {
      fail("stat ", name, " is inconsistent");
    }
  };
  check("allocation", allocation_, allocations);
  check("allocated_bytes", allocated_bytes_, allocated);
  check("active_bytes", active_bytes_, active);
}

}  // namespace ferry::memory
