// The losses: nll_loss_forward / nll_loss_backward as dispatched operators over the nll stubs
// (1-d and 2-d inputs, PyTorch's names, outputs and checks), and the composites nll_loss (N-d
// inputs as rows of classes), cross_entropy (log_softmax + nll_loss + PyTorch's label-smoothing
// term, or a class-probability target) and mse_loss, differentiable through their parts.
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
using op_checks::value_or_undefined;

constexpr int64_t kNone = 0, kMean = 1, kSum = 2;

int64_t reduction_of(std::string_view r, const char* op) {
  if (r == "none") return kNone;
  if (r == "mean") return kMean;
  FERRY_CHECK_AS(Error, r == "sum", op,
                 ": reduction: expected \"none\", \"mean\" or \"sum\", but got \"", std::string(r),
                 "\"");
  return kSum;
}

void check_reduction(int64_t r, const char* op) {
  FERRY_CHECK_AS(Error, r >= kNone && r <= kSum, op,
                 ": reduction: expected 0 (none), 1 (mean) or 2 (sum), but got ", r);
}

// The checks nll_loss_forward and _backward share.
void check_nll(const char* op, const Tensor& self, const Tensor& target, const Tensor& weight,
               int64_t reduction) {
  check_reduction(reduction, op);
  FERRY_CHECK_AS(ShapeError, self.dim() == 1 || self.dim() == 2, op,
                 ": input tensor should be 1D or 2D, but got ", self.sizes());
  FERRY_CHECK_AS(ShapeError, target.dim() <= 1, op,
                 ": 0D or 1D target tensor expected, multi-target not supported (got target ",
                 target.sizes(), ")");
  const bool no_batch = self.dim() == 1 && target.dim() == 0;
  FERRY_CHECK_AS(ShapeError, no_batch || (target.dim() == 1 && self.size(0) == target.size(0)), op,
                 ": size mismatch (got input: ", self.sizes(), ", target: ", target.sizes(), ")");
  check_same_device(op, {&self, &target, &weight});
  check_floating(op, "input", self);
  op_checks::check_index_dtype(op, "target", target, false);
  if (weight.defined()) {
    const int64_t classes = self.size(-1);
    FERRY_CHECK_AS(ShapeError, weight.dim() == 1 && weight.numel() == classes, op,
                   ": weight tensor should be defined either for all ", classes,
                   " classes or no classes but got weight tensor of shape: ", weight.sizes());
    check_same_dtype(op, "input", self, "weight", weight);
  }
}

std::tuple<Tensor, Tensor> nll_loss_forward_kernel(const Tensor& self, const Tensor& target,
                                                   const std::optional<Tensor>& weight_opt,
                                                   int64_t reduction, int64_t ignore_index) {
  constexpr const char* kOp = "nll_loss_forward";
  const Tensor& weight = value_or_undefined(weight_opt);
  check_nll(kOp, self, target, weight, reduction);
  const bool per_element = reduction == kNone && self.dim() == 2;
  Tensor out = per_element ? empty({self.size(0)}, self.options()) : empty({}, self.options());
  Tensor total_weight = empty({}, self.options());
  nll_loss_forward_stub(self.device().type(), out, total_weight, self, target, weight, per_element,
                        ignore_index);
  if (reduction == kMean) out = div(out, total_weight);
  return {out, total_weight};
}

Tensor nll_loss_backward_kernel(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                const std::optional<Tensor>& weight_opt, int64_t reduction,
                                int64_t ignore_index, const Tensor& total_weight) {
  constexpr const char* kOp = "nll_loss_backward";
  const Tensor& weight = value_or_undefined(weight_opt);
  check_nll(kOp, self, target, weight, reduction);
  check_same_device(kOp, {&self, &grad_output, &total_weight});
  const bool per_element = reduction == kNone && self.dim() == 2;
  const DimVector go_sizes = per_element ? DimVector{self.size(0)} : DimVector{};
  FERRY_CHECK_AS(ShapeError, grad_output.sizes().equals(go_sizes), kOp,
                 ": expected grad_output of shape ", IntArrayRef(go_sizes), ", but got ",
                 grad_output.sizes());
  FERRY_CHECK_AS(
      ShapeError, total_weight.numel() == 1, kOp,
      ": expected total_weight to be a single element tensor, got: ", total_weight.sizes());
  // The mean's division happens on the device, in the upstream gradient: no host round trip.
  Tensor go = grad_output.dtype() == self.dtype() ? grad_output : grad_output.to(self.dtype());
  if (reduction == kMean) go = div(go, total_weight.reshape({}).to(self.dtype()));
  Tensor grad_input = empty(self.sizes(), self.options());
  if (grad_input.numel() > 0) {
    nll_loss_backward_stub(self.device().type(), grad_input, go, target, weight, per_element,
                           ignore_index, 1.0);
  }
  return grad_input;
}

