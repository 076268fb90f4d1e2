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

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    // The slowest dimension's size never scales a stride.
    if (i > 0) stride = checked_next_dense_stride(stride, sizes[i], sizes);
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
      stride = checked_next_dense_stride(stride, sizes[1], sizes);
      for (size_t d = rank - 1; d >= 2; --d) {
        strides[d] = stride;
        stride = checked_next_dense_stride(stride, sizes[d], sizes);
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
