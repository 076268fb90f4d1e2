// ReLU, GELU and Dropout forwards (see activation.h).
#include "ferry/nn/layers/activation.h"

#include "ferry/core/error.h"
#include "ferry/nn/layers/repr.h"
#include "ferry/ops/math.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::nn {

Tensor ReLUImpl::forward(const Tensor& input) {
  if (!inplace) return relu(input);
  Tensor self = input;
  relu_(self);
  return self;
}

GELUImpl::GELUImpl(std::string approx) : approximate(std::move(approx)) {
  FERRY_CHECK(approximate == "none" || approximate == "tanh",
              "GELU: expected approximate 'none' or 'tanh', given '", approximate, "'");
}

Tensor GELUImpl::forward(const Tensor& input) { return gelu(input, approximate); }

DropoutImpl::DropoutImpl(double p, bool inplace) : p(p), inplace(inplace) {
  FERRY_CHECK(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
}

Tensor DropoutImpl::forward(const Tensor& input) {
  Tensor out = dropout(input, p, is_training());
  if (inplace && out.data_ptr() != input.data_ptr()) {
    Tensor self = input;
    self.copy_(out);
    return self;
  }
  return out;
}

std::string DropoutImpl::extra_repr() const {
  return "p=" + repr::py_float(p) + ", inplace=" + repr::py_bool(inplace);
}

}  // namespace ferry::nn
