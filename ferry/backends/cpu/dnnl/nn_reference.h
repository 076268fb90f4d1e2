// The portable loops behind the compute kernels: what runs for float64 (oneDNN has no f64),
// for integer GEMMs, and for the pooling variants oneDNN does not express (argmax indices as
// PyTorch numbers them, ceil-mode divisors, divisor_override, uneven adaptive windows). They
// take operands that nn_kernels.cc's front ends have checked (shapes, dtypes, devices), accept
// any strides, accumulate in double (float64), float (other float types) or wrapping 64-bit
// integers, and split their outer loops with ferry::parallel_for.
#pragma once

#include <cstdint>

#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/gemm_f64.h"
#include "ferry/core/tensor.h"

namespace ferry::cpu::reference {

// Any dtype but bool and complex; integer dtypes need integral alpha and beta.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
          const Tensor& bias);

// Any float dtype (float64, and the degenerate shapes of the others: no channels, no batch).
void conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, const Conv2dParams& p);
void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p);
void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& input,
                            const Tensor& grad_out, const Conv2dParams& p);

// A float64 product of k > 0 (gemm_f64.h's block, of any size), its blocks split over the pool.
void gemm_f64_matrix(const kernels::GemmBlockF64& g);

// float64 convolutions with channels, a batch and outputs, as im2col and gemm_f64_matrix
// (conv_gemm_f64.cc): what conv.cc runs for float64. The loops above stay, for the degenerate
// shapes and as the tests' reference for these.
void conv2d_forward_f64_gemm(const Tensor& out, const Tensor& input, const Tensor& weight,
                             const Tensor& bias, const Conv2dParams& p);
void conv2d_backward_input_f64_gemm(const Tensor& grad_input, const Tensor& grad_out,
                                    const Tensor& weight, const Conv2dParams& p);
void conv2d_backward_weight_f64_gemm(const Tensor& grad_weight, const Tensor& grad_bias,
                                     const Tensor& input, const Tensor& grad_out,
                                     const Conv2dParams& p);

namespace detail {
// The bytes of col matrix conv_gemm_f64.cc builds at once per thread (32 MiB); returns the
// previous value. For tests, which set it small to cut their images into bands of output rows.
int64_t set_conv_f64_col_budget(int64_t bytes);
}  // namespace detail

// Pooling on 4-d [N, C, H, W] operands; float64, float32, bfloat16 and float16.
void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& input,
                        const Pool2dParams& p);
// Any float dtype; raises IndexError for an index outside its plane.
void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices);
void avg_pool2d_forward(const Tensor& out, const Tensor& input, const Pool2dParams& p);
void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p);
void adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& input);
void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out);

// Normalization and softmax on merged views, float64 only. Batch norm: x is [N, C, S]; layer
// norm: x is [R, D] (weight, bias, and their gradients [D]; mean, rstd [R]); softmax: x is
// [outer, axis, inner].
void batch_norm_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                        const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, bool training,
                        double momentum, double eps);
void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& x,
                         const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                         bool training);
void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps);
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight);
void softmax_forward(const Tensor& out, const Tensor& x, bool log);
void softmax_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& y, bool log);

}  // namespace ferry::cpu::reference
