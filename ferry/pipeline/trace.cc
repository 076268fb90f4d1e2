// Tracer (see trace.h).
#include "ferry/pipeline/trace.h"

#include <chrono>

namespace ferry::pipeline {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Tracer::Tracer() : origin_ms_(now_ms()) {}

size_t Tracer::begin(const Stream& stream, const std::string& lane, SpanKind kind,
                     int64_t microbatch, int64_t partition) {
  size_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    index = spans_.size();
    Span span;
    span.kind = kind;
    span.microbatch = microbatch;
    span.partition = partition;
    span.lane = lane;
    spans_.push_back(std::move(span));
  }
  enqueue_host_function(stream, [self = shared_from_this(), index] { self->stamp(index, true); });
  return index;
}

void Tracer::end(const Stream& stream, size_t index) {
  enqueue_host_function(stream, [self = shared_from_this(), index] { self->stamp(index, false); });
}

void Tracer::stamp(size_t index, bool begin) {
  const double t = now_ms() - origin_ms_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (index >= spans_.size()) return;  // cleared meanwhile
  Span& span = spans_[index];
  (begin ? span.begin_ms : span.end_ms) = t;
  (begin ? span.begin_seq : span.end_seq) = seq_++;
}

std::vector<Span> Tracer::spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

void Tracer::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.clear();
  seq_ = 0;
}

}  // namespace ferry::pipeline
