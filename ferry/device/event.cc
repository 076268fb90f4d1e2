// Events: lazy creation on first record, binding to one device, and the CPU-stream cases.
#include "ferry/device/event.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/device/runtime.h"

namespace ferry {

Event::Event(Event&& other) noexcept
    : enable_timing_(other.enable_timing_),
      was_recorded_(std::exchange(other.was_recorded_, false)),
      interprocess_(std::exchange(other.interprocess_, false)),
      device_(std::exchange(other.device_, Device())),
      raw_(std::exchange(other.raw_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    release();
    enable_timing_ = other.enable_timing_;
    was_recorded_ = std::exchange(other.was_recorded_, false);
    interprocess_ = std::exchange(other.interprocess_, false);
    device_ = std::exchange(other.device_, Device());
    raw_ = std::exchange(other.raw_, nullptr);
  }
  return *this;
}

Event::~Event() { release(); }

Event Event::interprocess(Device device) {
  const Device d = checked_device(device);
  FERRY_CHECK_AS(DeviceError, !d.is_cpu(), "Event::interprocess: expected a device, but got ", d,
                 " (CPU work needs no event)");
  Event event(false);
  event.raw_ = get_backend(d.type()).event_create_interprocess(d.index());
  event.device_ = d;
  event.interprocess_ = true;
  return event;
}

Event Event::from_ipc_handle(const IpcHandle& handle) {
  FERRY_CHECK_AS(DeviceError, !handle.device.is_cpu() && handle.device.has_index(),
                 "Event::from_ipc_handle: expected a handle of a device event, but it names ",
                 handle.device);
  const Device d = checked_device(handle.device);
  Event event(false);
  event.raw_ = get_backend(d.type()).event_ipc_import(handle);
  event.device_ = d;
  event.interprocess_ = true;
  event.was_recorded_ = true;  // perhaps, by the other process
  return event;
}

IpcHandle Event::ipc_handle() const {
  FERRY_CHECK_AS(DeviceError, interprocess_ && raw_ != nullptr,
                 "Event::ipc_handle: expected an interprocess event (Event::interprocess), but "
                 "got an event of this process only");
  return get_backend(device_.type()).event_ipc_export(device_.index(), raw_);
}

void Event::release() noexcept {
  if (raw_ == nullptr) return;
  try {
    get_backend(device_.type()).event_destroy(device_.index(), raw_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: failed to destroy an event on %s: %s\n", device_.str().c_str(),
                 e.what());
  }
  raw_ = nullptr;
}

void Event::record(const Stream& stream) {
  if (stream.is_cpu()) {
    FERRY_CHECK_AS(DeviceError, raw_ == nullptr, "Event::record: expected a stream on ", device_,
                   " (the event's device), but got ", stream);
    was_recorded_ = true;
    return;
  }
  Backend& b = get_backend(stream.device_type());
  if (raw_ == nullptr) {
    raw_ = b.event_create(stream.device_index(), enable_timing_);
    device_ = stream.device();
  }
  FERRY_CHECK_AS(DeviceError, device_ == stream.device(), "Event::record: expected a stream on ",
                 device_, " (the event's device), but got ", stream);
  b.event_record(device_.index(), raw_, stream.raw());
  was_recorded_ = true;
}

void Event::record() {
  if (raw_ != nullptr) {
    record(current_stream(device_));
    return;
  }
  for (DeviceType type : {DeviceType::CUDA, DeviceType::Sim}) {
    if (device_count(type) > 0) {
      record(current_stream(current_device(type)));
      return;
    }
  }
  record(Stream());
}

void Event::block(const Stream& stream) const {
  if (raw_ == nullptr) return;
  // A runtime cannot wait on another runtime's event, and the CPU stream runs nothing later:
  // in both cases the host waits, which orders everything queued on `stream` afterwards.
  if (stream.is_cpu() || stream.device_type() != device_.type()) {
    synchronize();
    return;
  }
  get_backend(stream.device_type()).stream_wait_event(stream.device_index(), stream.raw(), raw_);
}

bool Event::query() const {
  if (raw_ == nullptr) return true;
  return get_backend(device_.type()).event_query(device_.index(), raw_);
}

void Event::synchronize() const {
  if (raw_ == nullptr) return;
  get_backend(device_.type()).event_synchronize(device_.index(), raw_);
}

float Event::elapsed_time(const Event& end) const {
  FERRY_CHECK_AS(DeviceError, enable_timing_ && end.enable_timing_,
                 "Event::elapsed_time: expected both events to be created with "
                 "enable_timing=true, but the ",
                 enable_timing_ ? "end" : "start", " event was not");
  FERRY_CHECK_AS(DeviceError, raw_ != nullptr && end.raw_ != nullptr,
                 "Event::elapsed_time: expected both events to be recorded on a device stream, "
                 "but the ",
                 raw_ == nullptr ? "start" : "end", " event was not");
  FERRY_CHECK_AS(DeviceError, device_ == end.device_,
                 "Event::elapsed_time: expected both events on one device, but got ", device_,
                 " and ", end.device_);
  synchronize();
  end.synchronize();
  return get_backend(device_.type()).event_elapsed_ms(device_.index(), raw_, end.raw_);
}

}  // namespace ferry
