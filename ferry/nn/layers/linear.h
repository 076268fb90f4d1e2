// nn::Linear (torch::nn::Linear): y = x W^T + b for inputs [..., in_features], with PyTorch's
// parameter names (weight [out, in], bias [out]), default init (Kaiming uniform, a = sqrt(5);
// bias uniform in +-1/sqrt(in)) and repr "Linear(in_features=3, out_features=4, bias=True)".
#pragma once

#include <cstdint>
#include <string>

#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  // Redraws weight and bias with the scheme above (from the current init generator).
  void reset_parameters();
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when built without one
};
FERRY_MODULE(Linear);

// Linear under PyTorch's class name for MultiheadAttention's out_proj, so the tree prints as
// PyTorch's does; it is a Linear in every other respect.
class NonDynamicallyQuantizableLinearImpl : public LinearImpl {
 public:
  using LinearImpl::LinearImpl;
};
FERRY_MODULE(NonDynamicallyQuantizableLinear);

}  // namespace ferry::nn
