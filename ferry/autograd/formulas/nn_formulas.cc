// Backward formulas of conv2d, the poolings and the normalizations: each calls its dispatched
// backward operator (convolution_backward, max_pool2d_with_indices_backward, avg_pool2d_backward,
// _adaptive_avg_pool2d_backward, native_batch_norm_backward, native_layer_norm_backward), so the
// gradient runs on the forward's device and stream. The backwards of convolution and of the
// poolings are linear in the gradient and have formulas of their own (double backward); the
// normalizations' backwards do not, and refuse create_graph through them.
#include <vector>

#include "ferry/autograd/record.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/math.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::autograd {
namespace {

using Grads = const variable_list&;
using Ints = std::vector<int64_t>;

Tensor add_defined(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a + b;
}

// ---- convolution ----------------------------------------------------------------------------

Tensor conv2d_autograd(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                       IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                       int64_t groups) {
  const Tensor b = bias.value_or(Tensor());
  Recorder rec("ConvolutionBackward0", {&input, &weight, &b});
  Tensor out = below_autograd(
      [&] { return conv2d(input, weight, bias, stride, padding, dilation, groups); });
  if (rec) {
    const size_t si = rec.save(input), sw = rec.save(weight);
    rec.record(out,
               [si, sw, s = Ints(stride.vec()), p = Ints(padding.vec()), d = Ints(dilation.vec()),
                groups](FormulaNode& n, Grads g) -> variable_list {
                 auto [gi, gw, gb] = convolution_backward(
                     g[0], n.saved(si), n.saved(sw), s, p, d, groups,
                     {n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2)});
                 return {gi, gw, gb};
               });
  }
  return out;
}

// gI = conv^T(gO, W), gW = corr(I, gO), gB = sum(gO): each is linear in gO and in one of I, W, so
// d/dgO = conv(ggI, W) + conv(I, ggW) + ggB, d/dW = corr(ggI, gO), d/dI = conv^T(gO, ggW).
std::tuple<Tensor, Tensor, Tensor> convolution_backward_autograd(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, IntArrayRef stride,
    IntArrayRef padding, IntArrayRef dilation, int64_t groups, bool input_grad, bool weight_grad,
    bool bias_grad) {
  Recorder rec("ConvolutionBackwardBackward0", {&grad_output, &input, &weight});
  auto result = below_autograd([&] {
    return convolution_backward(grad_output, input, weight, stride, padding, dilation, groups,
                                {input_grad, weight_grad, bias_grad});
  });
  if (rec) {
    const size_t sg = rec.save(grad_output), si = rec.save(input), sw = rec.save(weight);
    auto [gi, gw, gb] = result;
    rec.record(variable_list{gi, gw, gb},
               [sg, si, sw, s = Ints(stride.vec()), p = Ints(padding.vec()),
                d = Ints(dilation.vec()), groups](FormulaNode& n, Grads g) -> variable_list {
                 const Tensor go = n.saved(sg), x = n.saved(si), w = n.saved(sw);
                 const Tensor &ggi = g[0], &ggw = g[1], &ggb = g[2];
                 Tensor d_go, d_x, d_w;
                 if (n.needs_input_grad(0)) {
                   if (ggi.defined()) d_go = conv2d(ggi, w, std::nullopt, s, p, d, groups);
                   if (ggw.defined()) {
                     d_go = add_defined(d_go, conv2d(x, ggw, std::nullopt, s, p, d, groups));
                   }
                   if (ggb.defined()) {
                     std::vector<int64_t> shape(static_cast<size_t>(go.dim()), 1);
                     shape[go.dim() == 4 ? 1 : 0] = ggb.numel();
                     d_go = add_defined(d_go, ggb.view(shape).expand(go.sizes()));
                   }
                 }
                 if (n.needs_input_grad(1) && ggw.defined()) {
                   d_x = std::get<0>(
                       convolution_backward(go, x, ggw, s, p, d, groups, {true, false, false}));
                 }
                 if (n.needs_input_grad(2) && ggi.defined()) {
                   d_w = std::get<1>(
                       convolution_backward(go, ggi, w, s, p, d, groups, {false, true, false}));
                 }
                 return {d_go, d_x, d_w};
               });
  }
  return result;
}

// ---- pooling --------------------------------------------------------------------------------

Tensor max_pool2d_backward_formula(FormulaNode& n, Grads g, size_t sx, size_t si, const Ints& k,
                                   const Ints& s, const Ints& p, const Ints& d, bool ceil_mode) {
  return max_pool2d_with_indices_backward(g[0], n.saved(sx), k, s, p, d, ceil_mode, n.saved(si));
}

