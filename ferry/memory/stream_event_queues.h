// Internal to ferry/memory: the pending-use queues of record_stream, shared by the caching
// allocator (DeviceAllocator) and fixed ranges (FixedRangeResource). A freed item (a block) that
// other streams used gets one entry per such stream: an event from the pool recorded there, or,
// when recording fails, none, and the entry then waits for the whole stream (record_use).
// Guarantees: one queue per stream, in the order streams were first recorded; entries of a
// stream complete in the order they were made, so polling stops at the first busy one; every
// completed entry's event goes back to the pool, and `on_done(item)` runs once its last entry has;
// synchronize_all never waits while holding the caller's lock. Not thread-safe by itself: the
// caller holds its mutex around every call. Also declares what the queues stand on, which the
// pinned allocator uses too: the memory layer's backend (with its test override), the event
// pool, and record_use / use_complete (defined in device_allocator.cc and
// device_allocator_events.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/backend.h"
#include "ferry/device/stream.h"
#include "ferry/memory/stats.h"

namespace ferry::memory::detail {

// The backend the memory layer (caching and pinned allocators, the event pool) uses for `type`:
// the registered one, unless a test has put a wrapper in its place.
Backend& memory_backend(DeviceType type);
// Test seam: makes the memory layer call `backend` for `type` (nullptr: the registered backend
// again); returns the previous override. `backend` must forward to the registered backend, as
// handles (memory, streams, events) pass between the two, and must outlive its use. Swap it only
// while no allocation call is running.
Backend* set_memory_backend_override(DeviceType type, Backend* backend);

// Raw events from a per-device pool: created once, reused after their work is done (no backend
// call on the cached path). `device` is the device of the stream the event will be recorded on.
RawEvent acquire_event(Device device);
void release_event(Device device, RawEvent event);

// What a freed block (device or pinned) waits for on one stream it was used on: an event from
// the pool recorded there now, or null when recording failed, and the block then waits for the
// whole stream instead, which is later than needed but never too early. Never raises: it runs
// where the free is already done (a deleter), and giving up on the stream would let the block
// be reused under work still running on it.
RawEvent record_use(const Stream& stream);
// Whether the work a use entry waits for is done: its event, or the whole stream when it has
// none (see record_use).
bool use_complete(const Stream& stream, RawEvent event);

// One host wait: `event` on `stream`, or the whole stream when `event` is null.
struct UseWait {
  Stream stream;
  RawEvent event;
  uint64_t last_serial = 0;  // the queue's newest entry the wait covers
  bool done = false;
};

// Waits for each of `waits` in turn (the caller holds no lock), setting `done` on success; returns
// the first backend error, if any, after trying them all.
std::exception_ptr wait_for_uses(std::vector<UseWait>& waits);

// Item: a block with `BlockState state`, `std::vector<Stream> uses` and `int event_count`.
template <typename Item>
class StreamEventQueues {
 public:
  using Lock = std::unique_lock<std::mutex>;

  // Entries made and not yet seen complete.
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Entries held by the queues, counted one by one (check_invariants compares it with size()).
  size_t count_queued() const {
    size_t queued = 0;
    for (const Queue& q : queues_) queued += q.entries.size();
    return queued;
  }

  // Moves `item` to BlockState::kAwaitingEvents with one entry (counted in item->event_count) on
  // each stream of item->uses, which it empties; returns how many events could not be recorded.
  int64_t record(Item* item) {
    item->state = BlockState::kAwaitingEvents;
    std::vector<Stream> uses;
    uses.swap(item->uses);
    int64_t failures = 0;
    for (const Stream& s : uses) {
      const RawEvent event = record_use(s);
      if (event == nullptr) ++failures;
      auto q = std::find_if(queues_.begin(), queues_.end(),
                            [&](const Queue& p) { return p.stream == s; });
      if (q == queues_.end()) q = queues_.insert(queues_.end(), Queue{s, {}});
      q->entries.push_back(Entry{event, item, next_serial_++});
      ++item->event_count;
      ++count_;
    }
    return failures;
  }

  // Retires the entries seen complete (or marked synced); calls on_done(item) once an item's last
  // entry is retired (the caller frees it there).
  template <typename OnDone>
  void process(OnDone&& on_done) {
    // Entries of one stream complete in the order they were made: stop at the first busy one.
    for (auto q = queues_.begin(); q != queues_.end();) {
      while (!q->entries.empty()) {
        const Entry e = q->entries.front();
        if (!e.synced && !use_complete(q->stream, e.event)) break;
        q->entries.pop_front();
        --count_;
        if (e.event != nullptr) release_event(q->stream.device(), e.event);
        if (--e.item->event_count == 0) on_done(e.item);
      }
      q = q->entries.empty() ? queues_.erase(q) : q + 1;
    }
  }

  // Waits, with `lock` released, until every entry pending when called is complete, then
  // processes them; raises the first backend error after marking what did complete.
  template <typename OnDone>
  void synchronize_all(Lock& lock, OnDone&& on_done) {
    // One wait per stream: its last event covers the entries before it, and an entry without an
    // event needs the stream itself synchronized.
    std::vector<UseWait> waits;
    waits.reserve(queues_.size());
    for (const Queue& q : queues_) {
      const bool whole_stream = std::any_of(q.entries.begin(), q.entries.end(),
                                            [](const Entry& e) { return e.event == nullptr; });
      waits.push_back(UseWait{q.stream, whole_stream ? nullptr : q.entries.back().event,
                              q.entries.back().serial});
    }
    lock.unlock();
    // An event completed meanwhile may be re-recorded by another thread: waiting on it then waits
    // longer than needed, which is harmless, and its entries were complete anyway.
    const std::exception_ptr error = wait_for_uses(waits);
    lock.lock();
    // Marked rather than polled again: the stream may be busy with newer work by now, and a
    // stream-wide entry would then never look complete to a poll.
    for (const UseWait& w : waits) {
      if (!w.done) continue;
      for (Queue& q : queues_) {
        if (q.stream != w.stream) continue;
        for (Entry& e : q.entries) {
          if (e.serial <= w.last_serial) e.synced = true;
        }
      }
    }
    process(on_done);
    if (error) std::rethrow_exception(error);
  }

  // Gives every pending entry's event back to the pool without waiting (the owner is going away
  // and orders reuse by other means).
  void release_events() {
    for (const Queue& q : queues_) {
      for (const Entry& e : q.entries) {
        if (e.event != nullptr) release_event(q.stream.device(), e.event);
      }
    }
  }

 private:
  // What a freed item waits for on one stream. `event` is null when recording it failed: the
  // item then waits until the stream is seen idle or synchronized, later than needed but never
  // too early.
  struct Entry {
    RawEvent event;
    Item* item;
    uint64_t serial;      // from next_serial_: entries made before a synchronization have lower
    bool synced = false;  // set once a synchronization covered it; no need to poll any more
  };
  struct Queue {
    Stream stream;
    std::deque<Entry> entries;
  };

  std::vector<Queue> queues_;  // one per recorded stream, in record order
  size_t count_ = 0;
  uint64_t next_serial_ = 0;
};

}  // namespace ferry::memory::detail
