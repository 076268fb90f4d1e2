// Overflow-checked size arithmetic (size_math.h). Every error names the operation, the sizes
// and what did not fit, as PyTorch's "Storage size calculation overflowed" does.
#include "ferry/core/size_math.h"

#include <algorithm>
#include <limits>

#include "ferry/core/error.h"

namespace ferry {

int64_t checked_next_dense_stride(int64_t stride, int64_t size, IntArrayRef sizes) {
  int64_t next = 0;
  const bool fits = mul_fits(stride, std::max<int64_t>(size, 1), &next);
  FERRY_CHECK_AS(ShapeError, fits,
                 "storage size calculation overflowed: expected sizes whose dense strides fit "
                 "int64, but got sizes ",
                 sizes);
  return next;
}

int64_t checked_numel(IntArrayRef sizes, const char* op) {
  // A zero anywhere makes the product 0, even when the other sizes alone would overflow.
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  int64_t numel = 1;
  for (int64_t s : sizes) {
    const bool fits = mul_fits(numel, s, &numel);
    FERRY_CHECK_AS(ShapeError, fits, op,
                   ": storage size calculation overflowed: expected sizes whose element count "
                   "fits int64 (at most ",
                   std::numeric_limits<int64_t>::max(), "), but got sizes ", sizes);
  }
  return numel;
}

int64_t checked_storage_extent(IntArrayRef sizes, IntArrayRef strides, const char* op) {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t span = 0;
    const bool fits = mul_fits(sizes[i] - 1, strides[i], &span) && add_fits(extent, span, &extent);
    FERRY_CHECK_AS(ShapeError, fits, op,
                   ": storage size calculation overflowed: expected sizes and strides whose "
                   "storage extent fits int64, but got sizes ",
                   sizes, " and strides ", strides);
  }
  return extent;
}

int64_t checked_storage_nbytes(IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset,
                               size_t itemsize, const char* op) {
  const int64_t extent = checked_storage_extent(sizes, strides, op);
  if (extent == 0) return 0;
  int64_t elements = 0;
  int64_t nbytes = 0;
  const bool fits = add_fits(storage_offset, extent, &elements) &&
                    mul_fits(elements, static_cast<int64_t>(itemsize), &nbytes);
  FERRY_CHECK_AS(ShapeError, fits, op,
                 ": storage size calculation overflowed: expected a layout whose byte size fits "
                 "int64, but sizes ",
                 sizes, " and strides ", strides, " at storage offset ", storage_offset, " with ",
                 itemsize, "-byte elements reach beyond ", std::numeric_limits<int64_t>::max(),
                 " bytes");
  return nbytes;
}

}  // namespace ferry