Tensor max_pool2d_autograd(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                           IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Recorder rec("MaxPool2DWithIndicesBackward0", {&self});
  if (!rec) {
    // No gradient wanted: the kernel without argmax indices (oneDNN's fast path).
    return below_autograd(
        [&] { return max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode); });
  }
  auto [out, indices] = below_autograd([&] {
    return max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode);
  });
  const size_t sx = rec.save(self), si = rec.save(indices);
  rec.record(out,
             [=, k = Ints(kernel_size.vec()), s = Ints(stride.vec()), p = Ints(padding.vec()),
              d = Ints(dilation.vec())](FormulaNode& n, Grads g) -> variable_list {
               return {max_pool2d_backward_formula(n, g, sx, si, k, s, p, d, ceil_mode)};
             });
  return out;
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices_autograd(const Tensor& self,
                                                            IntArrayRef kernel_size,
                                                            IntArrayRef stride, IntArrayRef padding,
                                                            IntArrayRef dilation, bool ceil_mode) {
  Recorder rec("MaxPool2DWithIndicesBackward0", {&self});
  auto result = below_autograd([&] {
    return max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode);
  });
  if (rec) {
    const size_t sx = rec.save(self), si = rec.save(std::get<1>(result));
    rec.record(std::get<0>(result),
               [=, k = Ints(kernel_size.vec()), s = Ints(stride.vec()), p = Ints(padding.vec()),
                d = Ints(dilation.vec())](FormulaNode& n, Grads g) -> variable_list {
                 return {max_pool2d_backward_formula(n, g, sx, si, k, s, p, d, ceil_mode)};
               });
  }
  return result;
}

// The backward scatters gO to the argmax positions; its adjoint gathers ggI from them: ggI's
// planes flattened into one column, indexed by plane * H * W + the index inside the plane.
Tensor max_pool2d_with_indices_backward_autograd(const Tensor& grad_output, const Tensor& self,
                                                 IntArrayRef kernel_size, IntArrayRef stride,
                                                 IntArrayRef padding, IntArrayRef dilation,
                                                 bool ceil_mode, const Tensor& indices) {
  Recorder rec("MaxPool2DWithIndicesBackwardBackward0", {&grad_output, &self});
  Tensor out = below_autograd([&] {
    return max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding,
                                            dilation, ceil_mode, indices);
  });
  if (rec) {
    const size_t si = rec.save(indices);
    const DimVector in_sizes(self.sizes());
    rec.record(out, [si, in_sizes](FormulaNode& n, Grads g) -> variable_list {
      const Tensor idx = n.saved(si);
      const int64_t plane = in_sizes[in_sizes.size() - 2] * in_sizes[in_sizes.size() - 1];
      // One offset per plane: the index's sizes with the two spatial dims set to 1.
      DimVector offset_shape(idx.sizes());
      offset_shape[offset_shape.size() - 1] = 1;
      offset_shape[offset_shape.size() - 2] = 1;
      int64_t planes = 1;
      for (int64_t s : offset_shape) planes *= s;
      const Tensor offsets =
          (arange(planes, TensorOptions(kInt64)) * plane).view(offset_shape).to(idx.device());
      const Tensor flat = (idx + offsets).reshape({-1});
      const Tensor column = g[0].reshape({-1, 1});
      return {embedding(column, flat).view(idx.sizes()), Tensor()};
    });
  }
  return out;
}

Tensor avg_pool2d_autograd(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                           IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  Recorder rec("AvgPool2DBackward0", {&self});
  Tensor out = below_autograd([&] {
    return avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override);
  });
  if (rec) {
    const size_t sx = rec.save(self);
    rec.record(out,
               [=, k = Ints(kernel_size.vec()), s = Ints(stride.vec()), p = Ints(padding.vec())](
                   FormulaNode& n, Grads g) -> variable_list {
                 return {avg_pool2d_backward(g[0], n.saved(sx), k, s, p, ceil_mode,
                                             count_include_pad, divisor_override)};
               });
  }
  return out;
}

Tensor avg_pool2d_backward_autograd(const Tensor& grad_output, const Tensor& self,
                                    IntArrayRef kernel_size, IntArrayRef stride,
                                    IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                    std::optional<int64_t> divisor_override) {
  Recorder rec("AvgPool2DBackwardBackward0", {&grad_output, &self});
  Tensor out = below_autograd([&] {
    return avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                               count_include_pad, divisor_override);
  });
  if (rec) {
    rec.record(out,
               [=, k = Ints(kernel_size.vec()), s = Ints(stride.vec()), p = Ints(padding.vec())](
                   FormulaNode&, Grads g) -> variable_list {
                 return {avg_pool2d(g[0], k, s, p, ceil_mode, count_include_pad, divisor_override),
                         Tensor()};
               });
  }
  return out;
}

Tensor adaptive_avg_pool2d_autograd(const Tensor& self, IntArrayRef output_size) {
  Recorder rec("AdaptiveAvgPool2DBackward0", {&self});
  Tensor out = below_autograd([&] { return adaptive_avg_pool2d(self, output_size); });
  if (rec) {
    const size_t sx = rec.save(self);
    rec.record(out, [sx](FormulaNode& n, Grads g) -> variable_list {
      return {adaptive_avg_pool2d_backward(g[0], n.saved(sx))};
    });
  }
  return out;
}

