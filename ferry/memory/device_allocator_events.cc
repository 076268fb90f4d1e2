// record_stream at work: the entries a freed block waits for (an event per recorded stream, or,
// when recording one fails, the stream itself), polled on later allocations and waited on before
// an out-of-memory error and in empty_cache (record_use and use_complete also serve the fixed
// ranges of fixed_range_resource.h). Also the memory
// layer's backend override, the seam through which tests count and fail backend calls.
#include <algorithm>
#include <array>
#include <atomic>
#include <exception>

#include "ferry/core/error.h"
#include "ferry/memory/device_allocator.h"

namespace ferry::memory::detail {

void DeviceAllocator::insert_events(Block* block) {
  block->state = BlockState::kAwaitingEvents;
  std::vector<Stream> uses;
  uses.swap(block->uses);
  for (const Stream& s : uses) {
    const RawEvent event = record_use(s);
    if (event == nullptr) ++stats_.num_event_record_failures;
    auto q = std::find_if(pending_.begin(), pending_.end(),
                          [&](const PendingQueue& p) { return p.stream == s; });
    if (q == pending_.end()) q = pending_.insert(pending_.end(), PendingQueue{s, {}});
    q->events.push_back(PendingEvent{event, block, next_serial_++});
    ++block->event_count;
    ++pending_count_;
  }
}

void DeviceAllocator::process_events() {
  // Entries of one stream complete in the order they were made: stop at the first busy one.
  for (auto q = pending_.begin(); q != pending_.end();) {
    while (!q->events.empty()) {
      const PendingEvent pe = q->events.front();
      if (!pe.synced && !use_complete(q->stream, pe.event)) break;
      q->events.pop_front();
      --pending_count_;
      if (pe.event != nullptr) release_event(q->stream.device(), pe.event);
      if (--pe.block->event_count == 0) free_block(pe.block);
    }
    q = q->events.empty() ? pending_.erase(q) : q + 1;
  }
}

void DeviceAllocator::synchronize_pending_events(Lock& lock) {
  // One wait per stream: its last event covers the entries before it, and an entry without an
  // event needs the stream itself synchronized.
  struct Wait {
    Stream stream;
    RawEvent event;  // null: synchronize the stream
    uint64_t last_serial;
    bool done = false;
  };
  std::vector<Wait> waits;
  waits.reserve(pending_.size());
  for (const PendingQueue& q : pending_) {
    const bool whole_stream = std::any_of(q.events.begin(), q.events.end(),
                                          [](const PendingEvent& pe) { return !pe.event; });
    waits.push_back(
        Wait{q.stream, whole_stream ? nullptr : q.events.back().event, q.events.back().serial});
  }
  lock.unlock();
  // An event completed meanwhile may be re-recorded by another thread: waiting on it then waits
  // longer than needed, which is harmless, and its entries were complete anyway.
  std::exception_ptr error;
  for (Wait& w : waits) {
    try {
      if (w.event != nullptr) {
        backend().event_synchronize(w.stream.device_index(), w.event);
      } else {
        backend().stream_synchronize(w.stream.device_index(), w.stream.raw());
      }
      w.done = true;
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  lock.lock();
  // Marked rather than polled again: the stream may be busy with newer work by now, and a
  // stream-wide entry would then never look complete to a poll.
  for (const Wait& w : waits) {
    if (!w.done) continue;
    for (PendingQueue& q : pending_) {
      if (q.stream != w.stream) continue;
      for (PendingEvent& pe : q.events) {
        if (pe.serial <= w.last_serial) pe.synced = true;
      }
    }
  }
  process_events();
  if (error) std::rethrow_exception(error);
}

RawEvent record_use(const Stream& stream) {
  RawEvent event = nullptr;
  try {
    event = acquire_event(stream.device());
    memory_backend(stream.device_type()).event_record(stream.device_index(), event, stream.raw());
    return event;
  } catch (...) {
    if (event != nullptr) release_event(stream.device(), event);
    return nullptr;
  }
}

bool use_complete(const Stream& stream, RawEvent event) {
  Backend& backend = memory_backend(stream.device_type());
  return event != nullptr ? backend.event_query(stream.device_index(), event)
                          : backend.stream_query(stream.device_index(), stream.raw());
}

// ---- the backend override ----------------------------------------------------------------------

namespace {
std::array<std::atomic<Backend*>, kNumDeviceTypes>& overrides() {
  static std::array<std::atomic<Backend*>, kNumDeviceTypes> table{};
  return table;
}
}  // namespace

Backend& memory_backend(DeviceType type) {
  if (Backend* b = overrides()[static_cast<size_t>(type)].load(std::memory_order_acquire)) {
    return *b;
  }
  return get_backend(type);
}

Backend* set_memory_backend_override(DeviceType type, Backend* backend) {
  FERRY_CHECK_AS(DeviceError, type != DeviceType::CPU,
                 "set_memory_backend_override: expected a device type with a backend, but got ",
                 type);
  return overrides()[static_cast<size_t>(type)].exchange(backend, std::memory_order_acq_rel);
}

}  // namespace ferry::memory::detail
