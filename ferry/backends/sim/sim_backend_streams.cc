// SimBackend: streams, events, host functions and synchronization.
#include <cstdio>

#include "ferry/backends/sim/sim_backend.h"
#include "ferry/core/error.h"

namespace ferry::sim::detail {
namespace {

// Events are handed out as pointers to a heap shared_ptr, so that queued marks keep the event
// alive after event_destroy.
using EventBox = std::shared_ptr<SimEvent>;

SimEvent& event_of(RawEvent event, int device, const char* call) {
  FERRY_CHECK_AS(DeviceError, event != nullptr, "sim:", device, ": ", call,
                 ": expected an event, but got nullptr");
  SimEvent& e = **static_cast<EventBox*>(event);
  FERRY_CHECK_AS(DeviceError, e.device == device, "sim:", device, ": ", call,
                 ": expected an event of sim:", device, ", but it belongs to sim:", e.device);
  return e;
}

}  // namespace

SimStream& SimBackend::stream_of(int device, RawStream stream, const char* call) const {
  check_device(device, call);
  FERRY_CHECK_AS(DeviceError, stream != nullptr, "sim:", device, ": ", call,
                 ": expected a sim stream, but got nullptr");
  auto* s = static_cast<SimStream*>(stream);
  FERRY_CHECK_AS(DeviceError, s->device() == device, "sim:", device, ": ", call,
                 ": expected a stream of sim:", device, ", but it belongs to sim:", s->device());
  return *s;
}

std::shared_ptr<SimStream> SimBackend::new_stream(int device) {
  // Caller holds streams_mutex_.
  auto s = std::make_shared<SimStream>(device, next_serial_++, knobs_);
  streams_.push_back(s);
  return s;
}

void SimBackend::drain_all_streams() const {
  std::vector<std::shared_ptr<SimStream>> streams;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    streams = streams_;
  }
  for (const auto& s : streams) s->drain();
}

void SimBackend::device_synchronize(int device) {
  check_device(device, "device_synchronize");
  FERRY_CHECK_AS(DeviceError, !SimStream::on_worker_thread(), "sim:", device,
                 ": device_synchronize: expected a host thread, but it was called from a host "
                 "function running on a sim stream (it would wait for itself)");
  std::vector<std::shared_ptr<SimStream>> streams;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    streams = streams_;
  }
  for (const auto& s : streams) {
    if (s->device() == device) s->synchronize("device_synchronize");
  }
}

RawStream SimBackend::default_stream(int device) {
  check_device(device, "default_stream");
  auto& slot = default_streams_[static_cast<size_t>(device)];
  if (SimStream* s = slot.load(std::memory_order_acquire)) return s;
  std::lock_guard<std::mutex> lock(streams_mutex_);
  if (SimStream* s = slot.load(std::memory_order_acquire)) return s;
  SimStream* s = new_stream(device).get();
  slot.store(s, std::memory_order_release);
  return s;
}

RawStream SimBackend::stream_create(int device) {
  check_device(device, "stream_create");
  std::lock_guard<std::mutex> lock(streams_mutex_);
  return new_stream(device).get();
}

RawStream SimBackend::stream_create_with_priority(int device, int priority) {
  check_device(device, "stream_create_with_priority");
  const auto [least, greatest] = stream_priority_range(device);
  FERRY_CHECK_AS(DeviceError, priority <= least && priority >= greatest, "sim:", device,
                 ": stream_create_with_priority: expected a priority between ", least,
                 " (lowest) and ", greatest, " (highest), but got ", priority);
  // The sim records nothing more: each stream has its own worker thread, and the host's
  // scheduler, not the sim, decides which runs first.
  return stream_create(device);
}

std::pair<int, int> SimBackend::stream_priority_range(int device) {
  check_device(device, "stream_priority_range");
  return {0, -5};  // as CUDA reports on recent GPUs: lower numbers are higher priorities
}

void SimBackend::stream_destroy(int device, RawStream stream) {
  SimStream& s = stream_of(device, stream, "stream_destroy");
  // As with CUDA's null stream: the default stream outlives every other use of the device.
  if (stream == default_stream(device)) return;
  // Stopped but kept: events and queued waits may still refer to it.
  s.shutdown();
}

bool SimBackend::stream_query(int device, RawStream stream) {
  return stream_of(device, stream, "stream_query").query();
}

void SimBackend::stream_synchronize(int device, RawStream stream) {
  SimStream& s = stream_of(device, stream, "stream_synchronize");
  FERRY_CHECK_AS(DeviceError, !SimStream::on_worker_thread(), "sim:", device,
                 ": stream_synchronize: expected a host thread, but it was called from a host "
                 "function running on a sim stream");
  s.synchronize("stream_synchronize");
}

void SimBackend::stream_wait_event(int device, RawStream stream, RawEvent event) {
  SimStream& s = stream_of(device, stream, "stream_wait_event");
  FERRY_CHECK_AS(DeviceError, event != nullptr, "sim:", device,
                 ": stream_wait_event: expected an event, but got nullptr");
  SimEvent& e = **static_cast<EventBox*>(event);  // any device's event may be waited on
  if (e.shared != nullptr) {
    const uint64_t generation = e.shared->last_recorded();
    if (e.shared->done(generation)) return;
    SimOp op;
    op.kind = SimOp::Kind::kWaitShared;
    op.shared_event = e.shared;
    op.wait_seq = generation;
    s.enqueue(std::move(op), "stream_wait_event");
    return;
  }
  std::shared_ptr<SimStream> target;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    target = e.stream;
    seq = e.seq;
  }
  // Nothing to wait for: never recorded, already done, or earlier on this very stream.
  if (target == nullptr || target.get() == &s || target->done(seq)) return;
  SimOp op;
  op.kind = SimOp::Kind::kWait;
  op.wait_for = std::move(target);
  op.wait_seq = seq;
  s.enqueue(std::move(op), "stream_wait_event");
}

