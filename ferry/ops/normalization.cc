// Batch and layer normalization as dispatched operators (native_batch_norm, native_layer_norm and
// their backwards, PyTorch's names and outputs) and the batch_norm / layer_norm composites over
// them. Every argument the kernels would refuse is refused here first, on the calling thread.
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
using op_checks::value_or_undefined;

// The dtype of the statistics of a `t` input: float32 for the 16-bit floats, else t's.
ScalarType stat_dtype(ScalarType t) { return t == kBFloat16 || t == kFloat16 ? kFloat32 : t; }

// A per-channel (or per-feature) vector: its shape, its dtype (the input's or the statistics'),
// its device.
void check_param(const char* op, const char* name, const Tensor& t, const Tensor& input,
                 IntArrayRef shape) {
  if (!t.defined()) return;
  check_same_device(op, {&input, &t});
  FERRY_CHECK_AS(ShapeError, t.sizes().equals(shape), op, ": expected ", name, " of shape ", shape,
                 " for input ", input.sizes(), ", but got ", t.sizes());
  FERRY_CHECK_AS(DTypeError, t.dtype() == input.dtype() || t.dtype() == stat_dtype(input.dtype()),
                 op, ": expected ", name, " of dtype ", input.dtype(),
                 input.dtype() == stat_dtype(input.dtype())
                     ? std::string()
                     : std::string(" or ") + std::string(scalar_type_name(kFloat32)),
                 ", but got ", t.dtype());
}

void check_bn_input(const char* op, const Tensor& input) {
  FERRY_CHECK_AS(ShapeError, input.dim() >= 2, op,
                 ": expected input of at least 2 dimensions ([N, C, ...]), but got ",
                 input.sizes());
  check_floating(op, "input", input);
}

// A [C] statistics vector as the kernels take it (in the statistics dtype): t itself, or a
// float32 copy of a 16-bit one (PyTorch lets running statistics share a bfloat16 input's dtype).
Tensor as_stat(const Tensor& t, ScalarType sd) {
  return !t.defined() || t.dtype() == sd ? t : t.to(sd);
}

