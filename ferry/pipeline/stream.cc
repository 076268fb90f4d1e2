// The stream helpers that ferry's Stream functions do not already provide.
#include "ferry/pipeline/stream.h"

namespace ferry::pipeline {

AbstractStream new_stream(Device device) {
  return device.is_cpu() ? cpu_stream() : get_stream_from_pool(device);
}

void record_stream(const Tensor& tensor, const AbstractStream& stream) {
  if (!tensor.defined() || stream.is_cpu() || tensor.device().is_cpu()) return;
  if (tensor.device() != stream.device()) return;
  tensor.record_stream(stream);
}

}  // namespace ferry::pipeline
