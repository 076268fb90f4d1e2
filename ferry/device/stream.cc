// Streams: the per-device tables of lazily created backend streams, the pool, the per-thread
// current stream, wait_stream and host functions.
#include "ferry/device/stream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <ostream>

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

struct DeviceStreams {
  std::mutex create_mutex;
  std::array<StreamSlot, kStreamsPerDevice> slots;
  std::atomic<uint32_t> next_pool{0};
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

// Zero-initialized: every device starts on its default stream.
thread_local std::array<std::array<StreamId, kStreamTableDevices>, kNumDeviceTypes>
    tls_current_stream{};

}  // namespace

Stream::Stream(Device device, StreamId id) {
  device_ = checked_device(device);
  const StreamId max_id = device_.is_cpu() ? 0 : kStreamPoolSize;
  FERRY_CHECK_AS(DeviceError, id >= 0 && id <= max_id, device_,
                 ": expected a stream id between 0 and ", max_id, ", but got ", id);
  id_ = id;
}

RawStream Stream::raw() const {
  if (is_cpu()) return nullptr;
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

std::string Stream::str() const {
  if (is_cpu()) return "cpu/stream";
  if (is_default()) return device_.str() + "/default stream";
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
