// Tracer: what a pipeline did and when, in stream order. Each span (forward, backward,
// recompute or copy of one micro-batch on one partition) is opened and closed by host functions
// queued on the stream the work runs on, so its times and its sequence numbers say when the
// stream got there, not when the host queued the work (on the CPU stream: at once). A copy's
// span opens on the stream that copies and closes on the receiving one, so work that waits for
// the receiving stream comes after it. Spans are what the tests check orders on and what
// `ferry bench-pipeline` draws its timeline from.
// Thread-safe. Make it with std::make_shared: queued stamps keep it alive.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/device/stream.h"

namespace ferry::pipeline {

enum class SpanKind : char { Forward = 'F', Backward = 'B', Recompute = 'R', Copy = 'C' };

struct Span {
  SpanKind kind = SpanKind::Forward;
  int64_t microbatch = 0;
  int64_t partition = 0;
  std::string lane;      // "sim:0 compute", "sim:0 copy"
  double begin_ms = -1;  // from the tracer's creation; -1 until the stream got there
  double end_ms = -1;
  int64_t begin_seq = -1;  // order among all stamps (begins and ends) of this tracer
  int64_t end_seq = -1;
};

class Tracer : public std::enable_shared_from_this<Tracer> {
 public:
  Tracer();
  // Opens a span on `stream`; returns its index.
  size_t begin(const Stream& stream, const std::string& lane, SpanKind kind, int64_t microbatch,
               int64_t partition);
  // Closes span `index` on `stream`.
  void end(const Stream& stream, size_t index);
  // The spans so far (call after synchronizing the streams to see every stamp).
  std::vector<Span> spans() const;
  void clear();

 private:
  void stamp(size_t index, bool begin);

  double origin_ms_;
  mutable std::mutex mutex_;
  std::vector<Span> spans_;
  int64_t seq_ = 0;
};

}  // namespace ferry::pipeline
