// record_stream at work: the entries a freed block waits for (an event per recorded stream, or,
// when recording one fails, the stream itself, kept in stream_event_queues.h's queues), polled on
// later allocations and waited on before an out-of-memory error and in empty_cache (record_use
// and use_complete also serve the fixed ranges of fixed_range_resource.h and the pinned
// allocator). Also the memory layer's backend override, the seam through which tests count and
// fail backend calls.
#include <array>
#include <atomic>

#include "ferry/core/error.h"
#include "ferry/memory/device_allocator.h"

namespace ferry::memory::detail {

void DeviceAllocator::insert_events(Block* block) {
  stats_.num_event_record_failures += pending_.record(block);
}

void DeviceAllocator::process_events() {
  pending_.process([this](Block* b) { free_block(b); });
}

void DeviceAllocator::synchronize_pending_events(Lock& lock) {
  pending_.synchronize_all(lock, [this](Block* b) { free_block(b); });
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
