// The sim device's compute kernels: the CPU kernels, run on the stream worker over the sim's
// read-write mapping (see sim_compute.h), registered into every compute stub, with a FLOP
// estimate per kernel for the compute-time model.
#include "ferry/backends/sim/sim_compute.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "ferry/backends/cpu/math/math_kernels.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/device/compute_kernels.h"
#include "ferry/iter/elementwise_stub.h"

namespace ferry::sim {
namespace {

// [first, first + extent) of `device_ptr` translated, both ends in one mapping of memory that
// `stream`'s device may touch.
char* translate_range(const void* device_ptr, int64_t extent, const Stream& stream,
                      const char* what) {
  char* first = static_cast<char*>(host_address(device_ptr));
  const int owner = device_of(device_ptr);
  const int device = stream.device().index();
  FERRY_CHECK_AS(DeviceError, peer_access_enabled(device, owner), stream.device(),
                 ": compute kernel: expected the ", what, " in memory of sim:", device,
                 " or of a peer whose access it has enabled, but it is on sim:", owner);
  if (extent > 1) {
    const char* last = static_cast<const char*>(device_ptr) + (extent - 1);
    FERRY_CHECK_AS(DeviceError, static_cast<char*>(host_address(last)) == first + (extent - 1),
                   stream.device(), ": compute kernel: expected the ", what, " (", extent,
                   " bytes from ", device_ptr,
                   ") to lie inside one allocation, but it runs into another");
  }
  return first;
}

}  // namespace

Tensor host_alias(const Tensor& t, const Stream& stream) {
  if (!t.defined() || !t.is_sim()) return t;
  const Storage& storage = t.storage();
  const auto nbytes = static_cast<int64_t>(storage.nbytes());
  char* base =
      nbytes == 0 ? nullptr : translate_range(storage.data(), nbytes, stream, "operand's storage");
  Storage host(DataPtr(base, Device(DeviceType::CPU)), storage.nbytes());
  Tensor out = make_tensor(std::move(host), t.dtype(), t.sizes(), t.strides(), t.storage_offset());
  out.impl()->set_conj(t.is_conj());
  out.impl()->set_neg(t.is_neg());
  return out;
}

Stream kernel_stream(const std::vector<const Tensor*>& tensors) {
  std::optional<Device> device;
  for (const Tensor* t : tensors) {
    if (!t->defined() || !t->is_sim()) continue;
    if (!device) {
      device = t->device();
      continue;
    }
    FERRY_CHECK_AS(DeviceError, *device == t->device(),
                   "sim compute kernel: expected every operand on one device, but got ", *device,
                   " and ", t->device());
  }
  FERRY_CHECK_AS(DeviceError, device.has_value(),
                 "sim compute kernel: expected an operand on a sim device, but got none");
  return current_stream(*device);
}

void enqueue_compute(const Stream& stream, double flops, std::function<void()> kernel) {
  enqueue_compute(stream, flops, 0.0, std::move(kernel));
}

void enqueue_compute(const Stream& stream, double flops, double host_bytes,
                     std::function<void()> kernel) {
  const ComputeModel model = compute_model();
  double seconds = model.rate > 0 && flops > 0 ? flops / model.rate : 0;
  if (model.host_read_bandwidth > 0 && host_bytes > 0) {
    seconds += host_bytes / model.host_read_bandwidth;
  }
  const bool skip = model.timing_only && model.rate > 0;
  enqueue_host_function(stream, [seconds, skip, kernel = std::move(kernel)] {
    const auto start = std::chrono::steady_clock::now();
    if (!skip) kernel();
    if (seconds > 0) {
      std::this_thread::sleep_until(start +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(seconds)));
    }
  });
}

double host_mapped_bytes(const Tensor& t) {
  if (!t.defined() || !t.is_sim() || t.numel() == 0) return 0;
  if (!is_host_mapped(t.storage().data())) return 0;
  double extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    extent += static_cast<double>(t.size(d) - 1) * static_cast<double>(std::abs(t.stride(d)));
  }
  return extent * static_cast<double>(t.element_size());
}

