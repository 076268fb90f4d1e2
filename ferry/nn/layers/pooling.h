// nn::MaxPool2d and nn::AdaptiveAvgPool2d (torch::nn's) over [N, C, H, W] or [C, H, W]. Sizes are
// one value or two and print as given, as PyTorch's ("MaxPool2d(kernel_size=3, stride=2,
// padding=1, dilation=1, ceil_mode=False)", "AdaptiveAvgPool2d(output_size=(1, 1))").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

struct MaxPool2dOptions {
  std::vector<int64_t> kernel_size = {1};
  std::vector<int64_t> stride = {};  // empty: kernel_size
  std::vector<int64_t> padding = {0};
  std::vector<int64_t> dilation = {1};
  bool ceil_mode = false;
};

class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(MaxPool2dOptions options);
  explicit MaxPool2dImpl(int64_t kernel_size) : MaxPool2dImpl(MaxPool2dOptions{{kernel_size}}) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;
  MaxPool2dOptions options;
};
FERRY_MODULE(MaxPool2d);

class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(std::vector<int64_t> output_size);
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;
  std::vector<int64_t> output_size;  // one or two values, as given
};
FERRY_MODULE(AdaptiveAvgPool2d);

}  // namespace ferry::nn
