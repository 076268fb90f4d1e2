// nn::LayerNorm: parameters and forward (see layernorm.h).
#include "ferry/nn/layers/layernorm.h"

#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"
#include "ferry/nn/layers/repr.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::nn {

LayerNormImpl::LayerNormImpl(std::vector<int64_t> shape, double eps, bool elementwise_affine)
    : normalized_shape(std::move(shape)), eps(eps), elementwise_affine(elementwise_affine) {
  FERRY_CHECK(!normalized_shape.empty(), "LayerNorm: expected a non-empty normalized_shape");
  weight =
      register_parameter("weight", elementwise_affine ? ferry::empty(normalized_shape) : Tensor());
  bias = register_parameter("bias", elementwise_affine ? ferry::empty(normalized_shape) : Tensor());
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (!elementwise_affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  auto opt = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return layer_norm(input, normalized_shape, opt(weight), opt(bias), eps);
}

std::string LayerNormImpl::extra_repr() const {
  return repr::py_tuple(normalized_shape) + ", eps=" + repr::py_float(eps) +
         ", elementwise_affine=" + repr::py_bool(elementwise_affine);
}

}  // namespace ferry::nn
