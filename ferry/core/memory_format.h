// MemoryFormat: the dense layouts a tensor can be asked for.
// Contiguous is row-major; ChannelsLast orders a 4-d NCHW tensor's strides as NHWC, and
// ChannelsLast3d a 5-d NCDHW tensor's as NDHWC. Preserve keeps the source's layout when it is
// dense and falls back to Contiguous otherwise.
#pragma once

#include <cstdint>
#include <iosfwd>

#include "ferry/core/array_ref.h"
#include "ferry/core/small_vector.h"

namespace ferry {

enum class MemoryFormat : int8_t { Contiguous, ChannelsLast, ChannelsLast3d, Preserve };

std::ostream& operator<<(std::ostream& out, MemoryFormat format);

// Row-major strides for `sizes` (size-0 and size-1 dimensions get the stride they would have
// with size 1, as PyTorch does).
DimVector contiguous_strides(IntArrayRef sizes);

// Strides of `sizes` laid out in `format`; ChannelsLast needs 4 dimensions, ChannelsLast3d 5.
// Raises ShapeError naming the rank otherwise. Preserve is not accepted here.
DimVector strides_for_memory_format(IntArrayRef sizes, MemoryFormat format);

}  // namespace ferry
