// Ordering dimensions by how fast they move in memory, shared by TensorIterator's dimension
// reordering and by the dense layouts that preserve a source's layout (clone, to). The order
// is "fastest first": position 0 holds the dimension with the smallest stride. Ties and
// broadcast (stride 0) dimensions keep their relative order, innermost (last) dimension first,
// so a row-major tensor comes out exactly reversed.
#pragma once

#include <cstdint>
#include <utility>

#include "ferry/core/array_ref.h"
#include "ferry/core/small_vector.h"

namespace ferry {

// Whether dimension a (stride_a, size_a) should move faster than dimension b: -1 yes, 1 no
// (swap them), 0 no opinion. A zero stride gives no opinion (a broadcast dimension has no place
// in memory); equal strides put the smaller dimension first, as PyTorch does, so that a size-1
// dimension sharing its stride with a real one never lands inside a run it would split.
inline int compare_dim_strides(int64_t stride_a, int64_t stride_b, int64_t size_a, int64_t size_b) {
  if (stride_a == 0 || stride_b == 0) return 0;
  if (stride_a != stride_b) return stride_a < stride_b ? -1 : 1;
  return size_a > size_b ? 1 : 0;
}

// Returns perm with perm[i] = the dimension placed at position i, fastest first.
// `compare(a, b)` returns -1, 0 or 1 as compare_dim_strides does. The sort is an insertion sort
// that steps over "no opinion" answers instead of stopping at them: with ambiguous comparisons
// the relation is not a strict weak order, so std::sort would be undefined; this is PyTorch's
// algorithm, and it leaves dimensions nobody has an opinion about in reversed (row-major) order.
template <typename Compare>
DimVector order_dims_fastest_first(int64_t ndim, Compare&& compare) {
  DimVector perm(static_cast<size_t>(ndim));
  for (int64_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  for (int64_t i = 1; i < ndim; ++i) {
    int64_t moving = i;
    for (int64_t j = i - 1; j >= 0; --j) {
      const int c = compare(perm[j], perm[moving]);
      if (c > 0) {
        std::swap(perm[j], perm[moving]);
        moving = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

// Element strides of a non-overlapping, dense layout of `sizes` whose dimensions are ordered
// in memory as `strides` orders them (PyTorch's infer_dense_strides): a sliced or expanded
// transposed tensor gets transposed dense strides, so copying into it walks both the same way.
DimVector infer_dense_strides(IntArrayRef sizes, IntArrayRef strides);

}  // namespace ferry
