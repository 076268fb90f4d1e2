// Streams: the per-device tables of lazily created backend streams, the pool, the per-thread
// current stream, wait_stream and host functions.
#include "ferry/device/stream.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <deque>
#include <mutex>
#include <ostream>
#include <shared_mutex>

#include "ferry/core/error.h"
#include "ferry/device/event.h"
#include "ferry/device/runtime.h"

namespace ferry {
namespace {

constexpr int kStreamTableDevices = 128;  // DeviceIndex is int8_t
constexpr int kStreamsPerDevice = 1 + kStreamPoolSize;

struct StreamSlot {
  std::atomic<bool> created{false};
  RawStream raw = nullptr;  // written once, before `created` is released
};

// A stream registered after the pool: id kStreamsPerDevice + its index in `extras`.
struct ExtraStream {
  RawStream raw = nullptr;
  int priority = 0;
  bool external = false;
};

struct DeviceStreams {
  std::mutex create_mutex;
  std::array<StreamSlot, kStreamsPerDevice> slots;
  std::atomic<uint32_t> next_pool{0};
  // Registered streams; a deque so that entries never move. Never shrinks.
  mutable std::shared_mutex extras_mutex;
  std::deque<ExtraStream> extras;
};

// Tables are created on first use and never freed: streams live as long as the process.
DeviceStreams& device_streams(Device device) {
  static std::array<std::array<std::atomic<DeviceStreams*>, kStreamTableDevices>, kNumDeviceTypes>
      tables{};
  static std::mutex tables_mutex;
  auto& entry = tables[static_cast<size_t>(device.type())][static_cast<size_t>(device.index())];
  if (DeviceStreams* s = entry.load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(tables_mutex);
  if (DeviceStreams* s = entry.load(std::memory_order_acquire)) return *s;
  auto* created = new DeviceStreams();
  entry.store(created, std::memory_order_release);
  return *created;
}

// The registered stream `id` (> kStreamPoolSize) of `device`, or nullptr.
const ExtraStream* extra_stream(Device device, StreamId id) {
  if (id < kStreamsPerDevice) return nullptr;
  DeviceStreams& streams = device_streams(device);
  std::shared_lock<std::shared_mutex> lock(streams.extras_mutex);
  const auto index = static_cast<size_t>(id - kStreamsPerDevice);
  return index < streams.extras.size() ? &streams.extras[index] : nullptr;
}

StreamId add_extra_stream(DeviceStreams& streams, ExtraStream extra) {
  // Caller holds extras_mutex exclusively.
  streams.extras.push_back(extra);
  return static_cast<StreamId>(kStreamsPerDevice + streams.extras.size() - 1);
}

// Zero-initialized: every device starts on its default stream.
thread_local std::array<std::array<StreamId, kStreamTableDevices>, kNumDeviceTypes>
    tls_current_stream{};

}  // namespace

Stream::Stream(Device device, StreamId id) {
  device_ = checked_device(device);
  const StreamId max_id = device_.is_cpu() ? 0 : kStreamPoolSize;
  FERRY_CHECK_AS(
      DeviceError, (id >= 0 && id <= max_id) || (!device_.is_cpu() && extra_stream(device_, id)),
      device_, ": expected a stream id between 0 and ", max_id,
      " or one of a stream created with a priority or wrapped from outside, but got ", id);
  id_ = id;
}

RawStream Stream::raw() const {
  if (is_cpu()) return nullptr;
  if (id_ >= kStreamsPerDevice) {
    const ExtraStream* extra = extra_stream(device_, id_);
    FERRY_CHECK_AS(DeviceError, extra != nullptr, device_, ": expected a registered stream, but ",
                   "stream id ", id_, " is not one");
    return extra->raw;
  }
  StreamSlot& slot = device_streams(device_).slots[static_cast<size_t>(id_)];
  if (slot.created.load(std::memory_order_acquire)) return slot.raw;
  DeviceStreams& streams = device_streams(device_);
  std::lock_guard<std::mutex> lock(streams.create_mutex);
  if (!slot.created.load(std::memory_order_relaxed)) {
    Backend& b = get_backend(device_.type());
    slot.raw = is_default() ? b.default_stream(device_.index()) : b.stream_create(device_.index());
    slot.created.store(true, std::memory_order_release);
  }
  return slot.raw;
}

bool Stream::query() const {
  if (is_cpu()) return true;
  return get_backend(device_.type()).stream_query(device_.index(), raw());
}

void Stream::synchronize() const {
  if (is_cpu()) return;
  get_backend(device_.type()).stream_synchronize(device_.index(), raw());
}

void Stream::wait_stream(const Stream& other) const { ferry::wait_stream(*this, other); }

void Stream::wait_event(const Event& event) const { event.block(*this); }

bool Stream::is_external() const {
  const ExtraStream* extra = is_cpu() ? nullptr : extra_stream(device_, id_);
  return extra != nullptr && extra->external;
}

int Stream::priority() const {
  const ExtraStream* extra = is_cpu() ? nullptr : extra_stream(device_, id_);
  return extra == nullptr ? 0 : extra->priority;
}

std::string Stream::str() const {
  if (is_cpu()) return "cpu/stream";
  if (is_default()) return device_.str() + "/default stream";
  if (const ExtraStream* extra = extra_stream(device_, id_)) {
    if (extra->external) {
      char address[32];
      std::snprintf(address, sizeof(address), "%p", extra->raw);
      return device_.str() + "/external stream " + address;
    }
    return device_.str() + "/stream " + std::to_string(id_) + " (priority " +
           std::to_string(extra->priority) + ")";
  }
  return device_.str() + "/stream " + std::to_string(id_);
}

std::ostream& operator<<(std::ostream& out, const Stream& stream) { return out << stream.str(); }

Stream default_stream(Device device) {
  const Device d = checked_device(device);
  return Stream(Stream::Unchecked{}, d, kDefaultStreamId);
}

Stream get_stream_from_pool(Device device) {
  const Device d = checked_device(device);
  if (d.is_cpu()) return Stream();
  const uint32_t n = device_streams(d).next_pool.fetch_add(1, std::memory_order_relaxed);
  return Stream(Stream::Unchecked{}, d, static_cast<StreamId>(1 + n % kStreamPoolSize));
}

Stream create_stream_with_priority(Device device, int priority) {
  const Device d = checked_device(device);
  FERRY_CHECK_AS(DeviceError, !d.is_cpu(),
                 "create_stream_with_priority: expected a device, but got the cpu");
  RawStream raw = get_backend(d.type()).stream_create_with_priority(d.index(), priority);
  DeviceStreams& streams = device_streams(d);
  std::unique_lock<std::shared_mutex> lock(streams.extras_mutex);
  return Stream(Stream::Unchecked{}, d,
                add_extra_stream(streams, ExtraStream{raw, priority, false}));
}

std::pair<int, int> stream_priority_range(Device device) {
  const Device d = checked_device(device);
  if (d.is_cpu()) return {0, 0};
  return get_backend(d.type()).stream_priority_range(d.index());
}

Stream wrap_external_stream(Device device, RawStream raw) {
  const Device d = checked_device(device);
  FERRY_CHECK_AS(DeviceError, !d.is_cpu(), "wrap_external_stream: expected a device, but got ",
                 "the cpu");
  Backend& b = get_backend(d.type());
  if (raw == b.default_stream(d.index())) return default_stream(d);
  (void)b.stream_query(d.index(), raw);  // the sim raises for another device's stream
  DeviceStreams& streams = device_streams(d);
  for (const StreamSlot& slot : streams.slots) {
    // One of ferry's own (pool) streams: the same Stream rather than a second name for it.
    if (slot.created.load(std::memory_order_acquire) && slot.raw == raw) {
      return Stream(Stream::Unchecked{}, d, static_cast<StreamId>(&slot - streams.slots.data()));
    }
  }
  std::unique_lock<std::shared_mutex> lock(streams.extras_mutex);
  for (size_t i = 0; i < streams.extras.size(); ++i) {
    if (streams.extras[i].raw == raw) {  // wrapped before, or a priority stream of ours
      return Stream(Stream::Unchecked{}, d, static_cast<StreamId>(kStreamsPerDevice + i));
    }
  }
  return Stream(Stream::Unchecked{}, d, add_extra_stream(streams, ExtraStream{raw, 0, true}));
}

Stream current_stream(Device device) {
  const Device d = checked_device(device);
  if (d.is_cpu()) return Stream();
  const StreamId id =
      tls_current_stream[static_cast<size_t>(d.type())][static_cast<size_t>(d.index())];
  return Stream(Stream::Unchecked{}, d, id);
}

void set_current_stream(const Stream& stream) {
  if (stream.is_cpu()) return;
  tls_current_stream[static_cast<size_t>(stream.device_type())]
                    [static_cast<size_t>(stream.device_index())] = stream.id();
}

void wait_stream(const Stream& waiter, const Stream& target) {
  if (target.is_cpu() || waiter == target) return;  // CPU work is already done when queued
  // Nothing later on the CPU stream could wait; another runtime cannot wait on target's events.
  if (waiter.is_cpu() || waiter.device_type() != target.device_type()) {
    target.synchronize();
    return;
  }
  Event ready;
  ready.record(target);
  ready.block(waiter);
}

void enqueue_host_function(const Stream& stream, std::function<void()> fn) {
  FERRY_CHECK_AS(Error, static_cast<bool>(fn), "enqueue_host_function(", stream,
                 "): expected a callable, but got an empty std::function");
  if (stream.is_cpu()) {
    fn();
    return;
  }
  get_backend(stream.device_type())
      .launch_host_func(stream.device_index(), stream.raw(), std::move(fn));
}

int streams_in_use(Device device) {
  const Device d = checked_device(device);
  if (d.is_cpu()) return 0;
  int n = 0;
  for (const StreamSlot& slot : device_streams(d).slots) {
    n += slot.created.load(std::memory_order_acquire) ? 1 : 0;
  }
  return n;
}

}  // namespace ferry
