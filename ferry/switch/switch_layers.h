// A model as the ordered layers a switch moves and runs: the unit of pipelined transmission.
// Each layer is a module whose weights (parameters and buffers) travel together, and a function
// that runs it on the previous layer's output. Running the layers in order gives the model's own
// output (tests check it bit for bit against forward()).
//
// Granularity follows the model's own sequential structure, as PipeSwitch's groups do: a ResNet
// is conv1, bn1, relu, maxpool, each residual block, avgpool and fc (ResNet-152: 4 + 50 + 2
// layers); BERT is the embeddings, each encoder layer and the pooler (its output is the pooler's,
// attention over every position); a Sequential is its children. Layers share the model's modules:
// moving a layer's weights moves the model's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/nn/layers/container.h"
#include "ferry/nn/models/bert.h"
#include "ferry/nn/models/resnet.h"
#include "ferry/nn/module.h"

namespace ferry::switch_ {

struct SwitchLayer {
  std::string name;                    // the module's dotted path: "conv1", "layer1.0", "fc"
  std::shared_ptr<nn::Module> module;  // holds the layer's weights
  std::function<Tensor(const Tensor&)> run;
};

std::vector<SwitchLayer> switch_layers(const nn::models::ResNet& model);
std::vector<SwitchLayer> switch_layers(const nn::models::BertModel& model);
std::vector<SwitchLayer> switch_layers(const nn::Sequential& model);

// Runs the layers in order on `input`.
Tensor run_layers(const std::vector<SwitchLayer>& layers, const Tensor& input);

// The bytes of a module's parameters and buffers, each tensor counted once.
uint64_t weight_bytes(const nn::Module& module);

}  // namespace ferry::switch_