Tensor adaptive_avg_pool2d_backward_autograd(const Tensor& grad_output, const Tensor& self) {
  Recorder rec("AdaptiveAvgPool2DBackwardBackward0", {&grad_output, &self});
  Tensor out = below_autograd([&] { return adaptive_avg_pool2d_backward(grad_output, self); });
  if (rec) {
    const Ints size{grad_output.size(-2), grad_output.size(-1)};
    rec.record(out, [size](FormulaNode&, Grads g) -> variable_list {
      return {adaptive_avg_pool2d(g[0], size), Tensor()};
    });
  }
  return out;
}

// ---- normalization --------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_autograd(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    bool training, double momentum, double eps) {
  const Tensor w = weight.value_or(Tensor()), b = bias.value_or(Tensor());
  Recorder rec("NativeBatchNormBackward0", {&input, &w, &b});
  auto result = below_autograd([&] {
    return native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                             eps);
  });
  if (rec) {
    const auto& [out, save_mean, save_invstd] = result;
    const size_t sx = rec.save(input), sw = rec.save(w);
    // Training: the batch statistics; evaluation: the running ones (as PyTorch saves them).
    const size_t sm = rec.save(training ? save_mean : running_mean.value_or(Tensor()));
    const size_t sv = rec.save(training ? save_invstd : running_var.value_or(Tensor()));
    rec.record(out, [sx, sw, sm, sv, training, eps](FormulaNode& n, Grads g) -> variable_list {
      const Tensor a = n.saved(sm), v = n.saved(sv);
      auto [gi, gw, gb] = native_batch_norm_backward(
          g[0], n.saved(sx), n.saved(sw), training ? Tensor() : a, training ? Tensor() : v,
          training ? a : Tensor(), training ? v : Tensor(), training, eps,
          {n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2)});
      return {gi, gw, gb};
    });
  }
  return result;
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_autograd(const Tensor& input,
                                                              IntArrayRef normalized_shape,
                                                              const std::optional<Tensor>& weight,
                                                              const std::optional<Tensor>& bias,
                                                              double eps) {
  const Tensor w = weight.value_or(Tensor()), b = bias.value_or(Tensor());
  Recorder rec("NativeLayerNormBackward0", {&input, &w, &b});
  auto result =
      below_autograd([&] { return native_layer_norm(input, normalized_shape, weight, bias, eps); });
  if (rec) {
    const auto& [out, mean, rstd] = result;
    const size_t sx = rec.save(input), sw = rec.save(w), sb = rec.save(b);
    const size_t sm = rec.save(mean), sr = rec.save(rstd);
    rec.record(out,
               [sx, sw, sb, sm, sr, shape = Ints(normalized_shape.vec())](
                   FormulaNode& n, Grads g) -> variable_list {
                 auto [gi, gw, gb] = native_layer_norm_backward(
                     g[0], n.saved(sx), shape, n.saved(sm), n.saved(sr), n.saved(sw), n.saved(sb),
                     {n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2)});
                 return {gi, gw, gb};
               });
  }
  return result;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  impl_autograd(m, "conv2d", &conv2d_autograd, "ConvolutionBackward0");
  impl_autograd(m, "convolution_backward", &convolution_backward_autograd,
                "ConvolutionBackwardBackward0");
  impl_autograd(m, "max_pool2d", &max_pool2d_autograd, "MaxPool2DWithIndicesBackward0");
  impl_autograd(m, "max_pool2d_with_indices", &max_pool2d_with_indices_autograd,
                "MaxPool2DWithIndicesBackward0");
  impl_autograd(m, "max_pool2d_with_indices_backward", &max_pool2d_with_indices_backward_autograd,
                "MaxPool2DWithIndicesBackwardBackward0");
  impl_autograd(m, "avg_pool2d", &avg_pool2d_autograd, "AvgPool2DBackward0");
  impl_autograd(m, "avg_pool2d_backward", &avg_pool2d_backward_autograd,
                "AvgPool2DBackwardBackward0");
  impl_autograd(m, "adaptive_avg_pool2d", &adaptive_avg_pool2d_autograd,
                "AdaptiveAvgPool2DBackward0");
  impl_autograd(m, "_adaptive_avg_pool2d_backward", &adaptive_avg_pool2d_backward_autograd,
                "AdaptiveAvgPool2DBackwardBackward0");
  impl_autograd(m, "native_batch_norm", &native_batch_norm_autograd, "NativeBatchNormBackward0");
  impl_autograd(m, "native_layer_norm", &native_layer_norm_autograd, "NativeLayerNormBackward0");
}

}  // namespace ferry::autograd
