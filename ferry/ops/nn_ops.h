// The neural-network operators, as PyTorch's torch:: functions: convolution, pooling, batch and
// layer normalization, embedding, dropout, the losses, and joining/splitting tensors. The ones
// with device work are dispatched operators (`ferry ops` lists them) whose kernels check their
// arguments fully on the calling thread (a sim or CUDA kernel never sees a bad argument), shape
// and allocate the outputs on the operands' device and call the compute stubs; their backward
// kernels are dispatched operators too (convolution_backward, native_batch_norm_backward, ...),
// so gradients run on every device. Composites (batch_norm, layer_norm, dropout, nll_loss on
// N-d inputs, cross_entropy, mse_loss, split, chunk) are built from those operators and are
// differentiable through them. Floating ops take float32, bfloat16, float16 and float64;
// indices and class targets are int64 (embedding also takes int32, as PyTorch does).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "ferry/core/generator.h"
#include "ferry/core/tensor.h"

namespace ferry {

// ---- convolution --------------------------------------------------------------------------
// input [N, C, H, W] (or unbatched [C, H, W]), weight [O, C / groups, kH, kW], bias [O]. stride,
// padding and dilation take one value (both dims) or two. The output is channels-last when the
// input or the weight is, else contiguous.
Tensor conv2d(const Tensor& input, const Tensor& weight,
              const std::optional<Tensor>& bias = std::nullopt, IntArrayRef stride = 1,
              IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1);
// Gradients of conv2d's input, weight and bias from grad_output (undefined where output_mask is
// false). PyTorch's convolution_backward for 2-d, non-transposed convolutions.
std::tuple<Tensor, Tensor, Tensor> convolution_backward(const Tensor& grad_output,
                                                        const Tensor& input, const Tensor& weight,
                                                        IntArrayRef stride, IntArrayRef padding,
                                                        IntArrayRef dilation, int64_t groups,
                                                        std::array<bool, 3> output_mask);

// ---- pooling ------------------------------------------------------------------------------
// input [N, C, H, W] or [C, H, W]; an empty stride means the kernel size. Outputs keep the
// input's memory format (channels-last stays channels-last).
Tensor max_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, IntArrayRef dilation = 1, bool ceil_mode = false);
// The output and the int64 indices of each maximum (h * W + w inside its plane), as PyTorch's.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& self, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1,
                                                   bool ceil_mode = false);
Tensor max_pool2d_with_indices_backward(const Tensor& grad_output, const Tensor& self,
                                        IntArrayRef kernel_size, IntArrayRef stride,
                                        IntArrayRef padding, IntArrayRef dilation, bool ceil_mode,
                                        const Tensor& indices);
Tensor avg_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride = {},
                  IntArrayRef padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size,
                           IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                           bool count_include_pad, std::optional<int64_t> divisor_override);
// PyTorch's adaptive windows: start = floor(i * H / oH), end = ceil((i + 1) * H / oH).
Tensor adaptive_avg_pool2d(const Tensor& self, IntArrayRef output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_output, const Tensor& self);

// ---- normalization ------------------------------------------------------------------------
// input [N, C, ...]. training: normalizes with the batch statistics and, when running_mean /
// running_var are given, updates them in place (running = (1 - momentum) * running + momentum *
// batch, the variance unbiased); otherwise normalizes with the running statistics (required).
// weight, bias, running statistics: [C], of the input's dtype or float32 (for bfloat16 and
// float16 inputs). The output keeps the input's memory format.
Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, bool training, double momentum,
                  double eps);
// (output, save_mean, save_invstd): the saved statistics are the batch's ([C], float32 for
// bfloat16/float16 inputs) in training, empty ([0]) in evaluation.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias,
                                                     const std::optional<Tensor>& running_mean,
                                                     const std::optional<Tensor>& running_var,
                                                     bool training, double momentum, double eps);
// Gradients of input, weight and bias (undefined where output_mask is false, and for weight and
// bias when weight is not given). train: the gradient flows through the batch statistics
// save_mean / save_invstd; otherwise the running statistics are constants.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train,
    double eps, std::array<bool, 3> output_mask);

// Normalizes over the trailing dims given by normalized_shape; weight and bias have that shape.
// The output is contiguous.
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape,
                  const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// (output, mean, rstd); mean and rstd have the input's leading sizes followed by ones (float32
// for bfloat16/float16 inputs).
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input,
                                                     IntArrayRef normalized_shape,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias, double eps);
std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad_out, const Tensor& input, IntArrayRef normalized_shape, const Tensor& mean,
    const Tensor& rstd, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    std::array<bool, 3> output_mask);

// ---- embedding and dropout ----------------------------------------------------------------
// Rows of weight [num_embeddings, embedding_dim] at indices (int64 or int32, any shape): the
// result is indices.sizes() + [embedding_dim]. padding_idx >= 0: that row gets no gradient
// (a negative padding_idx means none, as in torch::embedding). scale_grad_by_freq divides each
// row's gradient by the number of times its index occurs. sparse gradients are not supported.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1,
                 bool scale_grad_by_freq = false, bool sparse = false);
Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq);
// train: each element is zeroed with probability p and the rest scaled by 1 / (1 - p); the mask
// is drawn on the host from `generator` (the default generator when null), so every device gets
// the same mask for the same seed. Not training (or p == 0): input itself.
Tensor dropout(const Tensor& input, double p, bool train, Generator* generator = nullptr);

// ---- losses -------------------------------------------------------------------------------
// reduction: "none", "mean" or "sum".
// Negative log likelihood of log-probabilities [N, C] (or [C], or [N, C, d1, ...]) at class
// targets [N] ([], [N, d1, ...]), int64. weight: [C]. "mean" divides by the sum of the weights of
// the targets that are not ignore_index.
Tensor nll_loss(const Tensor& self, const Tensor& target,
                const std::optional<Tensor>& weight = std::nullopt,
                std::string_view reduction = "mean", int64_t ignore_index = -100);
// The 1-d/2-d operator behind nll_loss: reduction as PyTorch's enum (0 none, 1 mean, 2 sum);
// returns (output, total_weight).
std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& self, const Tensor& target,
                                            const std::optional<Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index);
Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                         const std::optional<Tensor>& weight, int64_t reduction,
                         int64_t ignore_index, const Tensor& total_weight);
// log_softmax over the class dim (1, or 0 for a 1-d input) then nll_loss, with PyTorch's label
// smoothing: (1 - s) * nll + s / C * smooth, smooth = -sum over classes of (weight *) log-probs,
// zero at ignored targets, reduced as the nll part (weighted mean over the same total weight).
// A floating target of the input's shape is a class-probability target instead.
Tensor cross_entropy(const Tensor& self, const Tensor& target,
                     const std::optional<Tensor>& weight = std::nullopt,
                     std::string_view reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
// (self - target)^2, broadcasting, reduced.
Tensor mse_loss(const Tensor& self, const Tensor& target, std::string_view reduction = "mean");

// ---- joining and splitting ----------------------------------------------------------------
// Along dim; the dtype is the promotion of all the inputs' (PyTorch's rule), the memory format
// the inputs' common one (else contiguous). 1-d empty tensors are skipped, as PyTorch does.
Tensor cat(ArrayRef<Tensor> tensors, int64_t dim = 0);
// Tensors of one shape, joined along a new dim.
Tensor stack(ArrayRef<Tensor> tensors, int64_t dim = 0);
// Views (narrow) of split_size elements along dim (the last one may be smaller).
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& self, IntArrayRef split_sizes, int64_t dim = 0);
// At most `chunks` views of ceil(size / chunks) elements along dim.
std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim = 0);

}  // namespace ferry
