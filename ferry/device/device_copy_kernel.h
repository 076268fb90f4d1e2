// The device kernel hook: one strided, converting copy (or fill) described with device
// addresses, enqueued on a stream. Each device backend registers its kernel into
// device_copy_kernel_stub (sim: the CPU copy engine on the stream's worker; CUDA: a kernel in
// ferry/backends/cuda/copy_kernels.cu); the device copy policy and fill_ call it.
// Invariants: a problem has the shape of a coalesced copy iterator (cpu::CopyProblem's rules:
// dims fastest-first for dst, byte strides, dst never aliasing itself); dst and src lie in memory
// the stream's device may access (its own, or a peer's with access enabled); the kernel only
// enqueues, in stream order, and holds no reference to the memory it names.
#pragma once

#include <cstdint>

#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"
#include "ferry/device/stream.h"
#include "ferry/dispatch/dispatch_stub.h"

namespace ferry {

struct DeviceCopyProblem {
  DimVector sizes;
  DimVector dst_strides;
  DimVector src_strides;
  void* dst = nullptr;
  const void* src = nullptr;  // unused when src_is_value
  ScalarType dst_dtype = ScalarType::Float32;
  ScalarType src_dtype = ScalarType::Float32;
  // Applied after the conversion, in dst's type (conj only for a complex dst).
  bool conj = false;
  bool neg = false;
  // A fill: every element reads `value` (one src_dtype element in its first bytes), carried in
  // the problem itself so that no memory has to outlive the call; src_strides are all 0.
  bool src_is_value = false;
  alignas(16) unsigned char value[16] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  int ndim() const { return static_cast<int>(sizes.size()); }
};

// Enqueues `problem` on `stream` (a stream of the device type the kernel is registered for).
using DeviceCopyKernelFn = void (*)(const DeviceCopyProblem& problem, const Stream& stream);

FERRY_DECLARE_DISPATCH(DeviceCopyKernelFn, device_copy_kernel_stub);

}  // namespace ferry
