// torchgpipe's stream helpers over ferry's streams. An AbstractStream is a device Stream or the
// CPUStream (ferry's CPU Stream: work on it runs synchronously on the calling thread, so
// waiting for it, synchronizing it and recording a tensor on it are no-ops). Every helper works
// for every combination of CPU and device streams, so the pipeline code has no CPU branches.
#pragma once

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"
#include "ferry/device/guard.h"
#include "ferry/device/stream.h"

namespace ferry::pipeline {

using AbstractStream = Stream;

// The stream-like placeholder for the host.
inline AbstractStream cpu_stream() { return Stream(); }
// A stream of `device` other than its default one (from its pool, round-robin); the CPUStream
// for the CPU.
AbstractStream new_stream(Device device);
// ferry's own, which already treat the CPU as described: current_stream(device) and
// default_stream(device) are the CPUStream for the CPU; wait_stream(source, target) makes
// `source` wait for the work queued on `target` so far (an event wait between devices of one
// type, never a device synchronize; the host blocks only when the CPUStream waits for a device
// stream; nothing to wait for on the CPUStream).
using ferry::current_stream;
using ferry::default_stream;
using ferry::wait_stream;
// The device a stream belongs to (cpu for the CPUStream).
inline Device get_device(const AbstractStream& stream) { return stream.device(); }
inline bool is_cpu(const AbstractStream& stream) { return stream.is_cpu(); }

// Makes `stream` the current stream of its device on this thread for the guard's scope (and
// its device the current one); nothing for the CPUStream.
class use_stream {  // NOLINT(readability-identifier-naming): torchgpipe's name
 public:
  explicit use_stream(const AbstractStream& stream) : guard_(stream) {}
  use_stream(const use_stream&) = delete;
  use_stream& operator=(const use_stream&) = delete;

 private:
  StreamGuard guard_;
};

// Keeps `tensor`'s memory from being reused until the work queued on `stream` when it is freed
// has run; a no-op for host tensors and for the CPUStream.
void record_stream(const Tensor& tensor, const AbstractStream& stream);

}  // namespace ferry::pipeline
