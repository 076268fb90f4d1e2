// FixedRangeResource and other streams: the entries a freed block waits for (an event per
// recorded stream, or the whole stream when recording one failed; stream_event_queues.h), polled on
// allocation and waited on before an out-of-memory error and before the range is closed; and
// reclaiming free blocks that belong to other streams (an event recorded on each, waited for with
// the lock released) before an out-of-memory error. No wait is ever made while holding the lock.
#include <algorithm>
#include <exception>

#include "ferry/core/error.h"
#include "ferry/memory/device_allocator.h"
#include "ferry/memory/fixed_range_resource.h"

namespace ferry::memory {

void FixedRangeResource::insert_events(Block* block) {
  num_event_record_failures_ += pending_.record(block);
}

void FixedRangeResource::process_events() {
  pending_.process([this](Block* b) { free_block(b, b->owner); });
}

void FixedRangeResource::synchronize_pending_locked(Lock& lock) {
  pending_.synchronize_all(lock, [this](Block* b) { free_block(b, b->owner); });
}

bool FixedRangeResource::reclaim_other_streams(Lock& lock, StreamId stream) {
  std::vector<StreamId> owners;
  for (const Block* b : free_) {
    if (b->owner != kIdle && b->owner != stream &&
        std::find(owners.begin(), owners.end(), b->owner) == owners.end()) {
      owners.push_back(b->owner);
    }
  }
  if (owners.empty()) return false;
  // Blocks freed up to now (free_tick <= mark) have all their work queued before these events.
  const uint64_t mark = tick_;
  std::vector<detail::UseWait> waits;
  for (StreamId id : owners) {
    const Stream s(device_, id);
    waits.push_back(detail::UseWait{s, detail::record_use(s)});
  }
  lock.unlock();
  const std::exception_ptr error = detail::wait_for_uses(waits);
  lock.lock();
  for (const detail::UseWait& w : waits) {
    if (w.event != nullptr) detail::release_event(device_, w.event);
  }
  std::vector<Block*> idle_now;
  for (Block* b : free_) {
    const auto at = std::find(owners.begin(), owners.end(), b->owner);
    if (at != owners.end() && waits[static_cast<size_t>(at - owners.begin())].done &&
        b->free_tick <= mark) {
      idle_now.push_back(b);
    }
  }
  for (Block* b : idle_now) {
    free_.erase(b);
    b->owner = kIdle;
    free_.insert(b);
  }
  // Sweep the range once, merging free neighbours with the same owner, and idle blocks with
  // blocks of `stream` (the result is `stream`'s: it may use both at once). An idle block is not
  // merged into a block another stream still owns (as a free would): the allocation that asked
  // for this reclaim looks for idle blocks and its own next, under the same lock.
  const auto usable = [&](StreamId owner) { return owner == kIdle || owner == stream; };
  for (Block* b = head_; b != nullptr;) {
    Block* next = b->next;
    if (b->state == BlockState::kFree && next != nullptr && next->state == BlockState::kFree &&
        (b->owner == next->owner || (usable(b->owner) && usable(next->owner)))) {
      free_.erase(b);
      free_.erase(next);
      if (b->owner == kIdle) b->owner = next->owner;
      b->size += next->size;
      b->next = next->next;
      if (b->next != nullptr) b->next->prev = b;
      delete next;
      b->free_tick = ++tick_;
      free_.insert(b);
      continue;  // b may merge with its new neighbour too
    }
    b = next;
  }
  if (error) std::rethrow_exception(error);
  // Waited for every owner: another round can take what they freed meanwhile.
  return true;
}

}  // namespace ferry::memory
