// Stride computation for the dense memory formats.
#include "ferry/core/memory_format.h"

#include <algorithm>
#include <ostream>

#include "ferry/core/error.h"
#include "ferry/core/size_math.h"

namespace ferry {

std::ostream& operator<<(std::ostream& out, MemoryFormat format) {
  switch (format) {
    case MemoryFormat::Contiguous:
      return out << "contiguous_format";
    case MemoryFormat::ChannelsLast:
      return out << "channels_last";
    case MemoryFormat::ChannelsLast3d:
      return out << "channels_last_3d";
    case MemoryFormat::Preserve:
      return out << "preserve_format";
  }
  return out << "unknown_format";
}

namespace {

// stride * max(size, 1), the stride of the next-slower dimension; raises ShapeError naming the
// sizes when it does not fit int64 (possible even for empty tensors: [0, 2^40, 2^40]).
int64_t next_stride(int64_t stride, int64_t size, IntArrayRef sizes) {
  int64_t next = 0;
  const bool fits = mul_fits(stride, std::max<int64_t>(size, 1), &next);
  FERRY_CHECK_AS(ShapeError, fits,
                 "storage size calculation overflowed: expected sizes whose dense strides fit "
                 "int64, but got sizes ",
                 sizes);
  return next;
}

}  // namespace

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    // The slowest dimension's size never scales a stride.
    if (i > 0) stride = next_stride(stride, sizes[i], sizes);
  }
  return strides;
}

DimVector strides_for_memory_format(IntArrayRef sizes, MemoryFormat format) {
  switch (format) {
    case MemoryFormat::Contiguous:
      return contiguous_strides(sizes);
    case MemoryFormat::ChannelsLast:
    case MemoryFormat::ChannelsLast3d: {
      const size_t rank = format == MemoryFormat::ChannelsLast ? 4 : 5;
      FERRY_CHECK_AS(ShapeError, sizes.size() == rank, "memory format ", format, " expects a ",
                     rank, "-d tensor, but got sizes ", sizes, " (", sizes.size(), "-d)");
      // Channels (dim 1) move fastest, then the spatial dims in order, then the batch.
      DimVector strides(rank);
      int64_t stride = 1;
      strides[1] = stride;
      stride = next_stride(stride, sizes[1], sizes);
      for (size_t d = rank - 1; d >= 2; --d) {
        strides[d] = stride;
        stride = next_stride(stride, sizes[d], sizes);
      }
      strides[0] = stride;
      return strides;
    }
    case MemoryFormat::Preserve:
      break;
  }
  FERRY_FAIL_AS(Error, "expected a concrete memory format, but got ", format);
}

}  // namespace ferry
