// ResNet: torchvision's blocks, stages and init, built from ferry::nn layers (see resnet.h).
#include "ferry/nn/models/resnet.h"

#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"

namespace ferry::nn::models {
namespace {

Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return Conv2d(Conv2dOptions{.in_channels = in,
                              .out_channels = out,
                              .kernel_size = {3},
                              .stride = {stride},
                              .padding = {1},
                              .bias = false});
}

Conv2d conv1x1(int64_t in, int64_t out, int64_t stride) {
  return Conv2d(Conv2dOptions{.in_channels = in,
                              .out_channels = out,
                              .kernel_size = {1},
                              .stride = {stride},
                              .bias = false});
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, Sequential down) {
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
  bn1 = register_module("bn1", BatchNorm2d(planes));
  relu = register_module("relu", ReLU(/*inplace=*/true));
  conv2 = register_module("conv2", conv3x3(planes, planes, 1));
  bn2 = register_module("bn2", BatchNorm2d(planes));
  if (down) downsample = register_module("downsample", down);
}

Tensor BasicBlockImpl::forward(const Tensor& x) {
  Tensor out = relu(bn1(conv1(x)));
  out = bn2(conv2(out));
  const Tensor identity = downsample ? downsample(x) : x;
  return relu(out + identity);
}

BottleneckImpl::BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, Sequential down) {
  conv1 = register_module("conv1", conv1x1(inplanes, planes, 1));
  bn1 = register_module("bn1", BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride));
  bn2 = register_module("bn2", BatchNorm2d(planes));
  conv3 = register_module("conv3", conv1x1(planes, planes * kExpansion, 1));
  bn3 = register_module("bn3", BatchNorm2d(planes * kExpansion));
  relu = register_module("relu", ReLU(/*inplace=*/true));
  if (down) downsample = register_module("downsample", down);
}

Tensor BottleneckImpl::forward(const Tensor& x) {
  Tensor out = relu(bn1(conv1(x)));
  out = relu(bn2(conv2(out)));
  out = bn3(conv3(out));
  const Tensor identity = downsample ? downsample(x) : x;
  return relu(out + identity);
}

ResNetImpl::ResNetImpl(bool bottleneck, std::vector<int64_t> layers, ResNetOptions options) {
  FERRY_CHECK(layers.size() == 4, "ResNet: expected 4 stages of blocks, given ", layers.size());
  init::InitSeed seed(options.seed);
  conv1 = register_module("conv1", Conv2d(Conv2dOptions{.in_channels = 3,
                                                        .out_channels = 64,
                                                        .kernel_size = {7},
                                                        .stride = {2},
                                                        .padding = {3},
                                                        .bias = false}));
  bn1 = register_module("bn1", BatchNorm2d(64));
  relu = register_module("relu", ReLU(/*inplace=*/true));
  maxpool = register_module(
      "maxpool", MaxPool2d(MaxPool2dOptions{.kernel_size = {3}, .stride = {2}, .padding = {1}}));
  layer1 = register_module("layer1", make_layer(bottleneck, 64, layers[0], 1));
  layer2 = register_module("layer2", make_layer(bottleneck, 128, layers[1], 2));
  layer3 = register_module("layer3", make_layer(bottleneck, 256, layers[2], 2));
  layer4 = register_module("layer4", make_layer(bottleneck, 512, layers[3], 2));
  avgpool = register_module("avgpool", AdaptiveAvgPool2d(std::vector<int64_t>{1, 1}));
  const int64_t expansion = bottleneck ? BottleneckImpl::kExpansion : BasicBlockImpl::kExpansion;
  fc = register_module("fc", Linear(512 * expansion, options.num_classes));

  // torchvision's init: convolutions Kaiming-normal (fan_out, relu); BN weight 1, bias 0 (the
  // layer's own default); fc keeps Linear's default.
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = dynamic_cast<Conv2dImpl*>(m.get())) {
      init::kaiming_normal_(conv->weight, 0.0, "fan_out", "relu");
    }
  }
  if (options.zero_init_residual) {
    for (const auto& m : modules(/*include_self=*/false)) {
      if (auto* b = dynamic_cast<BottleneckImpl*>(m.get())) init::zeros_(b->bn3->weight);
      if (auto* b = dynamic_cast<BasicBlockImpl*>(m.get())) init::zeros_(b->bn2->weight);
    }
  }
}

Sequential ResNetImpl::make_layer(bool bottleneck, int64_t planes, int64_t blocks, int64_t stride) {
  const int64_t expansion = bottleneck ? BottleneckImpl::kExpansion : BasicBlockImpl::kExpansion;
  Sequential down{nullptr};
  if (stride != 1 || inplanes_ != planes * expansion) {
    down =
        Sequential(conv1x1(inplanes_, planes * expansion, stride), BatchNorm2d(planes * expansion));
  }
  Sequential stage;
  auto block = [&](int64_t in, int64_t s, Sequential d) -> AnyModule {
    if (bottleneck) return Bottleneck(in, planes, s, d);
    return BasicBlock(in, planes, s, d);
  };
  stage->push_back(block(inplanes_, stride, down));
  inplanes_ = planes * expansion;
  for (int64_t i = 1; i < blocks; ++i) stage->push_back(block(inplanes_, 1, Sequential(nullptr)));
  return stage;
}

Tensor ResNetImpl::features(const Tensor& x) {
  FERRY_CHECK_AS(ShapeError, x.dim() == 4 && x.size(1) == 3,
                 "ResNet: expected input of shape [N, 3, H, W], given ", x.sizes());
  Tensor y = maxpool(relu(bn1(conv1(x))));
  y = layer4(layer3(layer2(layer1(y))));
  return avgpool(y).flatten(1);
}

Tensor ResNetImpl::forward(const Tensor& x) { return fc(features(x)); }

ResNet resnet18(ResNetOptions o) { return ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, o); }
ResNet resnet34(ResNetOptions o) { return ResNet(false, std::vector<int64_t>{3, 4, 6, 3}, o); }
ResNet resnet50(ResNetOptions o) { return ResNet(true, std::vector<int64_t>{3, 4, 6, 3}, o); }
ResNet resnet101(ResNetOptions o) { return ResNet(true, std::vector<int64_t>{3, 4, 23, 3}, o); }
ResNet resnet152(ResNetOptions o) { return ResNet(true, std::vector<int64_t>{3, 8, 36, 3}, o); }

}  // namespace ferry::nn::models
