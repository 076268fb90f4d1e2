// A model as the ordered layers a switch moves and runs: the unit of pipelined transmission.
// Each layer is a module whose weights (parameters and buffers) travel together, and a function
// that runs it on the previous layer's output. Running the layers in order gives the model's own
// output (tests check it bit for bit against forward()).
//
// Granularity follows the model's own sequential structure, as PipeSwitch's groups do: a ResNet
// is conv1, bn1, relu, maxpool, each residual block, avgpool and fc (ResNet-152: 4 + 50 + 2
// layers); BERT is the embeddings, each encoder layer and the pooler; a Sequential is its
// children.
//
// A layer takes one tensor, so BERT's other inputs travel beside it in a BertLayerInputs that its
// layers share: the embeddings read the token types and turn the attention mask into the additive
// mask (as BertModel::forward does), the encoder layers apply it, and the pooler leaves the last
// hidden state there before it pools. Set it before running the layers and read it after; a
// model's layers run one request at a time (the server guarantees it), so one per model suffices.
// Without a mask, every position is attended (the output is the pooler's). Layers share the model's
// modules: moving a layer's weights moves the model's.
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
// BERT's inputs besides input_ids, and its second output, for one run of its layers.
struct BertLayerInputs {
  Tensor attention_mask;     // [B, S] 0/1 on the model's device, or undefined: attend everywhere
  Tensor token_type_ids;     // [B, S] on the model's device, or undefined: all type 0
  Tensor extended_mask;      // set by the embeddings layer from attention_mask
  Tensor last_hidden_state;  // set by the pooler layer (the last encoder layer's output)
};

// Without `inputs`, the layers keep a private BertLayerInputs (no mask, type 0).
std::vector<SwitchLayer> switch_layers(const nn::models::BertModel& model,
                                       std::shared_ptr<BertLayerInputs> inputs = nullptr);
std::vector<SwitchLayer> switch_layers(const nn::Sequential& model);

// Runs the layers in order on `input`.
Tensor run_layers(const std::vector<SwitchLayer>& layers, const Tensor& input);

// The bytes of a module's parameters and buffers, each tensor counted once.
uint64_t weight_bytes(const nn::Module& module);

}  // namespace ferry::switch_
