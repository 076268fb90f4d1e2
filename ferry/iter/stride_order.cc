// Dense strides that keep a layout's dimension order (see stride_order.h).
#include "ferry/iter/stride_order.h"

#include <algorithm>

#include "ferry/core/size_math.h"

namespace ferry {

DimVector infer_dense_strides(IntArrayRef sizes, IntArrayRef strides) {
  const auto ndim = static_cast<int64_t>(sizes.size());
  const DimVector perm = order_dims_fastest_first(ndim, [&](int64_t a, int64_t b) {
    return compare_dim_strides(strides[a], strides[b], sizes[a], sizes[b]);
  });
  DimVector out(sizes.size());
  int64_t next = 1;
  for (size_t k = 0; k < perm.size(); ++k) {
    out[perm[k]] = next;
    if (k + 1 == perm.size()) break;  // the slowest size scales no stride
    next = checked_next_dense_stride(next, sizes[perm[k]], sizes);
  }
  return out;
}

}  // namespace ferry
