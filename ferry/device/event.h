// Event: a marker in a stream's queue, like PyTorch's CUDAEvent. The backend event is created
// lazily by the first record(), on that stream's device, and the event stays bound to that
// device. An event that was never recorded (or was recorded only on the CPU stream) is complete:
// query() is true and block()/synchronize() return at once. Move-only; one Event object must not
// be used from two threads at the same time (the backend calls themselves are thread-safe).
// Interprocess events (Event::interprocess, Event::from_ipc_handle) are created at once on their
// device and are shared with other processes: a record in any of them moves the mark for all.
#pragma once

#include "ferry/core/device.h"
#include "ferry/device/backend.h"
#include "ferry/device/ipc_handle.h"
#include "ferry/device/stream.h"

namespace ferry {

class Event {
 public:
  // enable_timing: record timestamps so that elapsed_time() works (costs a little per record).
  explicit Event(bool enable_timing = false) : enable_timing_(enable_timing) {}
  // An event that other processes can record and wait on (CUDA: cudaEventInterprocess |
  // cudaEventDisableTiming), created now on `device` (a sim or CUDA device). Never a timing event.
  static Event interprocess(Device device);
  // The event of another process, from that process's ipc_handle() (received with
  // IpcConnection::receive_handle). Records here are seen there and vice versa; waits, queries
  // and synchronizes cover the last record made in either process before them. Destroying it
  // closes this process's handle only. Sim: a wait whose record's process died before the record
  // completed ends with a DeviceError naming the event (docs/devices.md, "Interprocess events").
  static Event from_ipc_handle(const IpcHandle& handle);
  // The handle to send to another process; raises DeviceError unless is_interprocess().
  IpcHandle ipc_handle() const;

  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  ~Event();

  // Marks the current end of `stream`'s queue; the event completes when the work queued before
  // it is done. Re-recording moves the mark. Raises DeviceError when the event is bound to
  // another device. Recording on the CPU stream marks nothing (CPU work is already done).
  void record(const Stream& stream);
  // Records on the current stream of the current accelerator (the event's device once bound;
  // otherwise the first of CUDA and sim that has devices; otherwise the CPU stream).
  void record();
  // Work queued on `stream` from now on waits for this event; the host does not block. On the
  // CPU stream, or a stream of another device type (sim waiting for CUDA), the host waits for
  // the event instead: one runtime cannot wait on another's events.
  void block(const Stream& stream) const;
  // True when the work before the last record is done.
  bool query() const;
  // Blocks the calling thread until the work before the last record is done.
  void synchronize() const;
  // Milliseconds from this event to `end`. Both must be timing events recorded on the same
  // device; waits for both to complete.
  float elapsed_time(const Event& end) const;

  bool enable_timing() const { return enable_timing_; }
  bool is_interprocess() const { return interprocess_; }
  // The device the event is bound to; cpu before the first device record.
  Device device() const { return device_; }
  bool is_created() const { return raw_ != nullptr; }
  bool was_recorded() const { return was_recorded_; }
  RawEvent raw() const { return raw_; }

 private:
  void release() noexcept;

  bool enable_timing_ = false;
  bool was_recorded_ = false;
  bool interprocess_ = false;
  Device device_;
  RawEvent raw_ = nullptr;
};

}  // namespace ferry
