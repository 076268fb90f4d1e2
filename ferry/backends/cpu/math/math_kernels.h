// The CPU kernels of reductions, index lookups and the negative log likelihood, on host tensors
// the caller has shaped and allocated (the front-ends in ferry/ops; sim runs these same kernels
// on its stream workers). Any strides are accepted; floating inputs accumulate in double.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cpu {

// Sum, mean, amax (NaN wins, as PyTorch's) or argmax (the first maximum's index along the single
// reduced dim; NaN counts as the maximum) of `input` over `dims` into `out`, which has input's
// rank with size 1 on the reduced dims. Sum and mean convert to out's dtype at the end.
void reduce(const Tensor& out, const Tensor& input, const std::vector<int64_t>& dims,
            ReduceKind kind);
void index_select(const Tensor& out, const Tensor& self, const Tensor& index);
void index_add(const Tensor& self, const Tensor& index, const Tensor& source,
               std::optional<int64_t> skip_index);
void nll_loss_forward(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs,
                      const Tensor& target, const Tensor& weight, bool per_element,
                      int64_t ignore_index);
void nll_loss_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& target,
                       const Tensor& weight, bool per_element, int64_t ignore_index, double scale);

}  // namespace ferry::cpu
