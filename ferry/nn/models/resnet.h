// ResNet-18/34/50/101/152 with torchvision's structure and parameter names (conv1, bn1, relu,
// maxpool, layer1..layer4 of BasicBlock or Bottleneck blocks with conv1/bn1/conv2/bn2[/conv3/
// bn3] and downsample.0/.1, avgpool, fc), stride on the 3x3 convolution of a Bottleneck (ResNet
// v1.5, as torchvision), so a torchvision state_dict loads by name and gives the same logits.
// Init as torchvision (Kaiming-normal fan_out convolutions, BN weight 1 and bias 0, PyTorch's
// default Linear), deterministic for a seed.
#pragma once

#include <cstdint>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/nn/layers/activation.h"
#include "ferry/nn/layers/batchnorm.h"
#include "ferry/nn/layers/container.h"
#include "ferry/nn/layers/conv.h"
#include "ferry/nn/layers/linear.h"
#include "ferry/nn/layers/pooling.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn::models {

struct ResNetOptions {
  int64_t num_classes = 1000;
  uint64_t seed = 0;                // the init generator's seed
  bool zero_init_residual = false;  // torchvision's option: last BN of each block starts at 0
};

// Two 3x3 convolutions (expansion 1).
class BasicBlockImpl : public Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, Sequential downsample);
  Tensor forward(const Tensor& x);

  Conv2d conv1{nullptr}, conv2{nullptr};
  BatchNorm2d bn1{nullptr}, bn2{nullptr};
  ReLU relu{nullptr};
  Sequential downsample{nullptr};  // empty when the identity fits
};
FERRY_MODULE(BasicBlock);

// 1x1, 3x3 (strided), 1x1 (expansion 4).
class BottleneckImpl : public Module {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, Sequential downsample);
  Tensor forward(const Tensor& x);

  Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  ReLU relu{nullptr};
  Sequential downsample{nullptr};
};
FERRY_MODULE(Bottleneck);

class ResNetImpl : public Module {
 public:
  // bottleneck: Bottleneck blocks (else BasicBlock); layers: blocks per stage (4 stages).
  ResNetImpl(bool bottleneck, std::vector<int64_t> layers, ResNetOptions options = {});
  // x [N, 3, H, W] -> logits [N, num_classes].
  Tensor forward(const Tensor& x);
  // Everything up to (and including) avgpool, flattened: [N, 512 * expansion].
  Tensor features(const Tensor& x);

  Conv2d conv1{nullptr};
  BatchNorm2d bn1{nullptr};
  ReLU relu{nullptr};
  MaxPool2d maxpool{nullptr};
  Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  AdaptiveAvgPool2d avgpool{nullptr};
  Linear fc{nullptr};

 private:
  Sequential make_layer(bool bottleneck, int64_t planes, int64_t blocks, int64_t stride);
  int64_t inplanes_ = 64;
};
FERRY_MODULE(ResNet);

ResNet resnet18(ResNetOptions options = {});
ResNet resnet34(ResNetOptions options = {});
ResNet resnet50(ResNetOptions options = {});
ResNet resnet101(ResNetOptions options = {});
ResNet resnet152(ResNetOptions options = {});

}  // namespace ferry::nn::models