namespace {

// ---- elementwise: the iterator is retargeted at the host mapping ---------------------------

double elementwise_flops(ElementwiseKind kind) {
  switch (kind) {
    case ElementwiseKind::Exp:
    case ElementwiseKind::Log:
    case ElementwiseKind::Tanh:
    case ElementwiseKind::Sigmoid:
    case ElementwiseKind::Pow:
      return 4;
    case ElementwiseKind::Gelu:
    case ElementwiseKind::GeluTanh:
    case ElementwiseKind::GeluBackward:
    case ElementwiseKind::GeluTanhBackward:
      return 8;
    default:
      return 1;
  }
}

void sim_elementwise(const TensorIterator& iter, const ElementwiseOp& op) {
  std::vector<const Tensor*> tensors;
  for (int i = 0; i < iter.ntensors(); ++i) tensors.push_back(&iter.tensor(i));
  const Stream stream = kernel_stream(tensors);
  TensorIterator host = iter;
  double host_bytes = 0;
  for (int i = 0; i < iter.ntensors(); ++i) {
    int64_t extent = iter.element_size(i);
    for (int d = 0; d < iter.ndim(); ++d) extent += (iter.shape()[d] - 1) * iter.strides(i)[d];
    host.set_data_ptr(i, translate_range(iter.data_ptr(i), extent, stream, "operand"));
    if (extent > 0 && is_host_mapped(iter.data_ptr(i))) host_bytes += static_cast<double>(extent);
  }
  host.release_tensors();
  const double flops = static_cast<double>(iter.numel()) * elementwise_flops(op.kind);
  enqueue_compute(stream, flops, host_bytes, [host = std::move(host), op] {
    elementwise_stub.get(DeviceType::CPU)(host, op);
  });
}

// ---- FLOP estimates --------------------------------------------------------------------------

double numel_of(const Tensor& t) { return t.defined() ? static_cast<double>(t.numel()) : 0; }

double reduce_flops(const Tensor&, const Tensor& input, const std::vector<int64_t>&, ReduceKind) {
  return numel_of(input);
}
double index_select_flops(const Tensor& out, const Tensor&, const Tensor&) { return numel_of(out); }
double index_add_flops(const Tensor&, const Tensor&, const Tensor& source, std::optional<int64_t>) {
  return numel_of(source);
}
double nll_forward_flops(const Tensor&, const Tensor&, const Tensor&, const Tensor& target,
                         const Tensor&, bool, int64_t) {
  return 2 * numel_of(target);
}
double nll_backward_flops(const Tensor& grad_input, const Tensor&, const Tensor&, const Tensor&,
                          bool, int64_t, double) {
  return numel_of(grad_input);
}

// A lookup reads only the selected rows of a table in mapped host memory (an embedding read in
// place: the point of direct host access), not the whole table.
void sim_index_select(const Tensor& out, const Tensor& self, const Tensor& index) {
  const double self_bytes = host_mapped_bytes(self) > 0 ? static_cast<double>(out.nbytes()) : 0;
  const double host_bytes = self_bytes + host_mapped_bytes(out) + host_mapped_bytes(index);
  HostKernel<&cpu::index_select, &index_select_flops>::launch(host_bytes, out, self, index);
}

}  // namespace

FERRY_REGISTER_DISPATCH(elementwise_stub, DeviceType::Sim, &sim_elementwise);
FERRY_REGISTER_DISPATCH(reduce_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::reduce, &reduce_flops>::run));
FERRY_REGISTER_DISPATCH(index_select_stub, DeviceType::Sim, &sim_index_select);
FERRY_REGISTER_DISPATCH(index_add_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::index_add, &index_add_flops>::run));
FERRY_REGISTER_DISPATCH(nll_loss_forward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::nll_loss_forward, &nll_forward_flops>::run));
FERRY_REGISTER_DISPATCH(nll_loss_backward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::nll_loss_backward, &nll_backward_flops>::run));

}  // namespace ferry::sim
