// Dense strides that keep a layout's dimension order (see stride_order.h).
#include "ferry/iter/stride_order.h"

#include <algorithm>

namespace ferry {

DimVector infer_dense_strides(IntArrayRef sizes, IntArrayRef strides) {
  const auto ndim = static_cast<int64_t>(sizes.size());
  const DimVector perm = order_dims_fastest_first(ndim, [&](int64_t a, int64_t b) {
    return compare_dim_strides(strides[a], strides[b], sizes[a], sizes[b]);
  });
  DimVector out(sizes.size());
  int64_t next = 1;
  for (int64_t d : perm) {
    out[d] = next;
    next *= std::max<int64_t>(sizes[d], 1);
  }
  return out;
}

}  // namespace ferry
