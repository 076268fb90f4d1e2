// device_copy: the copy_stub kernel of the sim and CUDA device types. It asks plan_device_copy
// for a path and carries it out with backend primitives: a memcpy (host<->device on the
// device's current stream; device<->device on the source device's current stream), the device
// kernel hook, or staging (device_copy_staged.cc). Stream order across devices comes from the
// event handshake in on_copy_stream; nothing here waits on the host except a blocking copy
// that involves host memory.
#include "ferry/ops/device_copy.h"

#include "ferry/device/device_copy_kernel.h"
#include "ferry/device/event.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/iter/copy_stub.h"
#include "ferry/memory/pinned_allocator.h"

namespace ferry {

namespace detail {
// device_copy_staged.cc
void staged_copy(const TensorIterator& iter, const DeviceCopyPlan& plan, bool non_blocking);
}  // namespace detail

namespace {

// Runs enqueue(stream) on the source device's current stream. Across devices the source stream
// first waits for the work already queued on the destination's current stream (which may still
// read or write the destination), and afterwards the destination's current stream waits for
// the copy, so that whatever the caller queues there next sees the copied bytes. Neither wait
// blocks the host. (PyTorch's copy_device_to_device: dst_ready, then src_ready.)
template <typename Enqueue>
void on_copy_stream(Device dst_device, Device src_device, Enqueue&& enqueue) {
  const Stream copy_stream = current_stream(src_device);
  if (dst_device == src_device) {
    enqueue(copy_stream);
    return;
  }
  const Stream dst_stream = current_stream(dst_device);
  Event dst_ready;
  dst_ready.record(dst_stream);
  dst_ready.block(copy_stream);
  enqueue(copy_stream);
  Event src_ready;
  src_ready.record(copy_stream);
  src_ready.block(dst_stream);
}

void memcpy_copy(const TensorIterator& iter, const DeviceCopyPlan& plan, bool non_blocking) {
  const Device dst_device = plan.dst_device;
  const Device src_device = plan.src_device;
  const auto nbytes = static_cast<size_t>(iter.numel() * iter.element_size(0));
  void* dst = iter.data_ptr(0);
  const void* src = iter.data_ptr(1);
  if (dst_device.is_cpu() || src_device.is_cpu()) {
    const bool to_device = src_device.is_cpu();
    const Device device = to_device ? dst_device : src_device;
    const Stream stream = current_stream(device);
    get_backend(device.type())
        .memcpy_async(device.index(), dst, src, nbytes,
                      to_device ? CopyKind::HostToDevice : CopyKind::DeviceToHost, stream.raw());
    if (non_blocking) {
      // Pinned memory: the copy is only queued, so the host block must outlive it. Pageable
      // memory: memcpy_async has already read the source / written the destination.
      const Tensor& host = to_device ? iter.tensor(1) : iter.tensor(0);
      memory::pinned_record_event(host.storage(), stream);
    } else {
      stream.synchronize();
    }
    return;
  }
  on_copy_stream(dst_device, src_device, [&](const Stream& stream) {
    Backend& backend = get_backend(stream.device_type());
    if (dst_device == src_device || plan.peer) {
      // One device, or a peer the source device may access directly.
      backend.memcpy_async(src_device.index(), dst, src, nbytes, CopyKind::DeviceToDevice,
                           stream.raw());
    } else {
      // No peer access: the runtime stages the bytes through the host.
      backend.memcpy_peer_async(dst, dst_device.index(), src, src_device.index(), nbytes,
                                src_device.index(), stream.raw());
    }
  });
}

void kernel_copy(const TensorIterator& iter, const DeviceCopyPlan& plan) {
  const CopyProblem problem = copy_problem_from(iter);
  on_copy_stream(plan.dst_device, plan.src_device, [&](const Stream& stream) {
    device_copy_kernel_stub(stream.device_type(), problem, stream);
  });
}

}  // namespace

void device_copy(TensorIterator& iter, bool non_blocking) {
  const DeviceCopyPlan plan = plan_device_copy(iter, non_blocking);
  switch (plan.path) {
    case DeviceCopyPath::kMemcpy:
      memcpy_copy(iter, plan, non_blocking);
      return;
    case DeviceCopyPath::kKernel:
    case DeviceCopyPath::kPeerKernel:
      kernel_copy(iter, plan);
      return;
    case DeviceCopyPath::kStaged:
      detail::staged_copy(iter, plan, non_blocking);
      return;
  }
}

FERRY_REGISTER_DISPATCH(copy_stub, DeviceType::Sim, &device_copy);
FERRY_REGISTER_DISPATCH(copy_stub, DeviceType::CUDA, &device_copy);

}  // namespace ferry
