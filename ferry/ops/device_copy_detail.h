// Internal to the device copy policy (device_copy*.cc): the layouts a staged copy uses, shared
// by the planner and by the code that runs the plan so that both see the same temporaries.
#pragma once

#include "ferry/core/small_vector.h"
#include "ferry/core/tensor.h"
#include "ferry/iter/copy_problem.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry::detail {

// Copying src into dst moves the stored values unchanged (same dtype, no conj/neg to apply).
inline bool same_stored_values(const Tensor& dst, const Tensor& src) {
  const CopyLazyBits bits = copy_lazy_bits(dst, src);
  return dst.dtype() == src.dtype() && !bits.conj && !bits.neg;
}

// The source as copy_ reads it: broadcast to dst's sizes.
inline Tensor expanded_source(const Tensor& dst, const Tensor& src) {
  return src.sizes().equals(dst.sizes()) ? src : src.expand(dst.sizes());
}

// The layout (element strides) a source-side staged copy moves: dst's own when dst is dense
// (the bytes land in place), else the source's when it is dense with dst's dtype and lazy bits
// (no source temporary), else a dense layout in dst's dimension order.
DimVector source_side_layout(const Tensor& dst, const Tensor& src_expanded);

// The layout a destination-side staged copy moves the compact source in: its own when it is
// dense, else a dense layout in its dimension order.
DimVector destination_side_layout(const Tensor& compact);

// New memory on `device` with these sizes, strides, dtype and lazy bits (pinned host memory when
// `pinned`; the device's current stream otherwise).
Tensor staging_tensor(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype, Device device,
                      bool conj, bool neg, bool pinned);

}  // namespace ferry::detail
