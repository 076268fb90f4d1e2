// nn::Linear: parameters, init and forward (see linear.h).
#include "ferry/nn/layers/linear.h"

#include <cmath>

#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"
#include "ferry/nn/layers/repr.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/linalg.h"

namespace ferry::nn {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias)
    : in_features(in_features), out_features(out_features) {
  FERRY_CHECK(in_features >= 0 && out_features >= 0,
              "Linear: expected non-negative in_features and out_features, given ", in_features,
              " and ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  bias = register_parameter("bias", with_bias ? empty({out_features}) : Tensor());
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& input) {
  return linear(input, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

std::string LinearImpl::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + repr::py_bool(bias.defined());
}

}  // namespace ferry::nn