void SimBackend::launch_host_func(int device, RawStream stream, std::function<void()> fn) {
  SimStream& s = stream_of(device, stream, "launch_host_func");
  SimOp op;
  op.kind = SimOp::Kind::kHost;
  op.host = std::move(fn);
  s.enqueue(std::move(op), "launch_host_func");
}

RawEvent SimBackend::event_create(int device, bool enable_timing) {
  check_device(device, "event_create");
  return new EventBox(std::make_shared<SimEvent>(device, enable_timing));
}

RawEvent SimBackend::event_create_interprocess(int device) {
  check_device(device, "event_create_interprocess");
  auto event = std::make_shared<SimEvent>(device, /*timing=*/false);
  event->shared = std::make_shared<SharedEventState>(device);
  return new EventBox(std::move(event));
}

IpcHandle SimBackend::event_ipc_export(int device, RawEvent event) {
  SimEvent& e = event_of(event, device, "event_ipc_export");
  FERRY_CHECK_AS(DeviceError, e.shared != nullptr, "sim:", device,
                 ": event_ipc_export: expected an interprocess event (event_create_interprocess), "
                 "but got an event of this process only");
  return e.shared->export_handle();
}

RawEvent SimBackend::event_ipc_import(const IpcHandle& handle) {
  FERRY_CHECK_AS(DeviceError, handle.device.is_sim() && handle.device.has_index(),
                 "sim: event_ipc_import: expected a handle for a sim device, but got one for ",
                 handle.device);
  const int device = handle.device.index();
  check_device(device, "event_ipc_import");
  auto event = std::make_shared<SimEvent>(device, /*timing=*/false);
  event->shared = std::make_shared<SharedEventState>(handle);
  return new EventBox(std::move(event));
}

void SimBackend::event_destroy(int /*device*/, RawEvent event) {
  delete static_cast<EventBox*>(event);
}

void SimBackend::event_record(int device, RawEvent event, RawStream stream) {
  SimStream& s = stream_of(device, stream, "event_record");
  const EventBox& box = *static_cast<EventBox*>(event);
  SimEvent& e = event_of(event, device, "event_record");
  if (e.shared != nullptr) {
    const uint64_t generation = e.shared->begin_record();
    SimOp op;
    op.kind = SimOp::Kind::kSignal;
    op.shared_event = e.shared;
    op.wait_seq = generation;
    try {
      s.enqueue(std::move(op), "event_record");
    } catch (...) {
      e.shared->complete(generation);  // nothing will publish it: do not leave waiters hanging
      throw;
    }
    return;
  }
  // Lock order: event, then stream (inside enqueue). Workers take an event's lock only while
  // holding no stream lock.
  std::lock_guard<std::mutex> lock(e.mutex);
  uint64_t seq;
  if (e.timing) {
    SimOp op;
    op.kind = SimOp::Kind::kMark;
    op.event = box;
    seq = s.enqueue(std::move(op), "event_record");
  } else {
    // A plain event needs no queue entry: it is complete once the stream gets this far.
    seq = s.tail();
  }
  e.stream = s.shared_from_this();
  e.seq = seq;
  // The time of an earlier record no longer counts, even if that record had the same position
  // in another stream's queue.
  e.stamped_seq = 0;
}

bool SimBackend::event_query(int device, RawEvent event) {
  SimEvent& e = event_of(event, device, "event_query");
  if (e.shared != nullptr) return e.shared->query(e.shared->last_recorded(), "event_query");
  std::lock_guard<std::mutex> lock(e.mutex);
  return e.stream == nullptr || e.stream->done(e.seq);
}

void SimBackend::event_synchronize(int device, RawEvent event) {
  SimEvent& e = event_of(event, device, "event_synchronize");
  if (e.shared != nullptr) {
    const uint64_t generation = e.shared->last_recorded();
    FERRY_CHECK_AS(DeviceError, !SimStream::on_worker_thread() || e.shared->done(generation),
                   "sim:", device,
                   ": event_synchronize: expected a host thread, but it was called from a host "
                   "function running on a sim stream");
    e.shared->wait(generation, "event_synchronize");
    return;
  }
  std::shared_ptr<SimStream> target;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    target = e.stream;
    seq = e.seq;
  }
  if (target == nullptr) return;
  FERRY_CHECK_AS(DeviceError, !SimStream::on_worker_thread() || target->done(seq), "sim:", device,
                 ": event_synchronize: expected a host thread, but it was called from a host "
                 "function running on a sim stream");
  target->wait(seq);
}

float SimBackend::event_elapsed_ms(int device, RawEvent start, RawEvent end) {
  auto stamp = [&](RawEvent event, const char* which) {
    SimEvent& e = event_of(event, device, "event_elapsed_ms");
    std::lock_guard<std::mutex> lock(e.mutex);
    const bool stamped = e.timing && e.stream != nullptr && e.stamped_seq == e.seq;
    FERRY_CHECK_AS(
        DeviceError, stamped, "sim:", device, ": event_elapsed_ms: expected the ", which,
        " event to be a completed timing event, but it is ",
        !e.timing ? "not a timing event" : (e.stream == nullptr ? "not recorded" : "not complete"));
    return e.time;
  };
  const auto t0 = stamp(start, "start");
  const auto t1 = stamp(end, "end");
  return std::chrono::duration<float, std::milli>(t1 - t0).count();
}

}  // namespace ferry::sim::detail
