// nn::Conv2d (torch::nn::Conv2d): 2-d convolution with PyTorch's parameter names (weight
// [out, in / groups, kH, kW], bias [out]), default init (Kaiming uniform, a = sqrt(5); bias
// uniform in +-1/sqrt(fan_in)) and repr ("Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2),
// padding=(3, 3), bias=False)"). Zero padding only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

// kernel_size, stride, padding and dilation take one value (both dims) or two.
struct Conv2dOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  std::vector<int64_t> kernel_size = {1};
  std::vector<int64_t> stride = {1};
  std::vector<int64_t> padding = {0};
  std::vector<int64_t> dilation = {1};
  int64_t groups = 1;
  bool bias = true;
};

class Conv2dImpl : public Module {
 public:
  explicit Conv2dImpl(Conv2dOptions options);
  Conv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv2dImpl(Conv2dOptions{.in_channels = in_channels,
                                 .out_channels = out_channels,
                                 .kernel_size = {kernel_size}}) {}
  void reset_parameters();
  // input [N, C, H, W] or [C, H, W].
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;

  Conv2dOptions options;  // every size expanded to two values
  Tensor weight, bias;
};
FERRY_MODULE(Conv2d);

}  // namespace ferry::nn
