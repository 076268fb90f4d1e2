// nn::LayerNorm (torch::nn::LayerNorm): normalizes over the trailing normalized_shape dims, with
// PyTorch's parameters (weight = 1, bias = 0, of that shape, when elementwise_affine) and repr
// "LayerNorm((64,), eps=1e-05, elementwise_affine=True)".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(std::vector<int64_t> normalized_shape, double eps = 1e-5,
                         bool elementwise_affine = true);
  void reset_parameters();
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  std::vector<int64_t> normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};
FERRY_MODULE(LayerNorm);

}  // namespace ferry::nn
