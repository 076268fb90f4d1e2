// copy_stub: the per-device-type copy kernel that copy_ runs once it has built its iterator.
// Declared here, below the backends, so that each backend (ferry/backends/<type>) registers its
// kernel into it with FERRY_REGISTER_DISPATCH(copy_stub, DeviceType::..., &fn).
// The kernel receives an iterator with the destination as output 0 and the source as input 0
// (operand 1), already broadcast, reordered and coalesced, with numel() > 0.
#pragma once

#include "ferry/dispatch/dispatch_stub.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry {

using CopyStubFn = void (*)(TensorIterator& iter, bool non_blocking);

FERRY_DECLARE_DISPATCH(CopyStubFn, copy_stub);

// What a copy kernel applies after converting, in dst's type: conj where the two operands'
// conj bits differ (complex destinations only), neg where their neg bits differ. A view with a
// bit set reads back the transformed value, so storing the transform makes dst read as src.
struct CopyLazyBits {
  bool conj = false;
  bool neg = false;
};
CopyLazyBits copy_lazy_bits(const TensorIterator& copy_iter);

}  // namespace ferry
