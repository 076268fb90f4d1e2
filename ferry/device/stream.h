// Stream: an in-order queue of device work, named by (device, id). Id 0 is the device's default
// stream, ids 1..kStreamPoolSize the pool handed out round-robin by get_stream_from_pool. Each
// thread has a current stream per device (the default stream until set). Backend streams are
// created lazily on first use and live until the process exits, so a Stream is a plain value:
// copyable, comparable, hashable and printable. Ids above kStreamPoolSize name streams registered
// later, per device and never reused: dedicated streams with a priority
// (create_stream_with_priority) and streams created outside ferry (wrap_external_stream), which
// ferry never destroys.
// A Stream on the CPU is torchgpipe's CPUStream: a placeholder whose work runs synchronously on
// the calling thread; query() is always true and synchronize() does nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>

#include "ferry/core/device.h"
#include "ferry/device/backend.h"

namespace ferry {

using StreamId = int32_t;
inline constexpr StreamId kDefaultStreamId = 0;
// Streams per device in the pool (ids 1..kStreamPoolSize). A few are enough to overlap copies
// with compute; each sim stream costs a worker thread once used.
inline constexpr int kStreamPoolSize = 8;

class Event;

class Stream {
 public:
  // The CPU stream.
  Stream() = default;
  // Stream `id` of `device` (the current device of its type when it has no index). Raises
  // DeviceError when the device does not exist or the id is not 0..kStreamPoolSize (0 on CPU).
  Stream(Device device, StreamId id);

  Device device() const { return device_; }
  DeviceType device_type() const { return device_.type(); }
  DeviceIndex device_index() const { return device_.index(); }
  StreamId id() const { return id_; }
  bool is_default() const { return id_ == kDefaultStreamId; }
  bool is_cpu() const { return device_.is_cpu(); }
  // A backend stream created outside ferry (wrap_external_stream).
  bool is_external() const;
  // The priority it was created with (create_stream_with_priority); 0 for every other stream.
  int priority() const;

  // True when all work queued so far is done (never blocks).
  bool query() const;
  // Blocks the calling thread until all work queued so far is done.
  void synchronize() const;
  // Work queued on this stream from now on waits for the work queued on `other` so far.
  void wait_stream(const Stream& other) const;
  // Work queued on this stream from now on waits for `event` (Event::block).
  void wait_event(const Event& event) const;

  // The backend's handle (created on first use); nullptr for the CPU stream. For kernels and
  // backends only.
  RawStream raw() const;

  // "sim:0/stream 3", "sim:0/default stream", "cpu/stream", "sim:0/stream 12 (priority -1)",
  // "sim:0/external stream 0x5581c0a1b2c0".
  std::string str() const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device_ == b.device_ && a.id_ == b.id_;
  }

 private:
  struct Unchecked {};
  Stream(Unchecked, Device device, StreamId id) : device_(device), id_(id) {}
  friend Stream default_stream(Device device);
  friend Stream get_stream_from_pool(Device device);
  friend Stream current_stream(Device device);
  friend Stream create_stream_with_priority(Device device, int priority);
  friend Stream wrap_external_stream(Device device, RawStream raw);

  Device device_;
  StreamId id_ = kDefaultStreamId;
};

std::ostream& operator<<(std::ostream& out, const Stream& stream);

// The default stream of `device` (the current device of its type when it has no index).
Stream default_stream(Device device);
// The next stream of `device`'s pool, round-robin. CPU: the CPU stream.
Stream get_stream_from_pool(Device device);
// The calling thread's current stream of `device`: the default stream until set.
Stream current_stream(Device device);
// A new stream of `device` whose work the device prefers over lower-priority streams' (CUDA:
// cudaStreamCreateWithPriority; lower numbers are higher priorities). `priority` must lie in
// stream_priority_range(device). The sim accepts 0..-5 and ignores it: each sim stream has its
// own worker thread and the host schedules them. Lives until the process exits, like the pool.
Stream create_stream_with_priority(Device device, int priority);
// {least, greatest} priority of `device`'s streams (CUDA: e.g. {0, -5}; sim: {0, -5}).
std::pair<int, int> stream_priority_range(Device device);
// A Stream for a backend stream created outside ferry (a cudaStream_t; a sim stream made with
// the backend's stream_create), which ferry uses but never destroys: the caller keeps it alive
// while ferry may use it. Wrapping the same handle again gives the same Stream; the backend's
// default stream gives default_stream(device). Raises DeviceError for a handle that is not a
// stream of `device` (sim; CUDA cannot tell).
Stream wrap_external_stream(Device device, RawStream raw);
// Makes `stream` the calling thread's current stream of its device. Does not change the current
// device (StreamGuard does both).
void set_current_stream(const Stream& stream);

// torchgpipe's wait_stream: `waiter` waits for the work queued on `target` so far; works for
// every combination. device <- device of the same type: an event recorded on target, waited on
// by waiter (the host does not block); cpu <- device and device <- device of another type (sim
// <- cuda): the host synchronizes target; anything <- cpu: nothing to wait for.
void wait_stream(const Stream& waiter, const Stream& target);

// Runs `fn` in stream order on a host thread (sim: the stream's worker thread; CUDA:
// cudaLaunchHostFunc); later work on the stream waits for it. On the CPU stream `fn` runs now.
// `fn` must not enqueue work or synchronize; an exception it throws is reported by the next
// synchronize() of the stream (sim) or printed (CUDA).
void enqueue_host_function(const Stream& stream, std::function<void()> fn);

// How many of `device`'s streams (default and pool) this process has created so far.
int streams_in_use(Device device);

}  // namespace ferry

template <>
struct std::hash<ferry::Stream> {
  size_t operator()(const ferry::Stream& s) const noexcept {
    return std::hash<ferry::Device>()(s.device()) * 31 + static_cast<size_t>(s.id());
  }
};
