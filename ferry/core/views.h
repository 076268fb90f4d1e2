// The view operations' metadata arithmetic, without autograd: what the dispatched view
// operators (ferry/ops/view_ops.cc) run at every backend key. Each returns a new TensorImpl over
// the same storage (as_strided checks that every element it can reach lies inside it); none
// touches device memory. Call these directly only where no graph may be recorded (kernels,
// iterators, autograd's own formulas with grad mode off).
#pragma once

#include <cstdint>
#include <optional>

#include "ferry/core/tensor.h"

namespace ferry::native {

Tensor alias(const Tensor& self);
Tensor as_strided(const Tensor& self, IntArrayRef sizes, IntArrayRef strides,
                  std::optional<int64_t> storage_offset = std::nullopt);
Tensor view(const Tensor& self, IntArrayRef sizes);
Tensor permute(const Tensor& self, IntArrayRef dims);
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor slice(const Tensor& self, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step);
Tensor select(const Tensor& self, int64_t dim, int64_t index);
Tensor expand(const Tensor& self, IntArrayRef sizes);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor squeeze(const Tensor& self);
Tensor squeeze(const Tensor& self, int64_t dim);

// `sizes` with a single -1 replaced so that the product is `numel`; raises ShapeError naming
// `op` when no such size exists.
DimVector infer_sizes(IntArrayRef sizes, int64_t numel, const char* op);
// Strides that view (old_sizes, old_strides) as new_sizes, or nullopt when a new dimension
// would span two non-contiguous runs (then only a copy can have the new shape).
std::optional<DimVector> compute_view_strides(IntArrayRef old_sizes, IntArrayRef old_strides,
                                              IntArrayRef new_sizes);

}  // namespace ferry::native
