// conv2d and the 2-d poolings, forward and backward, as dispatched operators: PyTorch's argument
// checks and output shapes (its messages where it has them), outputs allocated on the input's
// device in the input's memory format (channels-last stays channels-last), then the conv / pool
// stubs. Unbatched [C, H, W] inputs run as a batch of one.
#include <string>

#include "ferry/core/views.h"
#include "ferry/device/compute_kernels.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"
#include "ferry/ops/nn_ops.h"
#include "ferry/ops/op_checks.h"
#include "ferry/ops/op_registration.h"

namespace ferry {
namespace {

using op_checks::check_floating;
using op_checks::check_same_device;
using op_checks::check_same_dtype;
using op_checks::pair_param;

bool is_channels_last(const Tensor& t) {
  return t.dim() == 4 && t.suggest_memory_format() == MemoryFormat::ChannelsLast;
}

// ---- convolution ----------------------------------------------------------------------------

Conv2dParams conv_params(IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                         int64_t groups) {
  Conv2dParams p;
  p.stride = pair_param("conv2d", "stride", stride);
  p.padding = pair_param("conv2d", "padding", padding);
  p.dilation = pair_param("conv2d", "dilation", dilation);
  p.groups = groups;
  for (int i = 0; i < 2; ++i) {
    FERRY_CHECK_AS(ShapeError, p.stride[i] > 0, "conv2d: non-positive stride is not supported");
    FERRY_CHECK_AS(ShapeError, p.padding[i] >= 0, "conv2d: negative padding is not supported");
    FERRY_CHECK_AS(ShapeError, p.dilation[i] > 0, "conv2d: dilation should be greater than zero");
  }
  FERRY_CHECK_AS(ShapeError, groups > 0, "conv2d: non-positive groups is not supported");
  return p;
}

struct ConvShape {
  int64_t oh, ow;
};

// input [N, C, H, W] (batched already) against weight and the parameters; returns the output's
// spatial size.
ConvShape check_conv(const char* op, const Tensor& x, const Tensor& weight, const Conv2dParams& p) {
  FERRY_CHECK_AS(ShapeError, weight.dim() == 4, op,
                 ": expected a 4-D weight [out_channels, in_channels / groups, kH, kW], but got "
                 "weight of size ",
                 weight.sizes());
  const int64_t o = weight.size(0), g = p.groups;
  FERRY_CHECK_AS(ShapeError, o >= g, op, ": Given groups=", g, ", expected weight to be at least ",
                 g, " at dimension 0, but got weight of size ", weight.sizes(), " instead");
  FERRY_CHECK_AS(ShapeError, o % g == 0, op, ": Given groups=", g,
                 ", expected weight to be divisible by ", g,
                 " at dimension 0, but got weight of size ", weight.sizes(), " instead");
  FERRY_CHECK_AS(ShapeError, x.size(1) == weight.size(1) * g, op, ": Given groups=", g,
                 ", weight of size ", weight.sizes(), ", expected input", x.sizes(), " to have ",
                 weight.size(1) * g, " channels, but got ", x.size(1), " channels instead");
  ConvShape s{};
  int64_t* out[2] = {&s.oh, &s.ow};
  for (int i = 0; i < 2; ++i) {
    const int64_t padded = x.size(2 + i) + 2 * p.padding[i];
    const int64_t span = p.dilation[i] * (weight.size(2 + i) - 1) + 1;
    FERRY_CHECK_AS(ShapeError, padded >= span, op, ": Calculated padded input size per channel: (",
                   x.size(2) + 2 * p.padding[0], " x ", x.size(3) + 2 * p.padding[1],
                   "). Kernel size: (", p.dilation[0] * (weight.size(2) - 1) + 1, " x ",
                   p.dilation[1] * (weight.size(3) - 1) + 1,
                   "). Kernel size can't be greater than actual input size");
    *out[i] = (padded - span) / p.stride[i] + 1;
  }
  return s;
}

void check_conv_operands(const char* op, const Tensor& input, const Tensor& weight) {
  FERRY_CHECK_AS(ShapeError, input.dim() == 3 || input.dim() == 4, op,
                 ": Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of "
                 "size: ",
                 input.sizes());
  check_same_device(op, {&input, &weight});
  check_floating(op, "input", input);
  check_same_dtype(op, "input", input, "weight", weight);
}

MemoryFormat conv_format(const Tensor& x, const Tensor& weight) {
  return is_channels_last(x) || is_channels_last(weight) ? MemoryFormat::ChannelsLast
                                                         : MemoryFormat::Contiguous;
}

Tensor conv2d_kernel(const Tensor& input, const Tensor& weight,
                     const std::optional<Tensor>& bias_opt, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef dilation, int64_t groups) {
  constexpr const char* kOp = "conv2d";
  const Tensor& bias = op_checks::value_or_undefined(bias_opt);
  check_conv_operands(kOp, input, weight);
  const Conv2dParams p = conv_params(stride, padding, dilation, groups);
  const bool unbatched = input.dim() == 3;
  const Tensor x = unbatched ? native::unsqueeze(input, 0) : input;
  const ConvShape s = check_conv(kOp, x, weight, p);
  if (bias.defined()) {
    check_same_device(kOp, {&input, &bias});
    check_same_dtype(kOp, "input", input, "bias", bias);
    FERRY_CHECK_AS(ShapeError, bias.dim() == 1 && bias.size(0) == weight.size(0), kOp,
                   ": Given weight of size ", weight.sizes(),
                   ", expected bias to be 1-dimensional with ", weight.size(0),
                   " elements, but got bias of size ", bias.sizes(), " instead");
  }
  Tensor out = empty({x.size(0), weight.size(0), s.oh, s.ow},
                     x.options().memory_format(conv_format(x, weight)));
  if (out.numel() > 0) {
    if (x.size(1) == 0) {
      // No input channels: the output is the bias (or zeros).
      if (bias.defined()) {
        out.copy_(native::expand(native::view(bias, {1, bias.size(0), 1, 1}), out.sizes()));
      } else {
        out.zero_();
      }
    } else {
      conv2d_forward_stub(x.device().type(), out, x, weight, bias, p);
    }
  }
  return unbatched ? native::squeeze(out, 0) : out;
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward_kernel(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, IntArrayRef stride,
    IntArrayRef padding, IntArrayRef dilation, int64_t groups, bool input_grad, bool weight_grad,
    bool bias_grad) {
  constexpr const char* kOp = "convolution_backward";
  check_conv_operands(kOp, input, weight);
  check_same_device(kOp, {&input, &grad_output});
  check_same_dtype(kOp, "input", input, "grad_output", grad_output);
  const Conv2dParams p = conv_params(stride, padding, dilation, groups);
  const bool unbatched = input.dim() == 3;
  const Tensor x = unbatched ? native::unsqueeze(input, 0) : input;
  const ConvShape s = check_conv(kOp, x, weight, p);
  const DimVector out_sizes{x.size(0), weight.size(0), s.oh, s.ow};
  FERRY_CHECK_AS(
      ShapeError,
      grad_output.dim() == input.dim() &&
          (unbatched ? native::unsqueeze(grad_output, 0) : grad_output).sizes().equals(out_sizes),
      kOp, ": expected grad_output of the convolution's output shape ",
      unbatched ? IntArrayRef(out_sizes).slice(1) : IntArrayRef(out_sizes), " for input ",
      input.sizes(), " and weight ", weight.sizes(), ", but got ", grad_output.sizes());
  const Tensor go = unbatched ? native::unsqueeze(grad_output, 0) : grad_output;
  const DeviceType device = x.device().type();
  const bool empty_work = go.numel() == 0 || x.size(1) == 0;
  Tensor grad_input, grad_weight, grad_bias;
  if (input_grad) {
    grad_input = empty(x.sizes(), x.options().memory_format(conv_format(x, weight)));
    if (empty_work) {
      grad_input.zero_();
    } else if (grad_input.numel() > 0) {
      conv2d_backward_input_stub(device, grad_input, go, weight, p);
    }
    if (unbatched) grad_input = native::squeeze(grad_input, 0);
  }
  if (bias_grad) grad_bias = empty({weight.size(0)}, weight.options());
  if (weight_grad) {
    grad_weight = empty_like(weight);
    if (empty_work) {
      grad_weight.zero_();
    } else if (grad_weight.numel() > 0) {
      conv2d_backward_weight_stub(device, grad_weight, grad_bias, x, go, p);
      return {grad_input, grad_weight, grad_bias};
    }
  }
  if (bias_grad) grad_bias = go.sum({0, 2, 3});
  return {grad_input, grad_weight, grad_bias};
}

// ---- pooling --------------------------------------------------------------------------------

int64_t div_floor(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// PyTorch's pooling_output_shape.
int64_t pool_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                         bool ceil_mode) {
  int64_t out =
      div_floor(in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Pool2dParams pool_params(const char* op, IntArrayRef kernel_size, IntArrayRef stride,
                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Pool2dParams p;
  p.kernel = pair_param(op, "kernel_size", kernel_size);
  p.stride = stride.empty() ? p.kernel : pair_param(op, "stride", stride);
  p.padding = pair_param(op, "padding", padding);
  p.dilation = pair_param(op, "dilation", dilation);
  p.ceil_mode = ceil_mode;
  FERRY_CHECK_AS(ShapeError, p.kernel[0] > 0 && p.kernel[1] > 0, op,
                 ": kernel size should be greater than zero, but got kH: ", p.kernel[0],
                 " kW: ", p.kernel[1]);
  FERRY_CHECK_AS(ShapeError, p.stride[0] > 0 && p.stride[1] > 0, op,
                 ": stride should be greater than zero, but got dH: ", p.stride[0],
                 " dW: ", p.stride[1]);
  FERRY_CHECK_AS(ShapeError, p.dilation[0] > 0 && p.dilation[1] > 0, op,
                 ": dilation should be greater than zero, but got dilationH: ", p.dilation[0],
                 " dilationW: ", p.dilation[1]);
  FERRY_CHECK_AS(
      ShapeError,
      p.padding[0] >= 0 && p.padding[1] >= 0 && p.kernel[1] / 2 >= p.padding[1] &&
          p.kernel[0] / 2 >= p.padding[0],
      op,
      ": pad should be smaller than or equal to half of kernel size, but got padW = ", p.padding[1],
      ", padH = ", p.padding[0], ", kW = ", p.kernel[1], ", kH = ", p.kernel[0]);
  return p;
}

// The output sizes of pooling `input` (3-d or 4-d, non-empty planes) with p.
DimVector pool_output_sizes(const char* op, const Tensor& input, const Pool2dParams& p) {
  const int64_t d = input.dim();
  FERRY_CHECK_AS(
      ShapeError,
      (d == 3 || d == 4) && input.size(-1) > 0 && input.size(-2) > 0 && input.size(-3) > 0, op,
      ": Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
      "input, but got: ",
      input.sizes());
  check_floating(op, "input", input);
  const int64_t oh = pool_output_size(input.size(-2), p.kernel[0], p.padding[0], p.stride[0],
                                      p.dilation[0], p.ceil_mode);
  const int64_t ow = pool_output_size(input.size(-1), p.kernel[1], p.padding[1], p.stride[1],
                                      p.dilation[1], p.ceil_mode);
  FERRY_CHECK_AS(ShapeError, oh >= 1 && ow >= 1, op, ": Given input size: (", input.size(-3), "x",
                 input.size(-2), "x", input.size(-1), "). Calculated output size: (",
                 input.size(-3), "x", oh, "x", ow, "). Output size is too small");
  DimVector sizes(input.sizes());
  sizes[d - 2] = oh;
  sizes[d - 1] = ow;
  return sizes;
}

// A new tensor of `sizes` in input's memory format, on its device.
Tensor pool_empty(IntArrayRef sizes, const Tensor& input, ScalarType dtype) {
  const MemoryFormat f =
      is_channels_last(input) ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  return empty(sizes, TensorOptions(dtype).device(input.device()).memory_format(f));
}

void check_grad_output(const char* op, const Tensor& grad_output, const Tensor& input,
                       IntArrayRef expected) {
  check_same_device(op, {&input, &grad_output});
  check_same_dtype(op, "input", input, "grad_output", grad_output);
  FERRY_CHECK_AS(ShapeError, grad_output.sizes().equals(expected), op,
                 ": expected grad_output of the pooling's output shape ", expected, " for input ",
                 input.sizes(), ", but got ", grad_output.sizes());
}

std::tuple<Tensor, Tensor> max_pool2d_impl(const Tensor& self, IntArrayRef kernel_size,
                                           IntArrayRef stride, IntArrayRef padding,
                                           IntArrayRef dilation, bool ceil_mode,
                                           bool with_indices) {
  constexpr const char* kOp = "max_pool2d";
  const Pool2dParams p = pool_params(kOp, kernel_size, stride, padding, dilation, ceil_mode);
  const DimVector sizes = pool_output_sizes(kOp, self, p);
  Tensor out = pool_empty(sizes, self, self.dtype());
  Tensor indices = with_indices ? pool_empty(sizes, self, kInt64) : Tensor();
  if (out.numel() > 0) max_pool2d_forward_stub(self.device().type(), out, indices, self, p);
  return {out, indices};
}

Tensor max_pool2d_kernel(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                         IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool2d_impl(self, kernel_size, stride, padding, dilation, ceil_mode, false));
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices_kernel(const Tensor& self,
                                                          IntArrayRef kernel_size,
                                                          IntArrayRef stride, IntArrayRef padding,
                                                          IntArrayRef dilation, bool ceil_mode) {
  return max_pool2d_impl(self, kernel_size, stride, padding, dilation, ceil_mode, true);
}

Tensor max_pool2d_with_indices_backward_kernel(const Tensor& grad_output, const Tensor& self,
                                               IntArrayRef kernel_size, IntArrayRef stride,
                                               IntArrayRef padding, IntArrayRef dilation,
                                               bool ceil_mode, const Tensor& indices) {
  constexpr const char* kOp = "max_pool2d_with_indices_backward";
  const Pool2dParams p = pool_params(kOp, kernel_size, stride, padding, dilation, ceil_mode);
  const DimVector sizes = pool_output_sizes(kOp, self, p);
  check_grad_output(kOp, grad_output, self, sizes);
  check_same_device(kOp, {&self, &indices});
  op_checks::check_index_dtype(kOp, "indices", indices, false);
  FERRY_CHECK_AS(ShapeError, indices.sizes().equals(sizes), kOp, ": expected indices of shape ",
                 IntArrayRef(sizes), ", but got ", indices.sizes());
  Tensor grad_input = pool_empty(self.sizes(), self, self.dtype());
  if (grad_input.numel() > 0) {
    max_pool2d_backward_stub(self.device().type(), grad_input, grad_output, indices);
  }
  return grad_input;
}

Pool2dParams avg_params(const char* op, IntArrayRef kernel_size, IntArrayRef stride,
                        IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                        std::optional<int64_t> divisor_override) {
  Pool2dParams p = pool_params(op, kernel_size, stride, padding, 1, ceil_mode);
  p.count_include_pad = count_include_pad;
  p.divisor_override = divisor_override;
  FERRY_CHECK_AS(ShapeError, !divisor_override || *divisor_override != 0, op,
                 ": divisor must be not zero");
  return p;
}

Tensor avg_pool2d_kernel(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                         IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override) {
  constexpr const char* kOp = "avg_pool2d";
  const Pool2dParams p =
      avg_params(kOp, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  Tensor out = pool_empty(pool_output_sizes(kOp, self, p), self, self.dtype());
  if (out.numel() > 0) avg_pool2d_forward_stub(self.device().type(), out, self, p);
  return out;
}

Tensor avg_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& self,
                                  IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                                  bool ceil_mode, bool count_include_pad,
                                  std::optional<int64_t> divisor_override) {
  constexpr const char* kOp = "avg_pool2d_backward";
  const Pool2dParams p =
      avg_params(kOp, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  check_grad_output(kOp, grad_output, self, pool_output_sizes(kOp, self, p));
  Tensor grad_input = pool_empty(self.sizes(), self, self.dtype());
  if (grad_input.numel() > 0) {
    avg_pool2d_backward_stub(self.device().type(), grad_input, grad_output, p);
  }
  return grad_input;
}

DimVector adaptive_output_sizes(const char* op, const Tensor& self, IntArrayRef output_size) {
  FERRY_CHECK_AS(ShapeError, output_size.size() == 2, op,
                 ": output_size must be 2, but got output_size=", output_size);
  FERRY_CHECK_AS(ShapeError, output_size[0] >= 0 && output_size[1] >= 0, op,
                 ": elements of output_size must be greater than or equal to 0 but received {",
                 output_size[0], ", ", output_size[1], "}");
  const int64_t d = self.dim();
  FERRY_CHECK_AS(ShapeError,
                 (d == 3 || d == 4) && self.size(-1) > 0 && self.size(-2) > 0 && self.size(-3) > 0,
                 op,
                 ": Expected 3D or 4D tensor with non-zero sizes for the non-batch dimensions, "
                 "but input has sizes ",
                 self.sizes());
  check_floating(op, "input", self);
  DimVector sizes(self.sizes());
  sizes[d - 2] = output_size[0];
  sizes[d - 1] = output_size[1];
  return sizes;
}

Tensor adaptive_avg_pool2d_kernel(const Tensor& self, IntArrayRef output_size) {
  constexpr const char* kOp = "adaptive_avg_pool2d";
  Tensor out = pool_empty(adaptive_output_sizes(kOp, self, output_size), self, self.dtype());
  if (out.numel() > 0) adaptive_avg_pool2d_forward_stub(self.device().type(), out, self);
  return out;
}

Tensor adaptive_avg_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& self) {
  constexpr const char* kOp = "adaptive_avg_pool2d_backward";
  FERRY_CHECK_AS(ShapeError, grad_output.dim() == self.dim() && self.dim() >= 2, kOp,
                 ": expected grad_output of the input's rank, but got ", grad_output.sizes(),
                 " for input ", self.sizes());
  const DimVector sizes =
      adaptive_output_sizes(kOp, self, {grad_output.size(-2), grad_output.size(-1)});
  check_grad_output(kOp, grad_output, self, sizes);
  Tensor grad_input = pool_empty(self.sizes(), self, self.dtype());
  if (grad_output.numel() == 0) return grad_input.zero_();
  adaptive_avg_pool2d_backward_stub(self.device().type(), grad_input, grad_output);
  return grad_input;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def(
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1, int groups=1) -> Tensor");
  m.def(
      "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[2] stride, "
      "int[2] padding, int[2] dilation, int groups, bool input_grad, bool weight_grad, "
      "bool bias_grad) -> (Tensor, Tensor, Tensor)");
  m.def(
      "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
      "int[2] dilation=1, bool ceil_mode=False) -> Tensor");
  m.def(
      "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], "
      "int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)");
  m.def(
      "max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, "
      "int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor");
  m.def(
      "avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
      "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor");
  m.def(
      "avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
      "int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor");
  m.def("adaptive_avg_pool2d(Tensor self, int[2] output_size) -> Tensor");
  m.def("_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor");
  impl_backends(m, "conv2d", &conv2d_kernel, "conv2d");
  impl_backends(m, "convolution_backward", &convolution_backward_kernel, "convolution_backward");
  impl_backends(m, "max_pool2d", &max_pool2d_kernel, "max_pool2d");
  impl_backends(m, "max_pool2d_with_indices", &max_pool2d_with_indices_kernel,
                "max_pool2d_with_indices");
  impl_backends(m, "max_pool2d_with_indices_backward", &max_pool2d_with_indices_backward_kernel,
                "max_pool2d_with_indices_backward");
  impl_backends(m, "avg_pool2d", &avg_pool2d_kernel, "avg_pool2d");
  impl_backends(m, "avg_pool2d_backward", &avg_pool2d_backward_kernel, "avg_pool2d_backward");
  impl_backends(m, "adaptive_avg_pool2d", &adaptive_avg_pool2d_kernel, "adaptive_avg_pool2d");
  impl_backends(m, "_adaptive_avg_pool2d_backward", &adaptive_avg_pool2d_backward_kernel,
                "adaptive_avg_pool2d_backward");
}

// ---- the typed front-ends ---------------------------------------------------------------------

using OptT = const std::optional<Tensor>&;
using IA = IntArrayRef;

Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const std::optional<Tensor> b = bias && bias->defined() ? bias : std::nullopt;
  return FERRY_OP("ferry::conv2d", Tensor(const Tensor&, const Tensor&, OptT, IA, IA, IA, int64_t))
      .call(input, weight, b, stride, padding, dilation, groups);
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(const Tensor& grad_output,
                                                        const Tensor& input, const Tensor& weight,
                                                        IntArrayRef stride, IntArrayRef padding,
                                                        IntArrayRef dilation, int64_t groups,
                                                        std::array<bool, 3> output_mask) {
  return FERRY_OP("ferry::convolution_backward",
                  std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                     IA, IA, IA, int64_t, bool, bool, bool))
      .call(grad_output, input, weight, stride, padding, dilation, groups, output_mask[0],
            output_mask[1], output_mask[2]);
}

Tensor max_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  return FERRY_OP("ferry::max_pool2d", Tensor(const Tensor&, IA, IA, IA, IA, bool))
      .call(self, kernel_size, stride, padding, dilation, ceil_mode);
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& self, IntArrayRef kernel_size,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  return FERRY_OP("ferry::max_pool2d_with_indices",
                  std::tuple<Tensor, Tensor>(const Tensor&, IA, IA, IA, IA, bool))
      .call(self, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor max_pool2d_with_indices_backward(const Tensor& grad_output, const Tensor& self,
                                        IntArrayRef kernel_size, IntArrayRef stride,
                                        IntArrayRef padding, IntArrayRef dilation, bool ceil_mode,
                                        const Tensor& indices) {
  return FERRY_OP("ferry::max_pool2d_with_indices_backward",
                  Tensor(const Tensor&, const Tensor&, IA, IA, IA, IA, bool, const Tensor&))
      .call(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices);
}

Tensor avg_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                  IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return FERRY_OP("ferry::avg_pool2d",
                  Tensor(const Tensor&, IA, IA, IA, bool, bool, std::optional<int64_t>))
      .call(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size,
                           IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                           bool count_include_pad, std::optional<int64_t> divisor_override) {
  return FERRY_OP("ferry::avg_pool2d_backward", Tensor(const Tensor&, const Tensor&, IA, IA, IA,
                                                       bool, bool, std::optional<int64_t>))
      .call(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
            divisor_override);
}

Tensor adaptive_avg_pool2d(const Tensor& self, IntArrayRef output_size) {
  return FERRY_OP("ferry::adaptive_avg_pool2d", Tensor(const Tensor&, IA)).call(self, output_size);
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_output, const Tensor& self) {
  return FERRY_OP("ferry::_adaptive_avg_pool2d_backward", Tensor(const Tensor&, const Tensor&))
      .call(grad_output, self);
}

}  // namespace ferry
