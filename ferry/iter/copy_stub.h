// copy_stub: the per-device-type copy kernel that copy_ runs once it has built its iterator.
// Declared here, below the backends, so that each backend (ferry/backends/<type>) registers its
// kernel into it with FERRY_REGISTER_DISPATCH(copy_stub, DeviceType::..., &fn).
// The kernel receives an iterator with the destination as output 0 and the source as input 0
// (operand 1), already broadcast, reordered and coalesced, with numel() > 0.
// copy_problem_stub: the CPU engine's entry for a CopyProblem built without an iterator (copy_'s
// dense fast path) or run later in stream order (a staged device copy's host steps); it runs the
// problem on host memory before returning.
#pragma once

#include "ferry/dispatch/dispatch_stub.h"
#include "ferry/iter/copy_problem.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry {

using CopyStubFn = void (*)(TensorIterator& iter, bool non_blocking);
FERRY_DECLARE_DISPATCH(CopyStubFn, copy_stub);

using CopyProblemStubFn = void (*)(const CopyProblem& problem);
FERRY_DECLARE_DISPATCH(CopyProblemStubFn, copy_problem_stub);

}  // namespace ferry
