// The memory methods of Tensor (declared in ferry/core/tensor.h): pin_memory, is_pinned and
// record_stream. They only route to the pinned allocator and to record_stream on the storage;
// the whole allocation is what gets pinned, checked or recorded, never just the view.
#include "ferry/core/memory_format.h"
#include "ferry/core/tensor.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/memory/pinned_allocator.h"

namespace ferry {

bool Tensor::is_pinned() const {
  FERRY_CHECK(defined(), "is_pinned: expected a defined tensor, but got an undefined one");
  if (!is_cpu() || !storage().defined()) return false;
  return ferry::is_pinned(storage().data());
}

Tensor Tensor::pin_memory() const {
  FERRY_CHECK(defined(), "pin_memory: expected a defined tensor, but got an undefined one");
  FERRY_CHECK_AS(DeviceError, is_cpu(),
                 "pin_memory: expected a cpu tensor (only host memory can be pinned), but got a "
                 "tensor on ",
                 device());
  if (is_pinned()) return *this;
  // Keep a dense layout as it is (as PyTorch does); anything else becomes contiguous.
  const DimVector out_strides =
      is_non_overlapping_and_dense() ? DimVector(strides()) : contiguous_strides(sizes());
  const size_t nbytes = static_cast<size_t>(numel()) * element_size();
  Storage storage(nbytes, memory::pinned_host_allocator(), Device(DeviceType::CPU));
  Tensor out = make_tensor(std::move(storage), dtype(), sizes(), out_strides, 0);
  out.copy_(*this);
  return out;
}

void Tensor::record_stream(const Stream& stream) const { memory::record_stream(*this, stream); }

}  // namespace ferry
