// embedding (index_select_stub) and its dense backward (index_add_stub, padding rows skipped) as
// dispatched operators, and dropout as a composite: a mask drawn on the host from a
// ferry::Generator, moved to the input's device, multiplied in (so it is differentiable through
// mul, and every device sees the same mask for the same seed).
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

using op_checks::check_same_device;

Tensor embedding_kernel(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                        bool scale_grad_by_freq, bool sparse) {
  constexpr const char* kOp = "embedding";
  (void)scale_grad_by_freq;  // a backward matter
  FERRY_CHECK_AS(NotImplementedError, !sparse, kOp, ": sparse gradients are not supported");
  FERRY_CHECK_AS(ShapeError, weight.dim() == 2, kOp,
                 ": 'weight' must be 2-D [num_embeddings, embedding_dim], but got ",
                 weight.sizes());
  op_checks::check_index_dtype(kOp, "indices", indices, true);
  check_same_device(kOp, {&weight, &indices});
  FERRY_CHECK_AS(IndexError, padding_idx < weight.size(0), kOp, ": padding_idx ", padding_idx,
                 " must be within num_embeddings ", weight.size(0));
  const Tensor flat = indices.dim() == 1 ? indices : indices.reshape({-1});
  const int64_t dim = weight.size(1);
  Tensor out = empty({flat.numel(), dim}, weight.options());
  if (out.numel() > 0) index_select_stub(weight.device().type(), out, weight, flat);
  DimVector sizes(indices.sizes());
  sizes.push_back(dim);
  return native::view(out, sizes);
}

Tensor embedding_dense_backward_kernel(const Tensor& grad_output, const Tensor& indices,
                                       int64_t num_weights, int64_t padding_idx,
                                       bool scale_grad_by_freq) {
  constexpr const char* kOp = "embedding_dense_backward";
  op_checks::check_index_dtype(kOp, "indices", indices, true);
  check_same_device(kOp, {&grad_output, &indices});
  FERRY_CHECK_AS(
      ShapeError,
      grad_output.dim() == indices.dim() + 1 &&
          grad_output.sizes().slice(0, static_cast<size_t>(indices.dim())).equals(indices.sizes()),
      kOp,
      ": expected grad_output of shape indices.sizes() + [embedding_dim] for "
      "indices ",
      indices.sizes(), ", but got ", grad_output.sizes());
  FERRY_CHECK_AS(ShapeError, num_weights >= 0, kOp, ": expected num_weights >= 0, but got ",
                 num_weights);
  const int64_t dim = grad_output.size(-1), n = indices.numel();
  const Tensor flat = indices.reshape({-1});
  Tensor rows = grad_output.reshape({n, dim});
  Tensor grad_weight = zeros({num_weights, dim}, grad_output.options());
  if (n == 0 || dim == 0) return grad_weight;
  const DeviceType device = grad_output.device().type();
  const std::optional<int64_t> skip =
      padding_idx >= 0 ? std::optional<int64_t>(padding_idx) : std::nullopt;
  if (scale_grad_by_freq) {
    // Each row's gradient divided by how often its index occurs.
    Tensor counts = zeros({num_weights}, grad_output.options());
    index_add_stub(device, counts, flat, ones({n}, grad_output.options()), std::nullopt);
    Tensor freq = empty({n}, grad_output.options());
    index_select_stub(device, freq, counts, flat);
    rows = rows / freq.unsqueeze(1);
  }
  index_add_stub(device, grad_weight, flat, rows, skip);
  return grad_weight;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def(
      "embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, "
      "bool sparse=False) -> Tensor");
  m.def(
      "embedding_dense_backward(Tensor grad_output, Tensor indices, int num_weights, "
      "int padding_idx, bool scale_grad_by_freq) -> Tensor");
  impl_backends(m, "embedding", &embedding_kernel, "embedding");
  impl_backends(m, "embedding_dense_backward", &embedding_dense_backward_kernel,
                "embedding_dense_backward");
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                 bool scale_grad_by_freq, bool sparse) {
  return FERRY_OP("ferry::embedding", Tensor(const Tensor&, const Tensor&, int64_t, bool, bool))
      .call(weight, indices, padding_idx, scale_grad_by_freq, sparse);
}

Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq) {
  return FERRY_OP("ferry::embedding_dense_backward",
                  Tensor(const Tensor&, const Tensor&, int64_t, int64_t, bool))
      .call(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
}

Tensor dropout(const Tensor& input, double p, bool train, Generator* generator) {
  FERRY_CHECK(p >= 0.0 && p <= 1.0,
              "dropout: dropout probability has to be between 0 and 1, "
              "but got ",
              p);
  if (p == 0.0 || !train || input.numel() == 0) return input;
  op_checks::check_floating("dropout", "input", input);
  if (p == 1.0) return input * zeros({}, input.options());
  // Keep each element with probability 1 - p; the kept ones are scaled by 1 / (1 - p) in the
  // input's dtype, as PyTorch's noise tensor is.
  const Tensor u = rand(input.sizes(), TensorOptions(kFloat64), generator);
  const Tensor noise = u.lt(1.0 - p).to(input.dtype()).div(1.0 - p);
  return input * noise.to(input.device());
}

}  // namespace ferry
