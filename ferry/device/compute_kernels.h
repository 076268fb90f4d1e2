// The compute kernels a backend provides, beside its copy kernel: one DispatchStub per kernel,
// called by the operator front-ends (ferry/ops) with every output already shaped and allocated
// on the operands' device, and filled by each backend: the CPU with its loops and oneDNN
// (ferry/backends/cpu), sim by running those same CPU kernels on its stream workers
// (ferry/backends/sim/sim_compute.cc), CUDA with its own (ferry/backends/cuda).
// Invariants: operands are on one device; kernels enqueue on that device's current stream and
// return without waiting (the CPU runs them at once); they never allocate outputs and never
// resize; errors in arguments are raised before anything is enqueued.
// The shapes, dtypes and meanings of each kernel's operands are those of ferry/backends/cpu/
// dnnl/nn_kernels.h and ferry/backends/cpu/math/math_kernels.h, which document them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "ferry/core/tensor.h"
#include "ferry/dispatch/dispatch_stub.h"

namespace ferry {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

struct Pool2dParams {
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;            // average pooling only
  std::optional<int64_t> divisor_override;  // average pooling only
};

enum class ReduceKind : uint8_t { Sum, Mean, Amax, Argmax };

// ---- reductions and indexing (ferry/backends/cpu/math) -------------------------------------
// out has input's rank with size 1 on every reduced dim; `dims` lists them (sorted, unique).
using ReduceFn = void (*)(const Tensor& out, const Tensor& input, const std::vector<int64_t>& dims,
                          ReduceKind kind);
// out[i, ...] = self[index[i], ...] along dim 0 (embedding's lookup); index int64 or int32.
using IndexSelectFn = void (*)(const Tensor& out, const Tensor& self, const Tensor& index);
// self[index[i], ...] += source[i, ...] along dim 0 (embedding's backward); rows with index ==
// skip_index (when given) are left out.
using IndexAddFn = void (*)(const Tensor& self, const Tensor& index, const Tensor& source,
                            std::optional<int64_t> skip_index);
// Negative log likelihood of log_probs [N, C] (or [C]) at target [N] (int64), per element into
// out [N] (reduction none) or summed into out [] (the caller divides for mean); total_weight []
// receives the sum of the weights of the non-ignored targets. weight: undefined or [C].
using NllLossForwardFn = void (*)(const Tensor& out, const Tensor& total_weight,
                                  const Tensor& log_probs, const Tensor& target,
                                  const Tensor& weight, bool per_element, int64_t ignore_index);
// grad_input [N, C] (overwritten) from grad_out ([N] per element, else []) scaled by `scale`.
using NllLossBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_out,
                                   const Tensor& target, const Tensor& weight, bool per_element,
                                   int64_t ignore_index, double scale);

FERRY_DECLARE_DISPATCH(ReduceFn, reduce_stub);
FERRY_DECLARE_DISPATCH(IndexSelectFn, index_select_stub);
FERRY_DECLARE_DISPATCH(IndexAddFn, index_add_stub);
FERRY_DECLARE_DISPATCH(NllLossForwardFn, nll_loss_forward_stub);
FERRY_DECLARE_DISPATCH(NllLossBackwardFn, nll_loss_backward_stub);

// ---- the oneDNN family (ferry/backends/cpu/dnnl) --------------------------------------------
using GemmFn = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                        double beta, const Tensor& bias);
using Conv2dForwardFn = void (*)(const Tensor& out, const Tensor& input, const Tensor& weight,
                                 const Tensor& bias, const Conv2dParams& p);
using Conv2dBackwardInputFn = void (*)(const Tensor& grad_input, const Tensor& grad_out,
                                       const Tensor& weight, const Conv2dParams& p);
using Conv2dBackwardWeightFn = void (*)(const Tensor& grad_weight, const Tensor& grad_bias,
                                        const Tensor& input, const Tensor& grad_out,
                                        const Conv2dParams& p);
using MaxPool2dForwardFn = void (*)(const Tensor& out, const Tensor& indices, const Tensor& input,
                                    const Pool2dParams& p);
using MaxPool2dBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_out,
                                     const Tensor& indices);
using AvgPool2dForwardFn = void (*)(const Tensor& out, const Tensor& input, const Pool2dParams& p);
using AvgPool2dBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_out,
                                     const Pool2dParams& p);
using AdaptiveAvgPool2dFn = void (*)(const Tensor& out, const Tensor& input);
using BatchNormTrainingFn = void (*)(const Tensor& out, const Tensor& save_mean,
                                     const Tensor& save_invstd, const Tensor& input,
                                     const Tensor& weight, const Tensor& bias,
                                     const Tensor& running_mean, const Tensor& running_var,
                                     double momentum, double eps);
using BatchNormInferenceFn = void (*)(const Tensor& out, const Tensor& input, const Tensor& weight,
                                      const Tensor& bias, const Tensor& running_mean,
                                      const Tensor& running_var, double eps);
using BatchNormBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_weight,
                                     const Tensor& grad_bias, const Tensor& grad_out,
                                     const Tensor& input, const Tensor& weight, const Tensor& mean,
                                     const Tensor& invstd, bool training);
using LayerNormForwardFn = void (*)(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& input, const Tensor& weight, const Tensor& bias,
                                    int64_t normalized_ndim, double eps);
using LayerNormBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_weight,
                                     const Tensor& grad_bias, const Tensor& grad_out,
                                     const Tensor& input, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& weight, int64_t normalized_ndim);
using SoftmaxForwardFn = void (*)(const Tensor& out, const Tensor& input, int64_t dim, bool log);
using SoftmaxBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_out,
                                   const Tensor& output, int64_t dim, bool log);

FERRY_DECLARE_DISPATCH(GemmFn, gemm_stub);
FERRY_DECLARE_DISPATCH(Conv2dForwardFn, conv2d_forward_stub);
FERRY_DECLARE_DISPATCH(Conv2dBackwardInputFn, conv2d_backward_input_stub);
FERRY_DECLARE_DISPATCH(Conv2dBackwardWeightFn, conv2d_backward_weight_stub);
FERRY_DECLARE_DISPATCH(MaxPool2dForwardFn, max_pool2d_forward_stub);
FERRY_DECLARE_DISPATCH(MaxPool2dBackwardFn, max_pool2d_backward_stub);
FERRY_DECLARE_DISPATCH(AvgPool2dForwardFn, avg_pool2d_forward_stub);
FERRY_DECLARE_DISPATCH(AvgPool2dBackwardFn, avg_pool2d_backward_stub);
FERRY_DECLARE_DISPATCH(AdaptiveAvgPool2dFn, adaptive_avg_pool2d_forward_stub);
FERRY_DECLARE_DISPATCH(AdaptiveAvgPool2dFn, adaptive_avg_pool2d_backward_stub);
FERRY_DECLARE_DISPATCH(BatchNormTrainingFn, batch_norm_forward_training_stub);
FERRY_DECLARE_DISPATCH(BatchNormInferenceFn, batch_norm_forward_inference_stub);
FERRY_DECLARE_DISPATCH(BatchNormBackwardFn, batch_norm_backward_stub);
FERRY_DECLARE_DISPATCH(LayerNormForwardFn, layer_norm_forward_stub);
FERRY_DECLARE_DISPATCH(LayerNormBackwardFn, layer_norm_backward_stub);
FERRY_DECLARE_DISPATCH(SoftmaxForwardFn, softmax_forward_stub);
FERRY_DECLARE_DISPATCH(SoftmaxBackwardFn, softmax_backward_stub);

}  // namespace ferry
