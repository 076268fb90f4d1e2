// Copy and Wait (see copy.h). The record_stream calls are what keep the caching allocator from
// handing a block to another allocation while a copy queued on another stream still reads or
// writes it; tests/pipeline/copy_test.cc fails when either is removed.
#include "ferry/pipeline/copy.h"

#include <utility>

#include "ferry/autograd/engine.h"
#include "ferry/autograd/grad_mode.h"

namespace ferry::pipeline {
namespace {

bool differentiable(const Tensor& t) {
  return t.defined() && (t.is_floating_point() || t.is_complex());
}

std::vector<bool> differentiable_flags(const variable_list& tensors) {
  std::vector<bool> flags;
  for (const Tensor& t : tensors) flags.push_back(differentiable(t));
  return flags;
}

// torchgpipe's Copy.backward: the gradients go back to prev's device, with the streams' roles
// swapped.
variable_list copy_backward(const AbstractStream& prev_stream, const AbstractStream& next_stream,
                            variable_list grad_output) {
  const Device prev_device = get_device(prev_stream);
  const AbstractStream input_stream = current_stream(prev_device);
  variable_list grad_input(grad_output.size());
  {
    use_stream prev_guard(prev_stream);
    use_stream next_guard(next_stream);
    for (size_t k = grad_output.size(); k-- > 0;) {
      const Tensor& x = grad_output[k];
      if (!x.defined()) continue;
      Tensor y = x.to(prev_device);
      // x was allocated on another stream of next's device and is read on next_stream.
      record_stream(x, next_stream);
      // y was allocated on prev_stream; the engine hands it to a node on input_stream.
      record_stream(y, input_stream);
      grad_input[k] = std::move(y);
    }
  }
  // The gradients are ready on prev_stream: the engine makes their consumers wait for it when
  // they run. Making prev's default stream wait here instead (the engine's rule for a plain
  // copy) would queue that wait from this thread, ahead of the next micro-batch's backward that
  // prev's thread has yet to queue on that stream, and hold it back for this micro-batch's
  // gradient (bench-pipeline lost a slot at every stage that way).
  autograd::set_gradient_stream(prev_stream);
  return grad_input;
}

}  // namespace

variable_list Copy::apply(const AbstractStream& prev_stream, const AbstractStream& next_stream,
                          const variable_list& input) {
  const Device next_device = get_device(next_stream);
  const AbstractStream output_stream = current_stream(next_device);
  variable_list output;
  output.reserve(input.size());
  {
    autograd::AutoGradMode no_grad(false);
    use_stream prev_guard(prev_stream);
    use_stream next_guard(next_stream);
    for (const Tensor& x : input) {
      Tensor y = x.to(next_device);
      // x was allocated on some other stream of its device, and is read on prev_stream.
      record_stream(x, prev_stream);
      // y was allocated on next_stream; the caller will use it on output_stream.
      record_stream(y, output_stream);
      output.push_back(std::move(y));
    }
  }
  record_function(
      "ferry::pipeline::CopyBackward", input, output,
      [prev_stream, next_stream](variable_list grads) {
        return copy_backward(prev_stream, next_stream, std::move(grads));
      },
      differentiable_flags(output));
  return output;
}

variable_list Wait::apply(const AbstractStream& prev_stream, const AbstractStream& next_stream,
                          const variable_list& input) {
  wait_stream(next_stream, prev_stream);
  variable_list output;
  output.reserve(input.size());
  for (const Tensor& x : input) output.push_back(x.detach());
  record_function(
      "ferry::pipeline::WaitBackward", input, output,
      [prev_stream, next_stream](variable_list grads) {
        wait_stream(prev_stream, next_stream);
        return grads;
      },
      differentiable_flags(output));
  return output;
}

void copy(variable_list& batch, const AbstractStream& prev_stream,
          const AbstractStream& next_stream) {
  batch = Copy::apply(prev_stream, next_stream, batch);
}

void wait(variable_list& batch, const AbstractStream& prev_stream,
          const AbstractStream& next_stream) {
  batch = Wait::apply(prev_stream, next_stream, batch);
}

}  // namespace ferry::pipeline
