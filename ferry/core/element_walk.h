// for_each_element_offset: visits every element of a (sizes, strides) layout in row-major index
// order, passing its offset in elements. The simple, obviously-correct walk, used by fills,
// printing and test references; bulk copies use the TensorIterator instead.
#pragma once

#include <cstdint>

#include "ferry/core/array_ref.h"
#include "ferry/core/small_vector.h"

namespace ferry {

template <typename Fn>
void for_each_element_offset(IntArrayRef sizes, IntArrayRef strides, Fn&& fn) {
  const size_t rank = sizes.size();
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] == 0) return;
  }
  if (rank == 0) {
    fn(int64_t{0});
    return;
  }
  DimVector index(rank, 0);
  int64_t offset = 0;
  const int64_t inner_size = sizes[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  while (true) {
    for (int64_t i = 0; i < inner_size; ++i) fn(offset + i * inner_stride);
    // Odometer over the outer dimensions.
    size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      offset += strides[d];
      if (++index[d] < sizes[d]) break;
      offset -= strides[d] * sizes[d];
      index[d] = 0;
    }
  }
}

}  // namespace ferry
