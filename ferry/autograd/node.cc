// Node bookkeeping: output metadata with the forward's stream, sequence numbers, retain_grad.
#include "ferry/autograd/node.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"

namespace ferry::autograd {

namespace detail {
thread_local constinit bool tls_grad_disabled = false;
}  // namespace detail

uint64_t next_sequence_nr() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

InputMetadata::InputMetadata(const Tensor& t)
    : shape(t.sizes()), dtype(t.dtype()), device(t.device()), defined(true) {
  if (!device.is_cpu()) stream = current_stream(device);
}

Node::Node(edge_list next_edges)
    : next_edges_(std::move(next_edges)), sequence_nr_(next_sequence_nr()) {}

uint32_t Node::add_input_metadata(const Tensor& output) {
  input_metadata_.emplace_back(output);
  return num_inputs() - 1;
}

uint32_t Node::add_undefined_input() {
  input_metadata_.emplace_back();
  return num_inputs() - 1;
}

std::optional<Stream> Node::stream() const {
  for (const InputMetadata& m : input_metadata_) {
    if (m.stream) return m.stream;
  }
  return std::nullopt;
}

Device Node::device() const {
  for (const InputMetadata& m : input_metadata_) {
    if (m.defined) return m.device;
  }
  return Device(DeviceType::CPU);
}

void Node::check_not_released() const {
  FERRY_CHECK(!released_, "Trying to backward through the graph a second time (or directly ",
              "access saved tensors after they have already been freed): ", name(),
              "'s saved tensors were freed by the first backward. Specify retain_graph=true "
              "on the first backward call if you need to backward twice.");
}

void Node::add_retain_grad_hook(uint32_t output_nr, const Tensor& tensor) {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  for (auto& [nr, weak] : retain_grad_hooks_) {
    if (nr == output_nr && weak.refers_to(tensor.impl())) return;
  }
  retain_grad_hooks_.emplace_back(
      output_nr, WeakIntrusivePtr<TensorImpl>(IntrusivePtr<TensorImpl>(tensor.impl())));
}

}  // namespace ferry::autograd
