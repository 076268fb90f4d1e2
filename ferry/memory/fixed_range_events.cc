// FixedRangeResource and other streams: the entries a freed block waits for (an event per
// recorded stream, or the whole stream when recording one failed), polled on allocation and
// waited on before an out-of-memory error and before the range is closed; and reclaiming free
// blocks that belong to other streams (an event recorded on each, waited for with the lock
// released) before an out-of-memory error. No wait is ever made while holding the lock.
#include <algorithm>
#include <exception>

#include "ferry/core/error.h"
#include "ferry/memory/device_allocator.h"
#include "ferry/memory/fixed_range_resource.h"

namespace ferry::memory {

void FixedRangeResource::insert_events(Block* block) {
  block->state = BlockState::kAwaitingEvents;
  std::vector<Stream> uses;
  uses.swap(block->uses);
  for (const Stream& s : uses) {
    const RawEvent event = detail::record_use(s);
    if (event == nullptr) ++num_event_record_failures_;
    auto q = std::find_if(pending_.begin(), pending_.end(),
                          [&](const PendingQueue& p) { return p.stream == s; });
    if (q == pending_.end()) q = pending_.insert(pending_.end(), PendingQueue{s, {}});
    q->entries.push_back(Pending{event, block, next_serial_++});
    ++block->event_count;
    ++pending_count_;
  }
}

void FixedRangeResource::process_events() {
  // Entries of one stream complete in the order they were made: stop at the first busy one.
  for (auto q = pending_.begin(); q != pending_.end();) {
    while (!q->entries.empty()) {
      const Pending p = q->entries.front();
      if (!p.synced && !detail::use_complete(q->stream, p.event)) break;
      q->entries.pop_front();
      --pending_count_;
      if (p.event != nullptr) detail::release_event(q->stream.device(), p.event);
      if (--p.block->event_count == 0) free_block(p.block, p.block->owner);
    }
    q = q->entries.empty() ? pending_.erase(q) : q + 1;
  }
}

void FixedRangeResource::synchronize_pending_locked(Lock& lock) {
  struct Wait {
    Stream stream;
    RawEvent event;  // null: synchronize the stream
    uint64_t last_serial;
    bool done = false;
  };
  std::vector<Wait> waits;
  for (const PendingQueue& q : pending_) {
    const bool whole_stream = std::any_of(q.entries.begin(), q.entries.end(),
                                          [](const Pending& p) { return p.event == nullptr; });
    waits.push_back(
        Wait{q.stream, whole_stream ? nullptr : q.entries.back().event, q.entries.back().serial});
  }
  lock.unlock();
  std::exception_ptr error;
  for (Wait& w : waits) {
    try {
      Backend& backend = detail::memory_backend(w.stream.device_type());
      if (w.event != nullptr) {
        backend.event_synchronize(w.stream.device_index(), w.event);
      } else {
        backend.stream_synchronize(w.stream.device_index(), w.stream.raw());
      }
      w.done = true;
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  lock.lock();
  // Marked rather than polled again: the stream may be busy with newer work by now.
  for (const Wait& w : waits) {
    if (!w.done) continue;
    for (PendingQueue& q : pending_) {
      if (q.stream != w.stream) continue;
      for (Pending& p : q.entries) {
        if (p.serial <= w.last_serial) p.synced = true;
      }
    }
  }
  process_events();
  if (error) std::rethrow_exception(error);
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
  std::vector<RawEvent> events;
  for (StreamId id : owners) events.push_back(detail::record_use(Stream(device_, id)));
  lock.unlock();
  std::exception_ptr error;
  std::vector<bool> done(owners.size(), false);
  Backend& backend = detail::memory_backend(device_.type());
  for (size_t i = 0; i < owners.size(); ++i) {
    try {
      if (events[i] != nullptr) {
        backend.event_synchronize(device_.index(), events[i]);
      } else {
        backend.stream_synchronize(device_.index(), Stream(device_, owners[i]).raw());
      }
      done[i] = true;
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  lock.lock();
  for (RawEvent e : events) {
    if (e != nullptr) detail::release_event(device_, e);
  }
  std::vector<Block*> idle_now;
  for (Block* b : free_) {
    const auto at = std::find(owners.begin(), owners.end(), b->owner);
    if (at != owners.end() && done[static_cast<size_t>(at - owners.begin())] &&
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
