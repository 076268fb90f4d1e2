// Internal to the device copy policy (device_copy*.cc): the layouts a staged copy uses, shared
// by the planner and by the code that runs the plan so that both see the same temporaries.
#pragma once

#include "ferry/core/small_vector.h"
#include "ferry/core/tensor.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry::detail {

// The lazy-bit work a copy from src to dst does (cpu::CopyProblem's conj and neg).
inline bool conj_differs(const Tensor& dst, const Tensor& src) {
  return is_complex(dst.dtype()) && dst.is_conj() != src.is_conj();
}
inline bool neg_differs(const Tensor& dst, const Tensor& src) {
  return dst.is_neg() != src.is_neg();
}
// Copying src into dst moves the stored values unchanged (same dtype, no conj/neg to apply).
inline bool same_stored_values(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && !conj_differs(dst, src) && !neg_differs(dst, src);
}

// The source as copy_ reads it: broadcast to dst's sizes.
inline Tensor expanded_source(const Tensor& dst, const Tensor& src) {
  return src.sizes().equals(dst.sizes()) ? src : src.expand(dst.sizes());
}

// A view of `src` with every broadcast (stride-0) dimension cut to size 1: the elements a copy
// actually has to move. Expanding it back to src's sizes gives src.
Tensor compact_source(const Tensor& src);

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
