// Overflow-checked element counts, storage extents and byte sizes. Every path that makes or views
// a tensor computes its sizes through these, so a shape whose element count, storage extent or
// byte size does not fit int64 raises ShapeError ("storage size calculation overflowed") instead
// of wrapping around to a small number and handing out too little memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/core/array_ref.h"

namespace ferry {

// a * b and a + b into *out; false (and *out unspecified) when the result does not fit int64.
inline bool mul_fits(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool add_fits(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// stride * max(size, 1): the stride of the next-slower dimension of a dense layout of `sizes`.
// Raises ShapeError naming the sizes when it does not fit int64 (possible even for an empty
// tensor, whose zero leaves the other sizes unbounded: [0, 2^40, 2^40]).
int64_t checked_next_dense_stride(int64_t stride, int64_t size, IntArrayRef sizes);

// The product of `sizes` (sizes >= 0): 0 when any size is 0, whatever the others are. Raises
// ShapeError naming `op` and the sizes when the product does not fit int64.
int64_t checked_numel(IntArrayRef sizes, const char* op = "tensor");

// One past the highest element index a layout reaches from offset 0: 1 + sum (size - 1) * stride,
// or 0 when any size is 0 (sizes and strides >= 0, equally long). Raises ShapeError on overflow.
int64_t checked_storage_extent(IntArrayRef sizes, IntArrayRef strides, const char* op = "tensor");

// The bytes a storage needs to hold a layout at `storage_offset`: (offset + extent) * itemsize,
// or 0 for an empty layout. Raises ShapeError when any step does not fit int64.
int64_t checked_storage_nbytes(IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset,
                               size_t itemsize, const char* op = "tensor");

}  // namespace ferry