// After the training kernel updated `used` in place: the caller's running statistic gets the
// update (copied back when the kernel worked on a float32 copy), and its version moves on.
void finish_running(Tensor& running, const Tensor& used) {
  if (!running.defined()) return;
  if (used.is_same(running)) {
    running.impl()->bump_version();
  } else {
    running.copy_(used);
  }
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_kernel(
    const Tensor& input, const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& bias_opt, const std::optional<Tensor>& running_mean_opt,
    const std::optional<Tensor>& running_var_opt, bool training, double momentum, double eps) {
  constexpr const char* kOp = "native_batch_norm";
  const Tensor& weight = value_or_undefined(weight_opt);
  const Tensor& bias = value_or_undefined(bias_opt);
  Tensor running_mean = value_or_undefined(running_mean_opt);
  Tensor running_var = value_or_undefined(running_var_opt);
  check_bn_input(kOp, input);
  const int64_t c = input.size(1);
  const DimVector channel{c};
  check_param(kOp, "weight", weight, input, channel);
  check_param(kOp, "bias", bias, input, channel);
  check_param(kOp, "running_mean", running_mean, input, channel);
  check_param(kOp, "running_var", running_var, input, channel);
  const ScalarType sd = stat_dtype(input.dtype());
  const TensorOptions stat_options = TensorOptions(sd).device(input.device());
  Tensor out = empty_like(input, {}, input.suggest_memory_format());
  const DeviceType device = input.device().type();
  if (!training) {
    FERRY_CHECK(running_mean.defined() && running_var.defined(), kOp,
                ": running_mean and running_var must be defined in evaluation mode");
    if (input.numel() > 0) {
      batch_norm_forward_inference_stub(device, out, input, weight, bias, as_stat(running_mean, sd),
                                        as_stat(running_var, sd), eps);
    }
    return {out, empty({0}, stat_options), empty({0}, stat_options)};
  }
  // An empty batch is no error (PyTorch returns an empty result and leaves the running statistics
  // alone); exactly one value per channel is, since its variance is undefined.
  if (input.numel() == 0) {
    return {out, zeros(channel, stat_options), zeros(channel, stat_options)};
  }
  const int64_t per_channel = input.numel() / c;
  FERRY_CHECK_AS(ShapeError, per_channel > 1, kOp,
                 ": Expected more than 1 value per channel when training, got input size ",
                 input.sizes());
  Tensor save_mean = empty(channel, stat_options), save_invstd = empty(channel, stat_options);
  const Tensor mean_used = as_stat(running_mean, sd), var_used = as_stat(running_var, sd);
  batch_norm_forward_training_stub(device, out, save_mean, save_invstd, input, weight, bias,
                                   mean_used, var_used, momentum, eps);
  finish_running(running_mean, mean_used);
  finish_running(running_var, var_used);
  return {out, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward_kernel(
    const Tensor& grad_out, const Tensor& input, const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& running_mean_opt, const std::optional<Tensor>& running_var_opt,
    const std::optional<Tensor>& save_mean_opt, const std::optional<Tensor>& save_invstd_opt,
    bool train, double eps, bool input_grad, bool weight_grad, bool bias_grad) {
  constexpr const char* kOp = "native_batch_norm_backward";
  const Tensor& weight = value_or_undefined(weight_opt);
  check_bn_input(kOp, input);
  check_same_device(kOp, {&input, &grad_out});
  FERRY_CHECK_AS(ShapeError, grad_out.sizes().equals(input.sizes()), kOp,
                 ": expected grad_out of the input's shape ", input.sizes(), ", but got ",
                 grad_out.sizes());
  const DimVector channel{input.size(1)};
  check_param(kOp, "weight", weight, input, channel);
  Tensor mean, invstd;
  if (train) {
    mean = value_or_undefined(save_mean_opt);
    invstd = value_or_undefined(save_invstd_opt);
    FERRY_CHECK(mean.defined() && invstd.defined(), kOp,
                ": save_mean and save_invstd must be defined in training mode");
  } else {
    mean = value_or_undefined(running_mean_opt);
    const Tensor& var = value_or_undefined(running_var_opt);
    FERRY_CHECK(mean.defined() && var.defined(), kOp,
                ": running_mean and running_var must be defined in evaluation mode");
    check_param(kOp, "running_var", var, input, channel);
    invstd = rsqrt(as_stat(var, stat_dtype(input.dtype())) + eps);
  }
  check_param(kOp, train ? "save_mean" : "running_mean", mean, input, channel);
  check_param(kOp, "save_invstd", invstd, input, channel);
  mean = as_stat(mean, stat_dtype(input.dtype()));
  invstd = as_stat(invstd, stat_dtype(input.dtype()));
  const Tensor go = grad_out.dtype() == input.dtype() ? grad_out : grad_out.to(input.dtype());
  Tensor grad_input = input_grad ? empty_like(input, {}, input.suggest_memory_format()) : Tensor();
  // Without a weight there is no affine gradient, as in PyTorch.
  const TensorOptions param_options = weight.defined() ? weight.options() : input.options();
  Tensor grad_weight = weight_grad && weight.defined() ? empty(channel, param_options) : Tensor();
  Tensor grad_bias = bias_grad ? empty(channel, param_options) : Tensor();
  if (input.numel() == 0) {  // nothing was normalized: the affine gradients are zero
    if (grad_weight.defined()) grad_weight.zero_();
    if (grad_bias.defined()) grad_bias.zero_();
    return {grad_input, grad_weight, grad_bias};
  }
  if (grad_input.defined() || grad_weight.defined() || grad_bias.defined()) {
    batch_norm_backward_stub(input.device().type(), grad_input, grad_weight, grad_bias, go, input,
                             weight, mean, invstd, train);
  }
  return {grad_input, grad_weight, grad_bias};
}

// ---- layer norm -------------------------------------------------------------------------------

// The split between the leading dims and the normalized ones, checked against the input.
int64_t check_ln_shape(const char* op, const Tensor& input, IntArrayRef normalized_shape) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  FERRY_CHECK_AS(ShapeError, nd >= 1, op,
                 ": Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                 "least one element, but got normalized_shape = ",
                 normalized_shape);
  const bool fits =
      input.dim() >= nd &&
      input.sizes().slice(static_cast<size_t>(input.dim() - nd)).equals(normalized_shape);
  if (!fits) {
    std::string dims;
    for (int64_t s : normalized_shape) dims += ", " + std::to_string(s);
    FERRY_FAIL_AS(ShapeError, op, ": Given normalized_shape=", normalized_shape,
                  ", expected input with shape [*", dims, "], but got input of size",
                  input.sizes());
  }
  check_floating(op, "input", input);
  return input.dim() - nd;
}

DimVector stat_shape(const Tensor& input, int64_t split) {
  DimVector s(input.sizes().slice(0, static_cast<size_t>(split)));
  for (int64_t d = split; d < input.dim(); ++d) s.push_back(1);
  return s;
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_kernel(const Tensor& input,
                                                            IntArrayRef normalized_shape,
                                                            const std::optional<Tensor>& weight_opt,
                                                            const std::optional<Tensor>& bias_opt,
                                                            double eps) {
  constexpr const char* kOp = "native_layer_norm";
  const Tensor& weight = value_or_undefined(weight_opt);
  const Tensor& bias = value_or_undefined(bias_opt);
  const int64_t split = check_ln_shape(kOp, input, normalized_shape);
  check_param(kOp, "weight", weight, input, normalized_shape);
  check_param(kOp, "bias", bias, input, normalized_shape);
  const TensorOptions stat_options =
      TensorOptions(stat_dtype(input.dtype())).device(input.device());
  Tensor out = empty(input.sizes(), input.options());
  Tensor mean = empty(stat_shape(input, split), stat_options);
  Tensor rstd = empty(stat_shape(input, split), stat_options);
  if (input.numel() > 0) {
    layer_norm_forward_stub(input.device().type(), out, mean, rstd, input, weight, bias,
                            input.dim() - split, eps);
  }
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward_kernel(
    const Tensor& grad_out, const Tensor& input, IntArrayRef normalized_shape, const Tensor& mean,
    const Tensor& rstd, const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& bias_opt, bool input_grad, bool weight_grad, bool bias_grad) {
  constexpr const char* kOp = "native_layer_norm_backward";
  const Tensor& weight = value_or_undefined(weight_opt);
  const Tensor& bias = value_or_undefined(bias_opt);
  const int64_t split = check_ln_shape(kOp, input, normalized_shape);
  check_param(kOp, "weight", weight, input, normalized_shape);
  check_same_device(kOp, {&input, &grad_out, &mean, &rstd});
  FERRY_CHECK_AS(ShapeError, grad_out.sizes().equals(input.sizes()), kOp,
                 ": expected grad_out of the input's shape ", input.sizes(), ", but got ",
                 grad_out.sizes());
  const DimVector stats = stat_shape(input, split);
  const ScalarType sd = stat_dtype(input.dtype());
  int64_t rows = 1;
  for (int64_t d : stats) rows *= d;
  for (const Tensor* t : {&mean, &rstd}) {
    FERRY_CHECK_AS(ShapeError, t->numel() == rows, kOp, ": expected mean and rstd of shape ",
                   IntArrayRef(stats), ", but got ", t->sizes());
    FERRY_CHECK_AS(DTypeError, t->dtype() == sd, kOp, ": expected mean and rstd of dtype ", sd,
                   ", but got ", t->dtype());
  }
  const Tensor go = grad_out.dtype() == input.dtype() ? grad_out : grad_out.to(input.dtype());
  Tensor grad_input = input_grad ? empty(input.sizes(), input.options()) : Tensor();
  Tensor grad_weight =
      weight_grad && weight.defined() ? empty(normalized_shape, weight.options()) : Tensor();
  Tensor grad_bias =
      bias_grad && bias.defined() ? empty(normalized_shape, bias.options()) : Tensor();
  if (input.numel() == 0) {
    if (grad_weight.defined()) grad_weight.zero_();
    if (grad_bias.defined()) grad_bias.zero_();
    return {grad_input, grad_weight, grad_bias};
  }
  if (grad_input.defined() || grad_weight.defined() || grad_bias.defined()) {
    layer_norm_backward_stub(input.device().type(), grad_input, grad_weight, grad_bias, go, input,
                             mean, rstd, weight, input.dim() - split);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  // PyTorch marks the running statistics Tensor(a!)?; ferry's schemas tie a written argument to
  // a Tensor& parameter, which an optional cannot be, so they are plain Tensor? here (the
  // training kernel still updates them in place and bumps their version).
  m.def(
      "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
      "Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, "
      "Tensor)");
  m.def(
      "native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, "
      "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, "
      "bool train, float eps, bool input_grad, bool weight_grad, bool bias_grad) -> (Tensor, "
      "Tensor, Tensor)");
  m.def(
      "native_layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, "
      "float eps) -> (Tensor, Tensor, Tensor)");
  m.def(
      "native_layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, "
      "Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool input_grad, "
      "bool weight_grad, bool bias_grad) -> (Tensor, Tensor, Tensor)");
  impl_backends(m, "native_batch_norm", &native_batch_norm_kernel, "native_batch_norm");
  impl_backends(m, "native_batch_norm_backward", &native_batch_norm_backward_kernel,
                "native_batch_norm_backward");
  impl_backends(m, "native_layer_norm", &native_layer_norm_kernel, "native_layer_norm");
  impl_backends(m, "native_layer_norm_backward", &native_layer_norm_backward_kernel,
                "native_layer_norm_backward");
}

// ---- the typed front-ends ---------------------------------------------------------------------

using OptT = const std::optional<Tensor>&;
using T3 = std::tuple<Tensor, Tensor, Tensor>;

namespace {
// An undefined tensor passed where an optional one is expected means None, as in PyTorch.
std::optional<Tensor> none_if_undefined(const std::optional<Tensor>& t) {
  return t && t->defined() ? t : std::nullopt;
}
}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, OptT weight, OptT bias,
                                                     OptT running_mean, OptT running_var,
                                                     bool training, double momentum, double eps) {
  return FERRY_OP("ferry::native_batch_norm",
                  T3(const Tensor&, OptT, OptT, OptT, OptT, bool, double, double))
      .call(input, none_if_undefined(weight), none_if_undefined(bias),
            none_if_undefined(running_mean), none_if_undefined(running_var), training, momentum,
            eps);
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, OptT weight, OptT running_mean, OptT running_var,
    OptT save_mean, OptT save_invstd, bool train, double eps, std::array<bool, 3> output_mask) {
  return FERRY_OP("ferry::native_batch_norm_backward",
                  T3(const Tensor&, const Tensor&, OptT, OptT, OptT, OptT, OptT, bool, double, bool,
                     bool, bool))
      .call(grad_out, input, none_if_undefined(weight), none_if_undefined(running_mean),
            none_if_undefined(running_var), none_if_undefined(save_mean),
            none_if_undefined(save_invstd), train, eps, output_mask[0], output_mask[1],
            output_mask[2]);
}

Tensor batch_norm(const Tensor& input, OptT weight, OptT bias, OptT running_mean, OptT running_var,
                  bool training, double momentum, double eps) {
  return std::get<0>(
      native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps));
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input,
                                                     IntArrayRef normalized_shape, OptT weight,
                                                     OptT bias, double eps) {
  return FERRY_OP("ferry::native_layer_norm", T3(const Tensor&, IntArrayRef, OptT, OptT, double))
      .call(input, normalized_shape, none_if_undefined(weight), none_if_undefined(bias), eps);
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad_out, const Tensor& input, IntArrayRef normalized_shape, const Tensor& mean,
    const Tensor& rstd, OptT weight, OptT bias, std::array<bool, 3> output_mask) {
  return FERRY_OP("ferry::native_layer_norm_backward",
                  T3(const Tensor&, const Tensor&, IntArrayRef, const Tensor&, const Tensor&, OptT,
                     OptT, bool, bool, bool))
      .call(grad_out, input, normalized_shape, mean, rstd, none_if_undefined(weight),
            none_if_undefined(bias), output_mask[0], output_mask[1], output_mask[2]);
}

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, OptT weight, OptT bias,
                  double eps) {
  return std::get<0>(native_layer_norm(input, normalized_shape, weight, bias, eps));
}

}  // namespace ferry
