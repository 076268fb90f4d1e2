// The CPU kernels of the compute operators oneDNN serves: GEMM, 2-d convolution, pooling, batch
// and layer normalization, softmax. They work on host tensors that the caller has shaped and
// allocated (the operator front-ends in ferry/ops do that, and the sim device runs these same
// kernels on its stream workers over its host mappings), so they never allocate outputs.
// Invariants: any strides are accepted (a layout oneDNN cannot take is staged through a dense
// temporary); outputs do not overlap inputs; float32, bfloat16 and float16 accumulate in float32,
// float64 runs portable loops in double (oneDNN has no f64); every call is thread-safe and uses
// at most ferry::get_num_threads() threads of the calling thread's own team.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "ferry/core/tensor.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cpu {

// ---- GEMM ------------------------------------------------------------------------------------
// out[i] = alpha * (a[i] @ b[i]) + beta * out[i] + bias, for every batch index i.
// a: [B, M, K], b: [B, K, N], out: [B, M, N], all 3-d with any strides; a batch stride of 0
// broadcasts. bias: undefined or 1-d [N]. Same dtype for all operands: float32, bfloat16,
// float16, float64, or an integer type (portable loops). beta == 0 ignores out's old values
// (NaNs included), as BLAS does.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1.0,
          double beta = 0.0, const Tensor& bias = Tensor());

// ---- 2-d convolution -------------------------------------------------------------------------
// ferry::Conv2dParams (ferry/device/compute_kernels.h): stride, padding, dilation, groups.
using ::ferry::Conv2dParams;
// input [N, C, H, W], weight [O, C / groups, kH, kW], bias undefined or [O], out [N, O, oH, oW]
// with oH = (H + 2 pH - dH (kH - 1) - 1) / sH + 1. Logical dims are always NCHW; the memory
// format (contiguous or channels-last) is whatever the strides say, for every operand.
void conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, const Conv2dParams& p);
// grad_input [N, C, H, W] from grad_out [N, O, oH, oW] and weight (overwrites grad_input).
void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p);
// grad_weight [O, C / groups, kH, kW] and, when defined, grad_bias [O] (overwritten).
void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& input,
                            const Tensor& grad_out, const Conv2dParams& p);

// ---- pooling ---------------------------------------------------------------------------------
// ferry::Pool2dParams (ferry/device/compute_kernels.h): kernel, stride, padding, dilation (max
// pooling only), ceil_mode, count_include_pad and divisor_override (average pooling only).
using ::ferry::Pool2dParams;
// Output size of one spatial dim as PyTorch computes it (ceil_mode: the last window must start
// inside the input or its left padding).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceil_mode);
// input [N, C, H, W] (or [C, H, W]), out [.., oH, oW]; indices, when defined, int64 of out's
// shape: the argmax's flat index h * W + w inside its (n, c) plane, as PyTorch's.
void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& input,
                        const Pool2dParams& p);
// grad_input (overwritten) gets grad_out scattered (summed) at indices.
void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices);
void avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dParams& p);
void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p);
// PyTorch's adaptive windows: start = floor(i * H / oH), end = ceil((i + 1) * H / oH).
void adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& input);
void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out);

// ---- batch normalization ---------------------------------------------------------------------
// input [N, C, ...] (any rank >= 2; channels-last allowed). weight, bias: undefined or [C].
// Statistics tensors ([C]: save_mean, save_invstd, running_mean, running_var) are float32 when
// the input is bfloat16 or float16, else the input's dtype.
// Training: normalizes with the batch's mean and biased variance, writes save_mean and
// save_invstd = 1 / sqrt(var + eps), and, when running stats are defined, updates them in place:
// running = (1 - momentum) * running + momentum * batch (the variance unbiased, n / (n - 1)).
void batch_norm_forward_training(const Tensor& out, const Tensor& save_mean,
                                 const Tensor& save_invstd, const Tensor& input,
                                 const Tensor& weight, const Tensor& bias,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 double momentum, double eps);
// Inference: normalizes with the running statistics.
void batch_norm_forward_inference(const Tensor& out, const Tensor& input, const Tensor& weight,
                                  const Tensor& bias, const Tensor& running_mean,
                                  const Tensor& running_var, double eps);
// Gradients of either mode. training: mean/invstd are the saved batch statistics and the
// gradient flows through them; otherwise mean/invstd are the running mean and
// 1 / sqrt(running_var + eps) and are constants. Each of grad_input, grad_weight, grad_bias may
// be undefined (not wanted); defined ones are overwritten.
void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                         const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                         bool training);

// ---- layer normalization ---------------------------------------------------------------------
// Normalizes over the last `normalized_ndim` dims of input. weight, bias: undefined or of those
// dims' shape. mean, rstd: the leading dims' shape (numel = rows), float32 for bfloat16/float16
// input, else input's dtype.
void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                        const Tensor& input, const Tensor& weight, const Tensor& bias,
                        int64_t normalized_ndim, double eps);
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                         int64_t normalized_ndim);

// ---- softmax ---------------------------------------------------------------------------------
// softmax (log: log_softmax) of input along dim; out has input's shape and dtype.
void softmax_forward(const Tensor& out, const Tensor& input, int64_t dim, bool log);
// grad_input from grad_out and the forward's output: softmax: y * (g - sum(g * y));
// log_softmax: g - exp(y) * sum(g).
void softmax_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& output,
                      int64_t dim, bool log);

}  // namespace ferry::cpu