// nll_loss over N-d log-probabilities [N, C, d1, ...] (and the 1-d/2-d operator's own shapes):
// (loss, total_weight).
std::tuple<Tensor, Tensor> nll_nd(const Tensor& lp, const Tensor& target,
                                  const std::optional<Tensor>& weight, int64_t reduction,
                                  int64_t ignore_index) {
  if (lp.dim() <= 2) return nll_loss_forward(lp, target, weight, reduction, ignore_index);
  FERRY_CHECK_AS(ShapeError, target.dim() == lp.dim() - 1, "nll_loss: expected target of ",
                 lp.dim() - 1, " dimensions for input ", lp.sizes(), ", but got ", target.sizes());
  DimVector expected{lp.size(0)};
  for (int64_t d = 2; d < lp.dim(); ++d) expected.push_back(lp.size(d));
  FERRY_CHECK_AS(ShapeError, target.sizes().equals(expected), "nll_loss: Expected target size ",
                 IntArrayRef(expected), ", got ", target.sizes());
  // Classes last, every other dim a row.
  std::vector<int64_t> order{0};
  for (int64_t d = 2; d < lp.dim(); ++d) order.push_back(d);
  order.push_back(1);
  const Tensor rows = lp.permute(order).reshape({target.numel(), lp.size(1)});
  auto [loss, total] =
      nll_loss_forward(rows, target.reshape({-1}), weight, reduction, ignore_index);
  if (reduction == kNone) loss = loss.view(target.sizes());
  return {loss, total};
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def(
      "nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, "
      "int ignore_index) -> (Tensor output, Tensor total_weight)");
  m.def(
      "nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, "
      "int reduction, int ignore_index, Tensor total_weight) -> Tensor");
  impl_backends(m, "nll_loss_forward", &nll_loss_forward_kernel, "nll_loss_forward");
  impl_backends(m, "nll_loss_backward", &nll_loss_backward_kernel, "nll_loss_backward");
}

using OptT = const std::optional<Tensor>&;

std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& self, const Tensor& target, OptT weight,
                                            int64_t reduction, int64_t ignore_index) {
  const std::optional<Tensor> w = weight && weight->defined() ? weight : std::nullopt;
  return FERRY_OP("ferry::nll_loss_forward",
                  std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, OptT, int64_t, int64_t))
      .call(self, target, w, reduction, ignore_index);
}

Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                         OptT weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight) {
  const std::optional<Tensor> w = weight && weight->defined() ? weight : std::nullopt;
  return FERRY_OP("ferry::nll_loss_backward", Tensor(const Tensor&, const Tensor&, const Tensor&,
                                                     OptT, int64_t, int64_t, const Tensor&))
      .call(grad_output, self, target, w, reduction, ignore_index, total_weight);
}

Tensor nll_loss(const Tensor& self, const Tensor& target, OptT weight, std::string_view reduction,
                int64_t ignore_index) {
  return std::get<0>(
      nll_nd(self, target, weight, reduction_of(reduction, "nll_loss"), ignore_index));
}

Tensor cross_entropy(const Tensor& self, const Tensor& target, OptT weight,
                     std::string_view reduction, int64_t ignore_index, double label_smoothing) {
  constexpr const char* kOp = "cross_entropy";
  const int64_t r = reduction_of(reduction, kOp);
  FERRY_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, kOp,
              ": label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  FERRY_CHECK_AS(ShapeError, self.dim() >= 1, kOp,
                 ": expected input of at least 1 dimension, but got a 0-d tensor");
  const int64_t class_dim = self.dim() == 1 ? 0 : 1;
  const int64_t classes = self.size(class_dim);
  const Tensor lp = log_softmax(self, class_dim);
  const Tensor& w = value_or_undefined(weight);
  // weight [C] shaped to broadcast along the class dim.
  auto weight_view = [&] {
    DimVector s(static_cast<size_t>(self.dim()), 1);
    s[static_cast<size_t>(class_dim)] = w.numel();
    return w.view(s);
  };
  if (target.is_floating_point()) {
    // Class probabilities (PyTorch's prob-target path).
    FERRY_CHECK_AS(ShapeError, target.sizes().equals(self.sizes()), kOp,
                   ": expected a probability target of the input's shape ", self.sizes(),
                   ", but got ", target.sizes());
    FERRY_CHECK(ignore_index < 0, kOp, ": ignore_index is not supported for floating point target");
    const Tensor t = label_smoothing > 0 ? target * (1 - label_smoothing) +
                                               label_smoothing / static_cast<double>(classes)
                                         : target;
    Tensor prod = lp * t;
    if (w.defined()) prod = prod * weight_view();
    const Tensor loss = -prod.sum({class_dim});
    if (r == kNone) return loss;
    if (r == kSum) return loss.sum();
    return loss.sum() / static_cast<double>(classes == 0 ? 0 : self.numel() / classes);
  }
  auto [nll, total_weight] = nll_nd(lp, target, weight, r, ignore_index);
  if (label_smoothing <= 0) return nll;
  const Tensor smooth_all = -(w.defined() ? lp * weight_view() : lp).sum({class_dim});
  const Tensor zero = zeros({}, smooth_all.options());
  const Tensor smooth = where(target.eq(ignore_index), zero, smooth_all);
  Tensor ret;
  if (r == kMean) {
    ret = smooth.sum() / total_weight;
  } else {
    ret = r == kSum ? smooth.sum() : smooth;
  }
  return nll * (1 - label_smoothing) + ret * (label_smoothing / static_cast<double>(classes));
}

Tensor mse_loss(const Tensor& self, const Tensor& target, std::string_view reduction) {
  const int64_t r = reduction_of(reduction, "mse_loss");
  const Tensor d = self - target;
  const Tensor sq = d * d;
  if (r == kNone) return sq;
  return r == kMean ? sq.mean() : sq.sum();
}

}  // namespace ferry
