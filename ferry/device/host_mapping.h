// Direct host access (DeepPlan's mapped pinned memory): a device tensor that views pinned or
// registered host memory, so kernels on the device read the bytes in place over the host link
// instead of after a copy (CUDA: cudaHostGetDevicePointer; sim: kernels read the host bytes and
// are charged their size over the h2d bandwidth).
// Guarantees: the result has the source's dtype, sizes, strides and storage offset, and its
// storage keeps the host storage alive; its elements are the host bytes themselves (writes by
// either side are seen by the other, ordered only by stream synchronization).
#pragma once

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"

namespace ferry {

// A tensor on `device` (a sim or CUDA device) over `pinned`'s whole storage. Raises DeviceError
// naming what was expected and given for an undefined or non-CPU `pinned`, a CPU `device`, or
// storage that is not wholly pinned or registered host memory (pageable memory).
Tensor map_host_memory(const Tensor& pinned, Device device);

// Whether `t` is a device tensor made by map_host_memory (or a view of one).
bool is_host_mapped(const Tensor& t);

}  // namespace ferry
