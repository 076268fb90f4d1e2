// The device kernel hook: one strided, converting copy (or fill) described with device
// addresses, enqueued on a stream. Each device backend registers its kernel into
// device_copy_kernel_stub (sim: the CPU copy engine on the stream's worker; CUDA: a kernel in
// ferry/backends/cuda/copy_kernels.cu); the device copy policy and fill_ call it.
// Invariants: the problem is a CopyProblem (ferry/iter/copy_problem.h: the shape of a coalesced
// copy iterator, dims fastest-first for dst, byte strides, dst never aliasing itself, or a fill
// carrying its value); dst and src lie in memory the stream's device may access (its own, or a
// peer's with access enabled); the kernel only enqueues, in stream order, and holds no
// reference to the memory it names.
#pragma once

#include "ferry/device/stream.h"
#include "ferry/dispatch/dispatch_stub.h"
#include "ferry/iter/copy_problem.h"

namespace ferry {

// Enqueues `problem` on `stream` (a stream of the device type the kernel is registered for).
using DeviceCopyKernelFn = void (*)(const CopyProblem& problem, const Stream& stream);

FERRY_DECLARE_DISPATCH(DeviceCopyKernelFn, device_copy_kernel_stub);

}  // namespace ferry
