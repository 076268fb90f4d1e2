// torchgpipe's Copy and Wait: the autograd functions that move a micro-batch from one stream
// (and device) to another without use-after-free and without synchronizing more than needed.
//
// Copy::apply(prev, next, tensors): forward runs with `prev` and `next` current, copies each
// tensor to next's device (the device copy queues on prev's stream after it waits for next's,
// and next's then waits for the copy), records each input on `prev` (it is read there although
// it was allocated elsewhere) and each output on the stream that was current on next's device
// when apply was called (where the caller will use it). Backward copies the gradients back with
// the roles swapped: each gradient recorded on `next`, each result on the stream current on
// prev's device. Non-floating tensors (labels) are copied but carry no gradient.
//
// Wait::apply(prev, next, tensors): `next` waits for `prev`; returns the tensors as new handles
// (detached views). Backward: `prev` waits for `next`; the gradients pass through.
#pragma once

#include "ferry/pipeline/function.h"
#include "ferry/pipeline/stream.h"

namespace ferry::pipeline {

struct Copy {
  static variable_list apply(const AbstractStream& prev_stream, const AbstractStream& next_stream,
                             const variable_list& input);
};

struct Wait {
  static variable_list apply(const AbstractStream& prev_stream, const AbstractStream& next_stream,
                             const variable_list& input);
};

// A batch's tensors replaced by Copy's / Wait's outputs (torchgpipe's copy and wait helpers).
void copy(variable_list& batch, const AbstractStream& prev_stream,
          const AbstractStream& next_stream);
void wait(variable_list& batch, const AbstractStream& prev_stream,
          const AbstractStream& next_stream);

}  // namespace ferry::pipeline
